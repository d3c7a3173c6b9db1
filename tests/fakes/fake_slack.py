"""A local Slack Web API server that enforces Slack's real checks, for tests and the lab.

It answers the methods tritonguard calls (``auth.test``, ``chat.postMessage``, ``chat.update``,
``conversations.list``) at ``/api/<method>``, the way ``slack_sdk`` expects when its
``base_url`` points here. Like Slack it answers HTTP 200 with ``{"ok": false, "error": ...}``
for API errors: ``invalid_auth``/``not_authed`` for tokens, ``channel_not_found``,
``not_in_channel``, ``no_text``, ``msg_too_long`` (``text`` over 40 000 characters),
``invalid_blocks`` with Block Kit's limits (at most 50 blocks, section text 3 000 characters,
section fields 10 × 2 000, header text 150, context elements 10, ``block_id`` 255) and
``message_not_found``. Rate limiting (HTTP 429 with ``Retry-After``), slow responses, server
errors and dropped connections can be injected. Accepted messages are kept for inspection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

JsonObj = dict[str, Any]

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_BLOCK_ID = 255
MAX_MESSAGE_TEXT = 40000
BLOCK_TYPES = frozenset(
    {"section", "header", "divider", "context", "actions", "image", "rich_text", "markdown"}
)


@dataclass
class Channel:
    """A channel the fake workspace knows; ``is_member`` says whether the bot was invited."""

    id: str
    name: str
    is_member: bool = True


@dataclass
class StoredMessage:
    """A message as Slack stored it (and as ``chat.update`` last left it)."""

    channel: str
    ts: str
    text: str
    blocks: list[JsonObj]
    thread_ts: str | None = None
    edits: int = 0


@dataclass(frozen=True)
class ApiCall:
    """One call received, for assertions in tests."""

    method: str
    params: JsonObj
    http_status: int
    error: str | None


@dataclass
class _Faults:
    delay_s: float = 0.0
    rate_limit_next: int = 0
    retry_after_s: int = 1
    fail_next: int = 0
    fail_status: int = 503
    drop_next: int = 0


class _SlackError(Exception):
    def __init__(self, error: str, errors: list[str] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.errors = errors or []


def _text_of(obj: Any) -> str:
    return str(obj.get("text", "")) if isinstance(obj, dict) else ""


def validate_blocks(blocks: Any) -> list[str]:
    """Return Slack's error strings for a blocks array (empty when Slack would accept it)."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    errors: list[str] = []
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"must contain at most {MAX_BLOCKS} items [json-pointer:/blocks]")
    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
            errors.append(f"unsupported type [json-pointer:{at}/type]")
            continue
        if len(str(block.get("block_id", ""))) > MAX_BLOCK_ID:
            errors.append(
                f"must be less than {MAX_BLOCK_ID + 1} characters [json-pointer:{at}/block_id]"
            )
        kind = block["type"]
        if kind == "section":
            text, fields = block.get("text"), block.get("fields")
            if text is None and not fields:
                errors.append(f"must provide text or fields [json-pointer:{at}]")
            if text is not None and not _text_of(text):
                errors.append(f"must be more than 0 characters [json-pointer:{at}/text/text]")
            if len(_text_of(text)) > MAX_SECTION_TEXT:
                errors.append(
                    f"must be less than {MAX_SECTION_TEXT + 1} characters "
                    f"[json-pointer:{at}/text/text]"
                )
            if fields is not None:
                if not isinstance(fields, list) or len(fields) > MAX_FIELDS:
                    errors.append(
                        f"must contain at most {MAX_FIELDS} items [json-pointer:{at}/fields]"
                    )
                else:
                    for j, f in enumerate(fields):
                        if len(_text_of(f)) > MAX_FIELD_TEXT:
                            errors.append(
                                f"must be less than {MAX_FIELD_TEXT + 1} characters "
                                f"[json-pointer:{at}/fields/{j}/text]"
                            )
        elif kind == "header":
            text = block.get("text")
            if not isinstance(text, dict) or text.get("type") != "plain_text":
                errors.append(f"must be a plain_text object [json-pointer:{at}/text]")
            elif not _text_of(text) or len(_text_of(text)) > MAX_HEADER_TEXT:
                errors.append(
                    f"must be between 1 and {MAX_HEADER_TEXT} characters "
                    f"[json-pointer:{at}/text/text]"
                )
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_CONTEXT_ELEMENTS:
                errors.append(
                    f"must contain between 1 and {MAX_CONTEXT_ELEMENTS} items "
                    f"[json-pointer:{at}/elements]"
                )
            else:
                for j, el in enumerate(elements):
                    if len(_text_of(el)) > MAX_SECTION_TEXT:
                        errors.append(
                            f"must be less than {MAX_SECTION_TEXT + 1} characters "
                            f"[json-pointer:{at}/elements/{j}/text]"
                        )
    return errors


