"""Slack messages as terminal text: what a thread looks like, without Slack (console, demo)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_LINK = re.compile(r"<([^<>|]+)\|([^<>]+)>")
_BARE = re.compile(r"<(https?://[^<>]+)>")
_USER = re.compile(r"<@([A-Z0-9]+)>")
_GROUP = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^<>]+))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)>")


def plain(mrkdwn: str, *, urls: bool = True) -> str:
    """Return mrkdwn as plain text: links as ``label (url)``, mentions as ``@name``."""
    text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if urls else m.group(2), mrkdwn)
    text = _BARE.sub(lambda m: m.group(1), text)
    text = _USER.sub(lambda m: f"@{m.group(1)}", text)
    text = _GROUP.sub(lambda m: f"@{m.group(2) or m.group(1)}", text)
    text = _SPECIAL.sub(lambda m: f"@{m.group(1)}", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _text(obj: Any) -> str:
    return str(obj.get("text", "")) if isinstance(obj, Mapping) else ""


def block_lines(block: Mapping[str, Any], *, urls: bool = True) -> list[str]:
    """Return the terminal lines of one Block Kit block."""
    kind = block.get("type")
    if kind == "header":
        return [_text(block.get("text")), ""]
    if kind == "divider":
        return ["─" * 40]
    if kind == "section":
        lines = plain(_text(block.get("text")), urls=urls).splitlines() if "text" in block else []
        fields = block.get("fields") or []
        for f in fields:
            parts = plain(_text(f), urls=urls).splitlines()
            if parts:
                lines.append("  " + " — ".join(p for p in parts if p))
        return [*lines, ""]
    if kind == "context":
        shown = [plain(_text(e), urls=urls) for e in block.get("elements") or []]
        return ["  " + "  ".join(s for s in shown if s.strip()), ""]
    if kind == "actions":
        buttons = [
            f"[ {_text(e.get('text'))} ]"
            for e in block.get("elements") or []
            if isinstance(e, Mapping)
        ]
        return ["  ".join(buttons), ""]
    if kind == "image":
        return [f"[image: {block.get('alt_text', '')}]", ""]
    return []


def render(blocks: Iterable[Mapping[str, Any]], *, urls: bool = True) -> str:
    """Return a message's blocks as terminal text."""
    lines: list[str] = []
    for block in blocks:
        lines.extend(block_lines(block, urls=urls))
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)
