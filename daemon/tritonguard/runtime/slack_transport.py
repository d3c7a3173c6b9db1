"""Where the Slack outbox delivers: the Web API, the console and log without a token, a recording.

:class:`SlackTransport` posts through the typed Slack client. It tags every message with its
outbox key in Slack message metadata, so a message whose answer was lost is found in the
channel (or thread) before it is posted again, and an incident's open root is found by its
cause and subject when another replica or an earlier run posted it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritonguard.clients.ports import PostedMessage, SlackApi
from tritonguard.clients.slack_api import SlackError
from tritonguard.core import slack_text
from tritonguard.core.slack_thread import Outgoing, short_key
from tritonguard.logs import get_logger
from tritonguard.runtime.slack_outbox import DeliveryError, ThreadRef

EVENT_ROOT = "tritonguard_incident"
EVENT_REPLY = "tritonguard_message"
# How far back a root is searched for: longer than any outage the outbox rides out in order.
ROOT_SEARCH_S = 6 * 3600.0
# Slack errors that a retry cannot fix.
_PERMANENT = ("invalid",)


def _payload(message: dict[str, Any]) -> dict[str, Any]:
    meta = message.get("metadata") or {}
    payload = meta.get("event_payload") if isinstance(meta, dict) else None
    return payload if isinstance(payload, dict) else {}


class SlackTransport:
    """Delivers outbox messages with the Slack Web API, each exactly once."""

    def __init__(self, api: SlackApi) -> None:
        self.api = api
        self._channels: dict[str, str] = {}

    async def _channel(self, ref: str) -> str:
        if ref not in self._channels:
            self._channels[ref] = await self.api.channel_id(ref)
        return self._channels[ref]

    async def deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        """Deliver one message; raise DeliveryError saying whether it may have landed."""
        try:
            return await self._deliver(item, thread, check=check)
        except SlackError as exc:
            raise DeliveryError(
                str(exc),
                ambiguous=exc.ambiguous,
                permanent=exc.kind in _PERMANENT,
                retry_after_s=exc.retry_after_s if exc.kind == "rate_limited" else None,
            ) from None

    async def _deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        message = item.message
        text = message.text if message is not None else ""
        blocks = message.blocks if message is not None else []
        key = short_key(item.key)
        if item.kind == "post_root":
            channel = await self._channel(item.channel)
            found = await self._find_root(channel, item)
            meta = {"event_type": EVENT_ROOT, "event_payload": {**item.metadata, "key": key}}
            if found is not None:
                # Our own post whose answer was lost, or the open root of the same incident
                # from another replica or an earlier run: go on in that thread.
                await self.api.update(
                    PostedMessage(found, channel), text, blocks, metadata=self._open(meta)
                )
                return ThreadRef(channel, found)
            posted = await self.api.post(channel, text, blocks, metadata=self._open(meta))
            return ThreadRef(posted.channel, posted.ts)
        if thread is None:
            raise DeliveryError("no thread to post into", ambiguous=False, permanent=True)
        if item.kind == "update_root":
            meta = {"event_type": EVENT_ROOT, "event_payload": {**item.metadata, "key": key}}
            await self.api.update(
                PostedMessage(thread.root_ts, thread.channel), text, blocks, metadata=meta
            )
            return thread
        if item.kind == "update_reply":
            # The worker puts the ts of the reply to rewrite in the item (``ts``).
            meta = {"event_type": EVENT_REPLY, "event_payload": {"key": key}}
            target = str(item.metadata.get("ts", ""))
            await self.api.update(
                PostedMessage(target, thread.channel), text, blocks, metadata=meta
            )
            return ThreadRef(thread.channel, target)
        if item.kind == "reply":
            if check:
                ts = await self._find_reply(thread, key)
                if ts is not None:
                    return ThreadRef(thread.channel, ts)
            meta = {"event_type": EVENT_REPLY, "event_payload": {"key": key}}
            posted = await self.api.post(
                thread.channel, text, blocks, thread_ts=thread.root_ts, metadata=meta
            )
            return ThreadRef(posted.channel, posted.ts)
        return await self._upload(item, thread, key, check=check)

    @staticmethod
    def _open(meta: dict[str, Any]) -> dict[str, Any]:
        payload = dict(meta["event_payload"])
        payload.setdefault("state", "open")
        return {**meta, "event_payload": payload}

    async def _find_root(self, channel: str, item: Outgoing) -> str | None:
        """Return the ts of this root if it landed, or of the incident's open root, or None."""
        opened = float(item.metadata.get("opened_at") or 0.0)
        key = short_key(item.key)
        messages = await self.api.history(channel, oldest=max(0.0, opened - ROOT_SEARCH_S))
        for m in messages:
            if _payload(m).get("key") == key:
                return str(m.get("ts"))
        for m in messages:
            p = _payload(m)
            if (
                p.get("state") == "open"
                and p.get("cause") == item.metadata.get("cause")
                and p.get("subject") == item.metadata.get("subject")
            ):
                return str(m.get("ts"))
        return None

    async def _find_reply(self, thread: ThreadRef, key: str) -> str | None:
        for m in await self.api.history(thread.channel, thread_ts=thread.root_ts):
            if _payload(m).get("key") == key:
                return str(m.get("ts"))
        return None

    async def _upload(
        self, item: Outgoing, thread: ThreadRef, key: str, *, check: bool
    ) -> ThreadRef:
        file = item.file or {}
        path = Path(file.get("path", ""))
        # The key is in the file's name: a lost answer is checked for by name.
        filename = f"{key}-{file.get('filename') or path.name}"
        if check:
            for m in await self.api.history(thread.channel, thread_ts=thread.root_ts):
                if any(f.get("name") == filename for f in m.get("files") or []):
                    return ThreadRef(thread.channel, str(m.get("ts")))
        try:
            # A chart is tens of KB on local disk; reading it does not hold the loop up.
            content = path.read_bytes()  # noqa: ASYNC240
        except OSError as exc:
            raise DeliveryError(
                f"chart {path}: {exc.strerror or exc}", ambiguous=False, permanent=True
            ) from None
        comment = item.message.text if item.message is not None else ""
        await self.api.upload(
            thread.channel,
            thread.root_ts,
            content,
            filename=filename,
            title=file.get("title", filename),
            comment=comment,
        )
        return thread


