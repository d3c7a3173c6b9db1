"""Keeps the engine's baselines across restarts: saved now and then, taken back at start.

Without them a restarted daemon (a container restart, or a new pod when the state is on a
PersistentVolume, see docs/deploy.md) is blind for ``baseline_min_span_s`` or longer: nothing
to judge a subject by until it has learnt history again, and a fault under way at start
would be learnt as normal. Each replica keeps its own file, as it keeps its own audit
trail. A saved baseline is the subject's reference until its own history is back, for at
most ``baseline_lookback_s`` after it was saved.

The file is written whole to a temporary name and renamed over the old one, so a crash
mid-write leaves the previous file; reading stops at a cap, and a line that does not parse
is reported by number and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from tritonguard.core.baseline_records import MAX_LINE_CHARS, decode_line, encode
from tritonguard.core.baselines import Baseline
from tritonguard.core.engine import Engine
from tritonguard.core.features import SubjectKey
from tritonguard.logs import get_logger

# How often baselines are saved: a restart loses at most this much learning, and saving
# costs about one evaluation's baseline medians, so once a minute is under 1 % of a tick's CPU.
SAVE_EVERY_S = 60.0
# 40,000 subjects at about 2 KB a line, with room: a file far larger is not ours.
MAX_FILE_BYTES = 256 * 1024 * 1024
# Refused lines named in the log, one line each; the rest only counted.
MAX_NAMED = 5

_log = get_logger("tritonguard.baselines")


def baselines_path(audit_db_path: Path) -> Path:
    """Return where the baselines are saved: beside the audit database, in the state volume."""
    return audit_db_path.parent / f"{audit_db_path.stem}-baselines.jsonl.gz"


def write_baselines(path: Path, rows: list[tuple[SubjectKey, float, Baseline]]) -> int:
    """Write the rows to ``path`` atomically; return the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own, not the pid: every container's process is pid 1.
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        # Level 1: the file is rewritten every minute; size matters less than the CPU.
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as out:
            out.writelines(encode(rows))
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path.stat().st_size


def read_baselines(
    path: Path, now: float, max_age_s: float
) -> tuple[list[tuple[SubjectKey, float, Baseline]], list[str]]:
    """Return the saved baselines still young enough, and a line per problem found.

    A missing file is a first start (no problem). Lines past the file cap, a line longer
    than a line can be, a truncated gzip stream: each ends or skips the read with a
    problem naming the file and line, and what was read before still counts.
    """
    if not path.exists():
        return [], []
    problems: list[str] = []
    taken: list[tuple[SubjectKey, float, Baseline]] = []
    stale = 0
    read = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="strict") as f:
            number = 0
            while True:
                line = f.readline(MAX_LINE_CHARS + 1)
                if not line:
                    break
                number += 1
                read += len(line)
                if read > MAX_FILE_BYTES:
                    problems.append(
                        f"{path}:{number}: over {MAX_FILE_BYTES} bytes, the rest is not read; "
                        "delete the file if it is not this daemon's"
                    )
                    break
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    # Skip the rest of the over-long line without holding it, still counted
                    # against the file's cap: one endless line must not read the disk dry.
                    while (rest := f.readline(MAX_LINE_CHARS)) and read <= MAX_FILE_BYTES:
                        read += len(rest)
                        if rest.endswith("\n"):
                            break
                    problems.append(f"{path}:{number}: line over {MAX_LINE_CHARS} characters")
                    if read > MAX_FILE_BYTES:
                        problems.append(
                            f"{path}:{number}: over {MAX_FILE_BYTES} bytes, the rest is not "
                            "read; delete the file if it is not this daemon's"
                        )
                        break
                    continue
                if not line.strip():
                    continue
                try:
                    key, saved_at, base = decode_line(line)
                except ValueError as exc:
                    problems.append(f"{path}:{number}: {exc}")
                    continue
                if now - saved_at > max_age_s or saved_at > now:
                    stale += 1
                    continue
                taken.append((key, saved_at, base))
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        problems.append(
            f"{path}: unreadable after {len(taken)} subjects ({exc}); they are kept, the "
            "rest is learnt again"
        )
    if stale:
        _log.info("saved baselines too old to use", path=str(path), subjects=stale)
    return taken, problems


class BaselineKeeper:
    """Saves the engine's baselines every ``save_every_s`` and once more at shutdown."""

    def __init__(
        self,
        engine: Engine,
        path: Path,
        *,
        clock: Callable[[], float],
        save_every_s: float = SAVE_EVERY_S,
    ) -> None:
        self.engine = engine
        self.path = path
        self.clock = clock
        self.save_every_s = save_every_s
        self.saved = 0
        self.save_failures = 0
        self._restored = False

    def restore(self) -> int:
        """Give the engine the saved baselines still young enough; return how many."""
        lookback = self.engine.t.baseline_lookback_s
        return self._take(*read_baselines(self.path, self.clock(), lookback))

    def _take(self, taken: list[tuple[SubjectKey, float, Baseline]], problems: list[str]) -> int:
        for problem in problems[:MAX_NAMED]:
            _log.warning("saved baseline skipped", problem=problem)
        if len(problems) > MAX_NAMED:
            _log.warning("more saved baselines skipped", count=len(problems) - MAX_NAMED)
        count = self.engine.carry_baselines(taken)
        if count:
            _log.info("baselines carried over a restart", path=str(self.path), subjects=count)
        return count

    async def save(self) -> None:
        """Save now; a failure is logged and the next save tries again."""
        # The medians come from the engine's state, so they are read in the loop; the
        # encoding and the disk run in a thread.
        rows = self.engine.export_baselines(self.clock())
        try:
            size = await asyncio.to_thread(write_baselines, self.path, rows)
        except (OSError, ValueError) as exc:  # a full disk; a value JSON cannot hold
            self.save_failures += 1
            _log.warning("baselines not saved", path=str(self.path), error=str(exc))
            return
        self.saved += 1
        _log.debug("baselines saved", path=str(self.path), subjects=len(rows), bytes=size)

    async def run(self) -> None:
        """Take the saved baselines back, then save every ``save_every_s`` until cancelled.

        The file is read in a thread: a large one must not hold the daemon's start (its
        probes) up. Subjects evaluated before it is read start learning as without it.
        """
        if not self._restored:
            # Once: a restart of this task by the supervisor must not carry old baselines
            # over ones the subjects have learnt since.
            self._restored = True
            lookback = self.engine.t.baseline_lookback_s
            read = await asyncio.to_thread(read_baselines, self.path, self.clock(), lookback)
            self._take(*read)
        while True:
            await asyncio.sleep(self.save_every_s)
            await self.save()
