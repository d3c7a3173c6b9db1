"""Slack notifications for tritonguard: post and update diagnoses that always fit Slack's limits.

``SlackNotifier`` wraps ``slack_sdk``'s ``AsyncWebClient`` with retry handlers (rate limits
honour ``Retry-After`` within a wait budget; a dropped connection or a 500/503 is retried once)
and a per-request timeout. :func:`fit_blocks` and :func:`fit_text` shorten whatever a diagnosis
produces to Block Kit's limits, marking each cut, so a large diagnosis is posted shortened
rather than rejected. Every failure becomes a :class:`SlackError` with a one-line reason.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from tritonguard.clients.ports import PostedMessage, SlackApi

JsonObj = dict[str, Any]

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 3000
MAX_BLOCK_ID = 255
MAX_MESSAGE_TEXT = 40000
# How long one call may wait out Slack's rate limiting in all. A post is a playbook step, in
# line with the remediation after it; Slack may ask for a minute, which no fix should wait.
DEFAULT_MAX_RATE_LIMIT_WAIT_S = 10.0
# Slack always sends Retry-After with a 429; this stands in should it not.
_RETRY_AFTER_UNKNOWN_S = 1.0

SlackErrorKind = Literal[
    "auth", "channel", "invalid", "rate_limited", "down", "timeout", "server", "unknown"
]
_ERROR_KINDS: dict[str, SlackErrorKind] = {
    "not_authed": "auth",
    "invalid_auth": "auth",
    "account_inactive": "auth",
    "token_revoked": "auth",
    "token_expired": "auth",
    "missing_scope": "auth",
    "channel_not_found": "channel",
    "not_in_channel": "channel",
    "is_archived": "channel",
    "message_not_found": "channel",
    "invalid_blocks": "invalid",
    "invalid_blocks_format": "invalid",
    "msg_too_long": "invalid",
    "no_text": "invalid",
    "ratelimited": "rate_limited",
    "rate_limited": "rate_limited",
}


class SlackError(Exception):
    """A Slack call failed; ``str()`` is one line naming the call and the reason."""

    def __init__(
        self,
        kind: SlackErrorKind,
        message: str,
        error: str | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: SlackErrorKind = kind
        self.error = error
        self.retry_after_s = retry_after_s

    @property
    def ambiguous(self) -> bool:
        """Whether Slack may have done it anyway: the answer was lost, not a refusal."""
        return self.kind in ("down", "timeout", "server", "unknown")


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, saying how much was cut.

    An unclosed ``` code fence left by the cut is closed so the rest still renders.
    """
    if len(text) <= limit:
        return text
    note_len = len(f"… (+{len(text)} more characters)")
    keep = max(0, limit - note_len - 4)
    head = text[:keep]
    fence = "\n```" if head.count("```") % 2 else ""
    head = head[: max(0, keep - len(fence))] + fence
    return f"{head}… (+{len(text) - len(head) + len(fence)} more characters)"[:limit]


def fit_text(text: str, limit: int = MAX_MESSAGE_TEXT) -> str:
    """Shorten a message's ``text`` to Slack's 40 000-character limit."""
    return truncate(text, limit)


def _fit_text_obj(obj: Any, limit: int) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        obj["text"] = truncate(obj["text"], limit) or " "
    return obj


def _fit_block(block: JsonObj) -> JsonObj:
    kind = block.get("type")
    if len(str(block.get("block_id", ""))) > MAX_BLOCK_ID:
        block.pop("block_id")
    if kind == "section":
        if "text" in block:
            _fit_text_obj(block["text"], MAX_SECTION_TEXT)
        fields = block.get("fields")
        if isinstance(fields, list):
            block["fields"] = [_fit_text_obj(f, MAX_FIELD_TEXT) for f in fields[:MAX_FIELDS]]
    elif kind == "header":
        text = block.get("text")
        if isinstance(text, dict):
            text["type"] = "plain_text"
            text["text"] = truncate(str(text.get("text") or ""), MAX_HEADER_TEXT) or " "
    elif kind == "context":
        elements = block.get("elements")
        if isinstance(elements, list):
            kept = [_fit_text_obj(e, MAX_CONTEXT_TEXT) for e in elements[:MAX_CONTEXT_ELEMENTS]]
            block["elements"] = kept
    return block


def fit_blocks(blocks: Sequence[Mapping[str, Any]]) -> list[JsonObj]:
    """Return a copy of ``blocks`` that fits Block Kit's limits, with every cut marked.

    Long texts end with ``… (+N more characters)``; sections keep at most 10 fields and context
    blocks 10 elements; past 50 blocks the last one says how many were left out.
    """
    fitted = [_fit_block(copy.deepcopy(dict(b))) for b in blocks]
    if len(fitted) > MAX_BLOCKS:
        omitted = len(fitted) - (MAX_BLOCKS - 1)
        fitted = fitted[: MAX_BLOCKS - 1]
        fitted.append(
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"_{omitted} more blocks left out to fit Slack's limit of "
                        f"{MAX_BLOCKS}_",
                    }
                ],
            }
        )
    return fitted