class FakeSlack:
    """A Slack Web API on loopback: real error semantics, stored messages, injectable faults."""

    def __init__(self, *, token: str = "xoxb-fake-token", host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.tokens = {token}
        self.token = token
        self.channels: list[Channel] = [
            Channel("C0ALERTS01", "tritonguard-alerts"),
            Channel("C0ONCALL02", "ml-oncall"),
            Channel("C0PRIVATE3", "finance", is_member=False),
        ]
        self.messages: list[StoredMessage] = []
        self.calls: list[ApiCall] = []
        self.faults = _Faults()
        self._seq = itertools.count(1)
        self._runner: web.AppRunner | None = None
        # Calls being handled. A client that gave up (a timeout against a delay) leaves its
        # handler running: aiohttp forgets the connection and never cancels it.
        self._inflight: set[asyncio.Task[Any]] = set()

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give ``slack_sdk`` clients (ends with ``/api/``)."""
        return f"http://{self.host}:{self.port}/api/"

    async def start(self) -> None:
        """Start serving on a free port (or the port used before a :meth:`stop`)."""
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("*", "/api/{method}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop serving, ending calls whose clients gave up; messages are kept."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        pending = [t for t in self._inflight if not t.done() and t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- fault injection --------------------------------------------------------------------

    def rate_limit_next(self, count: int, retry_after_s: int = 1) -> None:
        """Answer the next ``count`` calls with HTTP 429 and ``Retry-After: retry_after_s``."""
        self.faults.rate_limit_next = count
        self.faults.retry_after_s = retry_after_s

    def set_delay(self, seconds: float) -> None:
        """Delay every response by ``seconds``."""
        self.faults.delay_s = seconds

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` calls with an HTTP ``status`` error page."""
        self.faults.fail_next = count
        self.faults.fail_status = status

    def drop_next(self, count: int) -> None:
        """Close the connection without answering for the next ``count`` calls."""
        self.faults.drop_next = count

    # -- inspection -------------------------------------------------------------------------

    def channel(self, ref: str) -> Channel | None:
        """Resolve a channel by ID, name or ``#name``."""
        name = ref.removeprefix("#")
        return next((c for c in self.channels if ref == c.id or c.name == name), None)

    def messages_in(self, ref: str) -> list[StoredMessage]:
        """Messages stored in a channel (by ID or name), oldest first."""
        ch = self.channel(ref)
        return [m for m in self.messages if ch is not None and m.channel == ch.id]

    # -- HTTP -------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None and task not in self._inflight:
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
        method = request.match_info.get("method", "")
        if self.faults.delay_s:
            await asyncio.sleep(self.faults.delay_s)
        if self.faults.drop_next > 0:
            self.faults.drop_next -= 1
            self.calls.append(ApiCall(method, {}, 0, "dropped"))
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        if self.faults.rate_limit_next > 0:
            self.faults.rate_limit_next -= 1
            self.calls.append(ApiCall(method, {}, 429, "ratelimited"))
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(self.faults.retry_after_s)},
            )
        if self.faults.fail_next > 0:
            self.faults.fail_next -= 1
            self.calls.append(ApiCall(method, {}, self.faults.fail_status, "http_error"))
            return web.Response(
                status=self.faults.fail_status,
                text="<html><body>Service Unavailable</body></html>",
                content_type="text/html",
            )
        return await handler(request)

    async def _params(self, request: web.Request) -> JsonObj:
        params: JsonObj = dict(request.query)
        ctype = request.content_type
        if request.can_read_body:
            if ctype == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    params.update(body)
            else:
                form = await request.post()
                params.update({k: v for k, v in form.items() if isinstance(v, str)})
        for key in ("blocks", "attachments"):
            if isinstance(params.get(key), str):
                try:
                    params[key] = json.loads(params[key])
                except ValueError as exc:
                    raise _SlackError("invalid_blocks_format") from exc
        return params

    def _check_token(self, request: web.Request, params: JsonObj) -> None:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth else str(params.get("token", ""))
        if not token:
            raise _SlackError("not_authed")
        if token not in self.tokens:
            raise _SlackError("invalid_auth")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: JsonObj = {}
        try:
            params = await self._params(request)
            handlers: dict[str, Callable[[JsonObj], JsonObj]] = {
                "api.test": lambda p: {"args": p},
                "auth.test": self._auth_test,
                "chat.postMessage": self._post_message,
                "chat.update": self._update,
                "conversations.list": self._conversations_list,
            }
            handler = handlers.get(method)
            if handler is None:
                raise _SlackError("unknown_method")
            if method != "api.test":
                self._check_token(request, params)
            result = {"ok": True, **handler(params)}
            self.calls.append(ApiCall(method, params, 200, None))
        except _SlackError as err:
            result = {"ok": False, "error": err.error}
            if err.errors:
                result["errors"] = err.errors
                result["response_metadata"] = {"messages": [f"[ERROR] {e}" for e in err.errors]}
            self.calls.append(ApiCall(method, params, 200, err.error))
        return web.json_response(result)

    def _auth_test(self, _params: JsonObj) -> JsonObj:
        return {
            "url": "https://tritonguard-fake.slack.com/",
            "team": "Fake Workspace",
            "user": "tritonguard",
            "team_id": "T0FAKE0001",
            "user_id": "U0FAKE0001",
            "bot_id": "B0FAKE0001",
            "is_enterprise_install": False,
        }

    def _conversations_list(self, _params: JsonObj) -> JsonObj:
        return {
            "channels": [
                {
                    "id": c.id,
                    "name": c.name,
                    "is_channel": True,
                    "is_private": False,
                    "is_archived": False,
                    "is_member": c.is_member,
                }
                for c in self.channels
            ],
            "response_metadata": {"next_cursor": ""},
        }

    def _channel_for_write(self, params: JsonObj) -> Channel:
        ref = params.get("channel")
        if not ref:
            raise _SlackError("channel_not_found")
        ch = self.channel(str(ref))
        if ch is None:
            raise _SlackError("channel_not_found")
        if not ch.is_member:
            raise _SlackError("not_in_channel")
        return ch

    @staticmethod
    def _content(params: JsonObj) -> tuple[str, list[JsonObj]]:
        text = str(params.get("text") or "")
        blocks = params.get("blocks")
        if not text and not blocks:
            raise _SlackError("no_text")
        if len(text) > MAX_MESSAGE_TEXT:
            raise _SlackError("msg_too_long")
        if blocks is not None:
            errors = validate_blocks(blocks)
            if errors:
                raise _SlackError("invalid_blocks", errors)
        return text, list(blocks or [])

    def _post_message(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_write(params)
        text, blocks = self._content(params)
        ts = f"{int(time.time())}.{next(self._seq):06d}"
        thread_ts = params.get("thread_ts")
        msg = StoredMessage(ch.id, ts, text, blocks, str(thread_ts) if thread_ts else None)
        self.messages.append(msg)
        return {"channel": ch.id, "ts": ts, "message": self._render(msg)}

    def _update(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_write(params)
        ts = str(params.get("ts") or "")
        text, blocks = self._content(params)
        for msg in self.messages:
            if msg.channel == ch.id and msg.ts == ts:
                msg.text, msg.blocks, msg.edits = text, blocks, msg.edits + 1
                return {"channel": ch.id, "ts": ts, "text": text, "message": self._render(msg)}
        raise _SlackError("message_not_found")

    @staticmethod
    def _render(msg: StoredMessage) -> JsonObj:
        out: JsonObj = {"type": "message", "text": msg.text, "ts": msg.ts, "bot_id": "B0FAKE0001"}
        if msg.blocks:
            out["blocks"] = msg.blocks
        return out


__all__ = ["ApiCall", "Channel", "FakeSlack", "StoredMessage", "validate_blocks"]
