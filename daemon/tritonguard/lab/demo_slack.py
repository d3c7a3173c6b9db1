"""The demo's Slack: each incident's thread drawn in the terminal as the console transport shows it.

Without a token the daemon's outbox delivers to :class:`ConsoleTransport`, which writes each
message as Slack would show it. This wraps it for a rich terminal: every message in a panel
titled with where it goes, and an update of the root (``chat.update``) as the lines that
changed rather than the whole root again.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from rich.console import RenderableType
from rich.panel import Panel
from rich.text import Text

from tritonguard.core.slack_thread import Outgoing
from tritonguard.runtime.slack_outbox import ThreadRef
from tritonguard.runtime.slack_transport import ConsoleTransport

_STYLE = {"post_root": "red", "reply": "cyan", "upload": "magenta", "update_root": "yellow"}


class TerminalSlack:
    """A transport for the outbox: delivers through the console transport, drawn with rich."""

    def __init__(self, show: Callable[[RenderableType], None]) -> None:
        self.show = show
        self.console = ConsoleTransport(self._write)
        self.roots: dict[str, list[str]] = {}
        self.threads: set[str] = set()
        self._item: Outgoing | None = None

    async def deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        """Show one message; like the console, it always arrives."""
        self._item = item
        try:
            return await self.console.deliver(item, thread, check=check)
        finally:
            self._item = None

    def _write(self, shown: str) -> None:
        item = self._item
        head, _, body = shown.rstrip("\n").partition("\n")
        if item is None:
            self.show(Text(shown))
            return
        title = head.removeprefix("── ")
        self.threads.add(item.thread)
        if item.kind == "update_root":
            before = self.roots.get(item.thread, [])
            after = body.splitlines()
            self.roots[item.thread] = after
            changed = root_changes(before, after)
            if not changed:
                return
            self.show(
                Panel(
                    Text("\n".join(changed)),
                    title=title + " (changed lines)",
                    title_align="left",
                    border_style=_STYLE[item.kind],
                )
            )
            return
        if item.kind == "post_root":
            self.roots[item.thread] = body.splitlines()
        if item.kind == "upload" and item.message is not None and item.message.text:
            # The console names the file; the comment Slack shows above it says what it is.
            body = f"{item.message.text}\n{body}"
        self.show(
            Panel(Text(body), title=title, title_align="left", border_style=_STYLE[item.kind])
        )


def root_changes(before: list[str], after: list[str]) -> list[str]:
    """Return the root's lines that an update added or changed (blank lines and stamps aside)."""
    added = [
        line[1:]
        for line in difflib.ndiff(before, after)
        if line.startswith("+ ") and line[2:].strip()
    ]
    return [line.strip() for line in added]
