"""One bounded HTTP POST to another replica's webhook, over aiohttp; no aiohttp types leak."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp

# Read in pieces this large until the reply's end or the caller's limit.
_CHUNK_BYTES = 16 * 1024


class PostError(Exception):
    """The post did not get an HTTP answer: a bad URL, no connection, a broken reply."""


async def post_json(
    url: str, body: bytes, headers: Mapping[str, str], *, max_reply_bytes: int
) -> tuple[int, bytes]:
    """POST ``body`` (JSON) to ``url``; return the status and at most ``max_reply_bytes`` of reply.

    Redirects are not followed: the post carries the daemon's bearer token, which must reach
    the address the Lease names and nothing it points on to. The caller bounds the time.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PostError(f"not an http(s) URL: {url!r}")
    if any(c in text for item in headers.items() for text in item for c in "\r\n\0"):
        raise PostError("a header would carry a line break")
    sent = {"Content-Type": "application/json", **headers}
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=sent, allow_redirects=False) as reply,
        ):
            kept = bytearray()
            while len(kept) < max_reply_bytes:
                piece = await reply.content.read(min(_CHUNK_BYTES, max_reply_bytes - len(kept)))
                if not piece:
                    break
                kept += piece
            return reply.status, bytes(kept)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        # ValueError: a URL aiohttp cannot use (a bad port, say).
        raise PostError(f"{parts.netloc}: {type(exc).__name__}: {exc}") from None