class ConsoleTransport:
    """Without a Slack token: the same content to the console and the structured log.

    The thread is printed as Slack would show it (``core.slack_text``); the log line carries
    the text, the evidence and fix as rendered, and a chart's file path.
    """

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self.write = write
        self._log = get_logger("tritonguard.slack")
        self._ts = itertools.count(1)

    async def deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        """Print and log one message; it always arrives."""
        rendered = slack_text.render(item.message.blocks) if item.message is not None else ""
        file = item.file or {}
        ref = thread or ThreadRef(item.channel, f"console.{next(self._ts):06d}")
        self._log.info(
            "slack message (no token: shown here instead)",
            kind=item.kind,
            channel=item.channel,
            thread=item.thread,
            text=item.message.text if item.message is not None else "",
            message=rendered,
            chart=file.get("path"),
        )
        if self.write is not None:
            where = {
                "post_root": "new thread",
                "update_root": "root updated",
                "update_reply": "reply updated",
            }.get(item.kind, "in thread")
            head = f"── Slack {item.channel} · {where} · {item.thread}"
            body = rendered if item.kind != "upload" else f"[chart: {file.get('path')}]"
            self.write(f"{head}\n{body}\n")
        return ref


class RecordingTransport:
    """Records each Slack call the daemon would make (``replay --format slack``)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._ts = itertools.count(1)

    async def deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        """Record the call; a root gets a made-up ``ts`` the thread's calls refer to."""
        message = item.message
        call: dict[str, Any] = {
            "method": {
                "post_root": "chat.postMessage",
                "reply": "chat.postMessage",
                "update_root": "chat.update",
                "update_reply": "chat.update",
                # The name slack_sdk's client call has, the one a playbook author knows.
                "upload": "files_upload_v2",
            }[item.kind],
            "channel": item.channel,
            "thread": item.thread,
            "thread_ts": thread.root_ts if thread is not None else None,
            "text": message.text if message is not None else "",
            "blocks": message.blocks if message is not None else [],
            "files": [item.file] if item.file else [],
        }
        if item.kind == "update_root" and thread is not None:
            call["ts"] = thread.root_ts
        if item.kind == "update_reply":
            call["ts"] = item.metadata.get("ts")
        self.calls.append(call)
        if thread is not None:
            return thread
        return ThreadRef(item.channel, f"{next(self._ts):010d}.000000")