def _retry_after_s(headers: Mapping[str, Any]) -> float | None:
    """Return the seconds a ``Retry-After`` header asks for, or None without a usable one."""
    for key, value in headers.items():
        if key.lower() == "retry-after":
            first = value[0] if isinstance(value, list) and value else value
            try:
                return max(0.0, float(first))
            except (TypeError, ValueError):
                return None
    return None


class _RateLimitWithinBudget(AsyncRateLimitErrorRetryHandler):
    """Wait out a 429 as long as Slack asks, while the waits of one call fit ``max_wait_s``.

    Past the budget the 429 stands and the call fails at once as rate limited: the caller
    (a playbook) goes on with its next step instead of waiting for Slack.
    """

    _WAITED = "tritonguard_rate_limit_waited_s"

    def __init__(self, max_retry_count: int, max_wait_s: float) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait_s = max_wait_s

    def _wait_for(self, response: HttpResponse | None) -> float:
        asked = None if response is None else _retry_after_s(response.headers)
        return _RETRY_AFTER_UNKNOWN_S if asked is None else asked

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        waited = float((state.custom_values or {}).get(self._WAITED, 0.0))
        return waited + self._wait_for(response) <= self.max_wait_s

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        wait = self._wait_for(response)
        values = state.custom_values if state.custom_values is not None else {}
        values[self._WAITED] = float(values.get(self._WAITED, 0.0)) + wait
        state.custom_values = values
        state.next_attempt_requested = True
        await asyncio.sleep(wait)
        state.increment_current_attempt()


def translate_error(exc: BaseException, what: str) -> SlackError:
    """Turn a slack_sdk, aiohttp or asyncio exception into a one-line SlackError."""
    if isinstance(exc, SlackError):
        return exc
    if isinstance(exc, SlackApiError):
        response = exc.response
        status = int(getattr(response, "status_code", 0) or 0)
        data = getattr(response, "data", None)
        error = data.get("error") if isinstance(data, dict) else None
        if status == 429:
            asked = _retry_after_s(getattr(response, "headers", None) or {})
            after = "" if asked is None else f", Retry-After {asked:g} s"
            return SlackError(
                "rate_limited",
                f"{what}: rate limited by Slack (HTTP 429{after})",
                str(error or "ratelimited"),
                retry_after_s=asked,
            )
        if error:
            details = data.get("errors") if isinstance(data, dict) else None
            extra = f" ({details[0]})" if isinstance(details, list) and details else ""
            kind = _ERROR_KINDS.get(str(error), "unknown")
            return SlackError(kind, _one_line(f"{what}: Slack said {error}{extra}"), str(error))
        if status >= 500:
            return SlackError("server", f"{what}: Slack answered HTTP {status}")
        return SlackError("unknown", _one_line(f"{what}: HTTP {status}: {exc}"))
    if isinstance(exc, TimeoutError):
        return SlackError("timeout", f"{what}: Slack did not answer in time")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return SlackError(
            "down", _one_line(f"{what}: cannot reach Slack: {type(exc).__name__}: {exc}")
        )
    return SlackError("unknown", _one_line(f"{what}: {type(exc).__name__}: {exc}"))


