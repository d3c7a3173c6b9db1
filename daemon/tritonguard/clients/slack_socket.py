"""Button clicks from Slack over Socket Mode: no public ingress, the daemon dials out.

:class:`SlackSocket` is the only module that imports ``slack_sdk.socket_mode``. It opens a
connection with the app-level token (``xapp-…``, scope ``connections:write``) through
slack_sdk's aiohttp client, acknowledges every envelope at once (Slack wants that within
three seconds, whatever the daemon then does with it) and hands each button of a
``block_actions`` payload to a callback as a :class:`ButtonClick`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient


@dataclass(frozen=True, slots=True)
class ButtonClick:
    """One button clicked in a message: which, with what value, by whom, where."""

    action_id: str
    value: str
    user: str
    channel: str
    message_ts: str


OnClick = Callable[[ButtonClick], Awaitable[None]]


def clicks_of(payload: Mapping[str, Any]) -> list[ButtonClick]:
    """Return the button clicks of an interactive payload (``block_actions`` only)."""
    if payload.get("type") != "block_actions":
        return []
    user = payload.get("user") or {}
    container = payload.get("container") or {}
    channel = (payload.get("channel") or {}).get("id") or container.get("channel_id") or ""
    out = []
    for action in payload.get("actions") or []:
        if not isinstance(action, Mapping) or action.get("type") != "button":
            continue
        out.append(
            ButtonClick(
                action_id=str(action.get("action_id") or ""),
                value=str(action.get("value") or ""),
                user=str(user.get("id") or ""),
                channel=str(channel),
                message_ts=str(container.get("message_ts") or ""),
            )
        )
    return out


class SlackSocket:
    """A Socket Mode connection that passes button clicks to ``on_click``.

    ``base_url`` is the Web API's (``apps.connections.open`` gives the websocket URL), so
    tests point it at the fake Slack. The SDK reconnects by itself when the connection drops
    or Slack asks it to, until :meth:`close`.
    """

    def __init__(
        self,
        app_token: str,
        on_click: OnClick,
        *,
        base_url: str | None = None,
        ping_interval_s: float = 5.0,
    ) -> None:
        self.app_token = app_token
        self.on_click = on_click
        self.base_url = base_url
        self.ping_interval_s = ping_interval_s
        self.client: SocketModeClient | None = None
        self.connected = asyncio.Event()
        self._log = logging.getLogger("tritonguard.slack.socket")

    async def _on_request(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        # The acknowledgement comes first: what the click then causes (a group lookup, a
        # reload) may take longer than Slack waits, and an unacknowledged envelope is retried.
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        if req.type != "interactive":
            return
        for click in clicks_of(req.payload):
            try:
                await self.on_click(click)
            except Exception:  # one bad click must not end the connection
                self._log.exception("a button click could not be handled")

    async def start(self) -> None:
        """Connect (the SDK retries until it can); return once the first session is open."""
        kwargs: dict[str, Any] = {}
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        client = SocketModeClient(
            app_token=self.app_token,
            web_client=AsyncWebClient(**kwargs),
            ping_interval=self.ping_interval_s,
            logger=self._log,
        )
        client.socket_mode_request_listeners.append(self._on_request)
        self.client = client
        await client.connect()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated
        self.connected.set()

    async def close(self) -> None:
        """Close the connection and its HTTP session."""
        client, self.client = self.client, None
        self.connected.clear()
        if client is not None:
            await client.close()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated
