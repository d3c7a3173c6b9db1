"""Reload playbooks on SIGHUP and when their files change; a broken set never replaces a good one.

The files are polled, not watched with inotify: a Kubernetes ConfigMap volume changes by
swapping a ``..data`` symlink atomically, which some watchers miss and polling cannot, and a
few small YAML files cost nothing to hash every couple of seconds. Each change is loaded and
validated whole. A set that loads replaces the stage's playbooks at once (work in flight
keeps the playbook it started with) and is saved in the audit database, so a restart with a
broken file starts with the last good set instead of crash-looping. A set that does not load
leaves the last good one active; ``/readyz``, ``tritonguard_playbooks_reload_ok`` and the log
say what is wrong and where.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonguard.actions.registry import catalog
from tritonguard.core.playbook_model import (
    Playbook,
    PlaybookError,
    check_unique,
    load_playbooks_text,
)
from tritonguard.logs import get_logger
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_files import load_playbook_files, playbook_paths
from tritonguard.runtime.playbook_stage import PlaybookStage


@dataclass(slots=True)
class ReloadState:
    """What the reloader last did, for /readyz and the daemon's metrics."""

    playbooks: int = 0
    files: list[str] = field(default_factory=list)
    loaded_at: float | None = None
    ok: bool = True
    # The problems of the newest set that did not load (file:line:col lines), if it failed.
    problems: list[str] = field(default_factory=list)
    failed_at: float | None = None
    # Where the active set came from: the files, or the audit database at start-up.
    source: str = "files"
    reloads: int = 0
    failures: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form shown in /readyz."""
        return {
            "count": self.playbooks,
            "files": self.files,
            "loaded_at": self.loaded_at,
            "source": self.source,
            "last_reload_ok": self.ok,
            "problems": self.problems[:5],
            "more_problems": max(0, len(self.problems) - 5),
            "failed_at": self.failed_at,
        }


def fingerprint(paths: list[Path]) -> str:
    """Return a digest of which playbook files there are and what they hold."""
    digest = hashlib.sha256()
    for path in playbook_paths(paths):
        digest.update(str(path).encode())
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            # An unreadable file is a change too (its load will say why).
            digest.update(f"unreadable:{exc.errno}".encode())
    return digest.hexdigest()


def file_texts(paths: list[Path]) -> dict[str, str]:
    """Return path → text of every playbook file (what the audit database keeps)."""
    out = {}
    for path in playbook_paths(paths):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            out[str(path)] = path.read_text(encoding="utf-8")
    return out


def load_saved(texts: dict[str, str]) -> list[Playbook]:
    """Load a set saved in the audit database; PlaybookError when even that does not load."""
    books: list[Playbook] = []
    cat = catalog()
    for source, text in sorted(texts.items()):
        books += load_playbooks_text(text, source, cat)
    check_unique(books)
    return books


class PlaybookReloader:
    """Keeps the stage's playbooks in step with their files (``run``), and reloads on request."""

    def __init__(
        self,
        stage: PlaybookStage,
        paths: list[Path],
        store: AuditStore,
        *,
        interval_s: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stage = stage
        self.paths = list(paths)
        self.store = store
        self.interval_s = interval_s
        self.clock = clock
        self.state = ReloadState()
        self._seen = ""
        self._wake = asyncio.Event()
        self._log = get_logger("tritonguard.playbooks")

    def start(self, books: list[Playbook]) -> None:
        """Record the set the daemon started with (loaded from the files) and save it."""
        self._seen = fingerprint(self.paths)
        self._activate(books, "files")
        self.store.save_playbook_set(file_texts(self.paths), self.clock())

    def start_from_saved(self, problems: list[str]) -> bool:
        """Start with the last good set in the audit database when the files do not load.

        Return False when there is none (or it does not load either): the daemon cannot start.
        """
        saved = self.store.last_playbook_set()
        if saved is None:
            return False
        try:
            books = load_saved(saved)
        except PlaybookError:
            return False
        self._seen = fingerprint(self.paths)
        self._activate(books, "audit database (the files do not load)")
        self._failed(problems)
        return True

    def request(self) -> None:
        """Reload now (SIGHUP)."""
        self._log.info("playbook reload requested")
        self._seen = ""
        self._wake.set()

    def check(self) -> bool:
        """Reload if the files changed since the last look; return whether a set was loaded."""
        seen = fingerprint(self.paths)
        if seen == self._seen:
            return False
        self._seen = seen
        try:
            books = load_playbook_files(self.paths)
        except PlaybookError as exc:
            self._failed(exc.problems)
            return False
        before = {b.name for b in self.stage.playbooks}
        self._activate(books, "files")
        self.state.reloads += 1
        self.store.save_playbook_set(file_texts(self.paths), self.clock())
        after = {b.name for b in books}
        self._log.info(
            "playbooks reloaded",
            playbooks=len(books),
            added=sorted(after - before),
            removed=sorted(before - after),
        )
        return True

    async def run(self) -> None:
        """Poll the files every ``interval_s`` (or at once after SIGHUP) until cancelled."""
        while True:
            self._wake.clear()
            self.check()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._wake.wait()

    def _activate(self, books: list[Playbook], source: str) -> None:
        self.stage.playbooks = list(books)
        self.state.playbooks = len(books)
        self.state.files = [str(p) for p in playbook_paths(self.paths)]
        self.state.loaded_at = self.clock()
        self.state.source = source
        self.state.ok = True
        self.state.problems = []
        self.state.failed_at = None

    def _failed(self, problems: list[str]) -> None:
        self.state.ok = False
        self.state.problems = list(problems)
        self.state.failed_at = self.clock()
        self.state.failures += 1
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        self._log.error(
            "playbooks not reloaded: the new set does not load; the last good set stays active",
            problem=(problems[0] if problems else "unknown") + more,
            active=self.state.playbooks,
            hint="run tritonguard validate on the playbook files",
        )
