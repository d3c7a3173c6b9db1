"""A local Slack server that enforces Slack's real checks, for tests and the lab.

It answers the Web API methods tritonguard calls at ``/api/<method>``, the way ``slack_sdk``
expects when its ``base_url`` points here: ``auth.test``, ``chat.postMessage`` and
``chat.update`` (with message metadata), ``conversations.list``, ``conversations.history``
and ``conversations.replies`` (metadata only with ``include_all_metadata``),
``files.getUploadURLExternal`` with its upload URL and ``files.completeUploadExternal`` (the
three steps of ``files_upload_v2``), ``usergroups.users.list`` and ``apps.connections.open``,
whose URL is a Socket Mode websocket: it says hello, delivers button clicks as
``interactive`` envelopes and waits for their acknowledgement. Like Slack it answers HTTP 200
with ``{"ok": false, "error": ...}`` for API errors: ``invalid_auth``/``not_authed`` for
tokens (and ``not_allowed_token_type`` for a bot token where an app token belongs),
``channel_not_found``, ``not_in_channel``, ``no_text``, ``msg_too_long`` (``text`` over
40 000 characters), ``invalid_blocks`` with Block Kit's limits (at most 50 blocks, section
text 3 000 characters, section fields 10 × 2 000, header text 150, context elements 10,
``actions`` 25 elements with buttons' text 75, ``block_id`` 255), ``thread_not_found``,
``message_not_found``. Rate limiting (HTTP 429 with ``Retry-After``), slow responses, server
errors, an outage, dropped connections and answers lost after the work was done can be
injected. Accepted messages are kept for inspection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

JsonObj = dict[str, Any]

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_BLOCK_ID = 255
MAX_MESSAGE_TEXT = 40000
MAX_ACTION_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_BUTTON_VALUE = 2000
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
    metadata: JsonObj | None = None
    files: list[JsonObj] | None = None


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
    drop_response_next: int = 0
    down: bool = False


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
        elif kind == "actions":
            errors.extend(_action_errors(block.get("elements"), at))
    return errors


def _action_errors(elements: Any, at: str) -> list[str]:
    """Return Slack's errors for an actions block's elements (buttons here)."""
    if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ACTION_ELEMENTS:
        return [
            f"must contain between 1 and {MAX_ACTION_ELEMENTS} items [json-pointer:{at}/elements]"
        ]
    errors: list[str] = []
    ids: set[str] = set()
    for j, el in enumerate(elements):
        where = f"{at}/elements/{j}"
        if not isinstance(el, dict) or el.get("type") != "button":
            errors.append(f"unsupported type [json-pointer:{where}/type]")
            continue
        text = el.get("text")
        if not isinstance(text, dict) or text.get("type") != "plain_text":
            errors.append(f"must be a plain_text object [json-pointer:{where}/text]")
        elif not 1 <= len(_text_of(text)) <= MAX_BUTTON_TEXT:
            errors.append(
                f"must be between 1 and {MAX_BUTTON_TEXT} characters [json-pointer:{where}/text]"
            )
        action_id = str(el.get("action_id", ""))
        if len(action_id) > MAX_ACTION_ID:
            errors.append(f"must be less than 256 characters [json-pointer:{where}/action_id]")
        if action_id and action_id in ids:
            errors.append(f"action_id must be unique [json-pointer:{where}/action_id]")
        ids.add(action_id)
        if len(str(el.get("value", ""))) > MAX_BUTTON_VALUE:
            errors.append(f"must be less than 2001 characters [json-pointer:{where}/value]")
        if el.get("style") not in (None, "primary", "danger"):
            errors.append(f"must be one of primary, danger [json-pointer:{where}/style]")
    return errors


@dataclass
class Upload:
    """A file reserved with files.getUploadURLExternal, and the bytes sent to its URL."""

    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    shared: bool = False


@dataclass
class Click:
    """A button click delivered over Socket Mode, and whether the app acknowledged it."""

    envelope_id: str
    payload: JsonObj
    acked: asyncio.Event


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
        self.app_tokens = {"xapp-fake-app-token"}
        self.app_token = "xapp-fake-app-token"
        self.user_groups: dict[str, set[str]] = {"S0ONCALL01": {"U0ALICE001", "U0BOB00002"}}
        self.uploads: dict[str, Upload] = {}
        self.sockets: list[web.WebSocketResponse] = []
        self.clicks: list[Click] = []
        self._tickets: set[str] = set()
        self._connected = asyncio.Event()
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
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop serving, ending calls whose clients gave up; messages are kept."""
        for ws in list(self.sockets):
            await ws.close()
        self.sockets.clear()
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

    def drop_response_next(self, count: int) -> None:
        """Do the next ``count`` calls, then close the connection before answering.

        The client cannot tell this from a call that never arrived: the post landed.
        """
        self.faults.drop_response_next = count

    def set_down(self, down: bool) -> None:
        """While down, answer every Web API call with HTTP 503 (an outage at Slack's edge)."""
        self.faults.down = down

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
        if self.faults.down and request.path.startswith("/api/"):
            self.calls.append(ApiCall(method, {}, 503, "down"))
            return web.Response(
                status=503,
                text="<html><body>Slack is down</body></html>",
                content_type="text/html",
            )
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
        for key in ("blocks", "attachments", "metadata", "files"):
            if isinstance(params.get(key), str):
                try:
                    params[key] = json.loads(params[key])
                except ValueError as exc:
                    raise _SlackError("invalid_blocks_format") from exc
        return params

    @staticmethod
    def _token(request: web.Request, params: JsonObj) -> str:
        auth = request.headers.get("Authorization", "")
        return auth.removeprefix("Bearer ").strip() if auth else str(params.get("token", ""))

    def _check_token(self, request: web.Request, params: JsonObj) -> None:
        token = self._token(request, params)
        if not token:
            raise _SlackError("not_authed")
        if token in self.app_tokens:
            raise _SlackError("not_allowed_token_type")
        if token not in self.tokens:
            raise _SlackError("invalid_auth")

    def _check_app_token(self, request: web.Request, params: JsonObj) -> None:
        token = self._token(request, params)
        if not token:
            raise _SlackError("not_authed")
        if token in self.tokens:
            raise _SlackError("not_allowed_token_type")
        if token not in self.app_tokens:
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
                "conversations.history": self._history,
                "conversations.replies": self._replies,
                "files.getUploadURLExternal": lambda p: self._get_upload_url(request, p),
                "files.completeUploadExternal": self._complete_upload,
                "usergroups.users.list": self._group_users,
                "apps.connections.open": lambda p: self._connections_open(request),
            }
            handler = handlers.get(method)
            if handler is None:
                raise _SlackError("unknown_method")
            if method == "apps.connections.open":
                self._check_app_token(request, params)
            elif method != "api.test":
                self._check_token(request, params)
            result = {"ok": True, **handler(params)}
            self.calls.append(ApiCall(method, params, 200, None))
            if self.faults.drop_response_next > 0:
                self.faults.drop_response_next -= 1
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError
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

    @staticmethod
    def _metadata(params: JsonObj) -> JsonObj | None:
        meta = params.get("metadata")
        if meta is None:
            return None
        if (
            not isinstance(meta, dict)
            or not isinstance(meta.get("event_type"), str)
            or not isinstance(meta.get("event_payload"), dict)
        ):
            raise _SlackError("invalid_metadata_format")
        return meta

    def _new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._seq):06d}"

    def _post_message(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_write(params)
        text, blocks = self._content(params)
        meta = self._metadata(params)
        thread_ts = str(params.get("thread_ts") or "") or None
        if thread_ts is not None and self._top(ch.id, thread_ts) is None:
            raise _SlackError("thread_not_found")
        msg = StoredMessage(ch.id, self._new_ts(), text, blocks, thread_ts, metadata=meta)
        self.messages.append(msg)
        return {"channel": ch.id, "ts": msg.ts, "message": self._render(msg, metadata=False)}

    def _update(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_write(params)
        ts = str(params.get("ts") or "")
        text, blocks = self._content(params)
        meta = self._metadata(params)
        for msg in self.messages:
            if msg.channel == ch.id and msg.ts == ts:
                msg.text, msg.blocks, msg.edits = text, blocks, msg.edits + 1
                if meta is not None:
                    msg.metadata = meta
                return {
                    "channel": ch.id,
                    "ts": ts,
                    "text": text,
                    "message": self._render(msg, metadata=False),
                }
        raise _SlackError("message_not_found")

    def _top(self, channel: str, ts: str) -> StoredMessage | None:
        return next(
            (m for m in self.messages if m.channel == channel and m.ts == ts and not m.thread_ts),
            None,
        )

    def _channel_for_read(self, params: JsonObj) -> Channel:
        ch = self.channel(str(params.get("channel") or ""))
        if ch is None:
            raise _SlackError("channel_not_found")
        if not ch.is_member:
            raise _SlackError("not_in_channel")
        return ch

    @staticmethod
    def _flag(params: JsonObj, name: str) -> bool:
        return str(params.get(name, "")).lower() in ("1", "true")

    def _history(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_read(params)
        oldest = float(params.get("oldest") or 0.0)
        limit = min(int(params.get("limit") or 100), 999)
        meta = self._flag(params, "include_all_metadata")
        top = [
            m
            for m in self.messages
            if m.channel == ch.id and not m.thread_ts and float(m.ts) > oldest
        ]
        newest_first = sorted(top, key=lambda m: float(m.ts), reverse=True)[:limit]
        return {
            "messages": [self._render(m, metadata=meta) for m in newest_first],
            "has_more": len(top) > limit,
        }

    def _replies(self, params: JsonObj) -> JsonObj:
        ch = self._channel_for_read(params)
        ts = str(params.get("ts") or "")
        parent = self._top(ch.id, ts)
        if parent is None:
            raise _SlackError("thread_not_found")
        meta = self._flag(params, "include_all_metadata")
        thread = [parent] + [m for m in self.messages if m.channel == ch.id and m.thread_ts == ts]
        return {"messages": [self._render(m, metadata=meta) for m in thread], "has_more": False}

    def thread_of(self, root: StoredMessage) -> list[StoredMessage]:
        """Return the replies in a root's thread, oldest first."""
        return [m for m in self.messages if m.channel == root.channel and m.thread_ts == root.ts]

    def roots_in(self, ref: str) -> list[StoredMessage]:
        """Return the top-level messages of a channel, oldest first."""
        return [m for m in self.messages_in(ref) if not m.thread_ts]

    # -- files (files_upload_v2) ------------------------------------------------------------

    def _get_upload_url(self, request: web.Request, params: JsonObj) -> JsonObj:
        filename = str(params.get("filename") or "")
        try:
            length = int(params.get("length") or 0)
        except ValueError:
            raise _SlackError("invalid_arguments") from None
        if not filename or length <= 0:
            raise _SlackError("invalid_arguments")
        file_id = f"F{next(self._seq):09d}"
        self.uploads[file_id] = Upload(file_id, filename, length)
        return {
            "upload_url": f"http://{self.host}:{self.port}/upload/v1/{file_id}",
            "file_id": file_id,
        }

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        upload = self.uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="unknown upload")
        body = await request.read()
        if request.content_type.startswith("multipart/"):
            return web.Response(status=400, text="expected the raw file as the body")
        upload.content = body
        self.calls.append(ApiCall("upload", {"file_id": upload.file_id}, 200, None))
        return web.Response(status=200, text=f"OK - {len(body)}")

    def _complete_upload(self, params: JsonObj) -> JsonObj:
        files = params.get("files")
        if not isinstance(files, list) or not files:
            raise _SlackError("invalid_arguments")
        shared: list[JsonObj] = []
        for f in files:
            upload = self.uploads.get(str(f.get("id") if isinstance(f, dict) else ""))
            if upload is None or upload.shared:
                raise _SlackError("file_not_found")
            if upload.content is None or len(upload.content) != upload.length:
                raise _SlackError("file_upload_size_mismatch")
            upload.shared = True
            shared.append(
                {
                    "id": upload.file_id,
                    "name": upload.filename,
                    "title": str(f.get("title") or upload.filename),
                    "size": upload.length,
                }
            )
        channel_id = params.get("channel_id")
        if channel_id:
            ch = self._channel_for_write({"channel": channel_id})
            thread_ts = str(params.get("thread_ts") or "") or None
            if thread_ts is not None and self._top(ch.id, thread_ts) is None:
                raise _SlackError("thread_not_found")
            comment = str(params.get("initial_comment") or "")
            self.messages.append(
                StoredMessage(ch.id, self._new_ts(), comment, [], thread_ts, files=shared)
            )
        return {"files": [{"id": f["id"], "title": f["title"]} for f in shared]}

    def file_content(self, file_id: str) -> bytes | None:
        """Return the bytes uploaded for a file."""
        upload = self.uploads.get(file_id)
        return None if upload is None else upload.content

    def _group_users(self, params: JsonObj) -> JsonObj:
        group = str(params.get("usergroup") or "")
        if group not in self.user_groups:
            raise _SlackError("no_such_subteam")
        return {"users": sorted(self.user_groups[group])}

    # -- Socket Mode ------------------------------------------------------------------------

    def _connections_open(self, request: web.Request) -> JsonObj:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return {"url": f"ws://{self.host}:{self.port}/socket?ticket={ticket}"}

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)  # a URL opens one connection, as Slack's do
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.append(ws)
        self._connected.set()
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": len(self.sockets),
                    "debug_info": {"host": "fake", "approximate_connection_time": 3600},
                    "connection_info": {"app_id": "A0FAKE0001"},
                }
            )
        )
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(msg.data)
                except ValueError:
                    continue
                envelope = data.get("envelope_id") if isinstance(data, dict) else None
                for click in self.clicks:
                    if click.envelope_id == envelope:
                        click.acked.set()
        finally:
            if ws in self.sockets:
                self.sockets.remove(ws)
            if not self.sockets:
                self._connected.clear()
        return ws

    async def wait_connected(self, timeout_s: float = 5.0) -> None:
        """Wait until a Socket Mode client is connected."""
        async with asyncio.timeout(timeout_s):
            await self._connected.wait()

    async def click(
        self, message: StoredMessage, action_id: str, user: str, *, timeout_s: float = 3.0
    ) -> bool:
        """Click a button of a message as ``user``; return whether the app acknowledged it.

        Like Slack, only a button the message shows can be clicked, and the app has three
        seconds to acknowledge the envelope.
        """
        button, block_id = None, None
        for block in message.blocks:
            for el in block.get("elements") or [] if block.get("type") == "actions" else []:
                if el.get("action_id") == action_id:
                    button, block_id = el, block.get("block_id")
        if button is None:
            raise ValueError(f"message {message.ts} has no button {action_id!r}")
        if not self.sockets:
            raise RuntimeError("no Socket Mode client is connected")
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "team_id": "T0FAKE0001"},
            "api_app_id": "A0FAKE0001",
            "team": {"id": "T0FAKE0001", "domain": "tritonguard-fake"},
            "channel": {"id": message.channel},
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
            },
            "message": self._render(message, metadata=True),
            "trigger_id": uuid.uuid4().hex,
            "response_url": f"http://{self.host}:{self.port}/response/{uuid.uuid4().hex}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": block_id,
                    "value": button.get("value", ""),
                    "text": button.get("text"),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        click = Click(uuid.uuid4().hex, payload, asyncio.Event())
        self.clicks.append(click)
        envelope = {
            "envelope_id": click.envelope_id,
            "type": "interactive",
            "accepts_response_payload": False,
            "payload": payload,
        }
        await self.sockets[0].send_str(json.dumps(envelope))
        try:
            async with asyncio.timeout(timeout_s):
                await click.acked.wait()
        except TimeoutError:
            return False
        return True

    @staticmethod
    def _render(msg: StoredMessage, *, metadata: bool = False) -> JsonObj:
        out: JsonObj = {"type": "message", "text": msg.text, "ts": msg.ts, "bot_id": "B0FAKE0001"}
        if msg.blocks:
            out["blocks"] = msg.blocks
        if msg.thread_ts:
            out["thread_ts"] = msg.thread_ts
        if msg.files:
            out["files"] = msg.files
        if metadata and msg.metadata is not None:
            out["metadata"] = msg.metadata
        return out


__all__ = ["ApiCall", "Channel", "Click", "FakeSlack", "StoredMessage", "Upload", "validate_blocks"]