class SlackNotifier(SlackApi):
    """Posts and updates tritonguard's messages in Slack.

    ``base_url`` defaults to Slack's (``https://slack.com/api/``); tests and the lab point it at
    :class:`tests.fakes.fake_slack.FakeSlack`. ``timeout_s`` bounds each HTTP request; rate
    limits are retried up to ``rate_limit_retries`` times, waiting as long as Slack asks while
    the waits of one call add up to at most ``max_rate_limit_wait_s``.
    """

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 10.0,
        rate_limit_retries: int = 2,
        max_rate_limit_wait_s: float = DEFAULT_MAX_RATE_LIMIT_WAIT_S,
        retries: bool = True,
    ) -> None:
        # The outbox retries itself (``retries=False``): it checks whether a post whose answer
        # was lost landed before it posts again, which a blind retry in the SDK cannot.
        handlers = (
            [
                AsyncConnectionErrorRetryHandler(max_retry_count=1),
                _RateLimitWithinBudget(rate_limit_retries, max_rate_limit_wait_s),
                AsyncServerErrorRetryHandler(max_retry_count=1),
            ]
            if retries
            else []
        )
        kwargs: dict[str, Any] = {"token": token, "timeout": timeout_s, "retry_handlers": handlers}
        if base_url is not None:
            kwargs["base_url"] = base_url
        self.client = AsyncWebClient(**kwargs)
        self.timeout_s = timeout_s

    async def check_auth(self) -> str:
        """Verify the token (``auth.test``); return ``"user@team"`` for logs."""
        try:
            resp = await self.client.auth_test()
        except Exception as exc:
            raise translate_error(exc, "auth.test") from exc
        return f"{resp.get('user')}@{resp.get('team')}"

    async def post(
        self,
        channel: str,
        text: str,
        blocks: Sequence[Mapping[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> PostedMessage:
        """Post a message (shortened to fit Slack's limits) and return where it landed.

        ``metadata`` is Slack message metadata (``event_type``, ``event_payload``): it is how
        tritonguard finds its own messages again.
        """
        what = f"chat.postMessage to {channel}"
        try:
            resp = await self.client.chat_postMessage(
                channel=channel,
                text=fit_text(text),
                blocks=fit_blocks(blocks) if blocks else None,
                thread_ts=thread_ts,
                metadata=dict(metadata) if metadata else None,
            )
        except Exception as exc:
            raise translate_error(exc, what) from exc
        return PostedMessage(ts=str(resp.get("ts")), channel=str(resp.get("channel")))

    async def update(
        self,
        message: PostedMessage,
        text: str,
        blocks: Sequence[Mapping[str, Any]] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> PostedMessage:
        """Replace a posted message's text and blocks (e.g. when an incident resolves)."""
        what = f"chat.update of {message.ts} in {message.channel}"
        try:
            resp = await self.client.chat_update(
                channel=message.channel,
                ts=message.ts,
                text=fit_text(text),
                blocks=fit_blocks(blocks) if blocks else None,
                metadata=dict(metadata) if metadata else None,
            )
        except Exception as exc:
            raise translate_error(exc, what) from exc
        return PostedMessage(ts=str(resp.get("ts")), channel=str(resp.get("channel")))

    async def channel_id(self, ref: str) -> str:
        """Return the ID of a channel given by ID or (``#``)name (``conversations.list``)."""
        name = ref.removeprefix("#")
        if name[:1] in ("C", "G", "D") and name.isupper() and name.isalnum():
            return name
        cursor = ""
        while True:
            try:
                resp = await self.client.conversations_list(
                    cursor=cursor or None, limit=200, types="public_channel,private_channel"
                )
            except Exception as exc:
                raise translate_error(exc, "conversations.list") from exc
            for ch in resp.get("channels") or []:
                if ch.get("name") == name:
                    return str(ch["id"])
            cursor = str((resp.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                raise SlackError("channel", f"conversations.list: no channel named {ref}")

    async def history(
        self, channel: str, *, oldest: float | None = None, thread_ts: str | None = None
    ) -> list[dict[str, Any]]:
        """Return a channel's messages since ``oldest`` (or a thread's), with their metadata.

        At most a few hundred: enough to find a message tritonguard posted minutes ago.
        """
        what = f"conversations.{'replies' if thread_ts else 'history'} of {channel}"
        try:
            if thread_ts:
                resp = await self.client.conversations_replies(
                    channel=channel, ts=thread_ts, limit=200, include_all_metadata=True
                )
            else:
                resp = await self.client.conversations_history(
                    channel=channel,
                    oldest=f"{oldest:.6f}" if oldest is not None else None,
                    limit=200,
                    include_all_metadata=True,
                )
        except Exception as exc:
            raise translate_error(exc, what) from exc
        return [dict(m) for m in resp.get("messages") or []]

    async def upload(
        self,
        channel: str,
        thread_ts: str,
        content: bytes,
        *,
        filename: str,
        title: str,
        comment: str = "",
    ) -> str:
        """Upload a file into a thread (``files_upload_v2``); return the file's ID."""
        what = f"files upload of {filename} to {channel}"
        try:
            resp = await self.client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                content=content,
                filename=filename,
                title=title,
                initial_comment=comment or None,
            )
        except Exception as exc:
            raise translate_error(exc, what) from exc
        file = resp.get("file") or {}
        return str(file.get("id", ""))

    async def group_members(self, group: str) -> frozenset[str]:
        """Return the user IDs in a user group (``usergroups.users.list``)."""
        try:
            resp = await self.client.usergroups_users_list(usergroup=group)
        except Exception as exc:
            raise translate_error(exc, f"usergroups.users.list of {group}") from exc
        return frozenset(str(u) for u in resp.get("users") or [])

    async def close(self) -> None:
        """Close the client's HTTP session, if it opened one."""
        session = getattr(self.client, "session", None)
        if session is not None and not session.closed:
            await session.close()
