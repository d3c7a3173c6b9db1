"""Poll until a condition holds or a deadline passes; a miss says what was awaited and what was seen."""

from __future__ import annotations

import asyncio
import inspect
import linecache
import time
from collections.abc import Callable

# Fine enough that a test waits little past the moment its condition holds, coarse enough
# that polling a daemon's HTTP endpoint does not crowd out the daemon on a small machine.
POLL_S = 0.02


def describe(predicate: Callable[[], object]) -> str:
    """Name ``predicate`` for a failure message: a function's name, or a lambda's expression."""
    name = getattr(predicate, "__qualname__", "")
    code = getattr(predicate, "__code__", None)
    if not name.endswith("<lambda>") or code is None:
        return name or repr(predicate)
    # The lambda's instructions point into its source file; the widest span is its expression
    # (empty spans are the interpreter's own bookkeeping).
    spans = [
        ((line, col), (end_line, end_col))
        for line, end_line, col, end_col in code.co_positions()
        if line is not None
        and end_line is not None
        and col is not None
        and end_col is not None
        and (line, col) != (end_line, end_col)
    ]
    lines = linecache.getlines(code.co_filename)
    if not spans or not lines:
        return name
    (line, col) = min(start for start, _ in spans)
    (end_line, end_col) = max(end for _, end in spans)
    if line == end_line:
        text = lines[line - 1][col:end_col]
    else:
        middle = lines[line : end_line - 1]
        text = " ".join([lines[line - 1][col:], *middle, lines[end_line - 1][:end_col]])
    return "lambda: " + " ".join(text.split())


def _missed(what: str, timeout_s: float, last: object) -> str:
    return f"waited {timeout_s}s for {what}; last seen: {last!r}"


async def wait_for(
    predicate: Callable[[], object],
    timeout_s: float,
    *,
    what: str | None = None,
    poll_s: float = POLL_S,
    ignoring: tuple[type[Exception], ...] = (),
) -> float:
    """Poll ``predicate`` until its value is true; return how long that took, in seconds.

    ``predicate`` may be a plain function or a coroutine function (its result is awaited).
    An exception of a type in ``ignoring`` counts as a miss (as a daemon not yet listening
    refuses a connection) and is the last value seen. Past ``timeout_s`` this fails with
    ``what`` (else the predicate's name or source) and the last value the predicate gave.
    """
    started = time.monotonic()
    last: object = None
    # A check begun after the deadline does not count, so a timeout stays a bound.
    while time.monotonic() - started < timeout_s:
        try:
            last = predicate()
            if inspect.isawaitable(last):
                last = await last
        except ignoring as error:
            last = error
        else:
            if last:
                return time.monotonic() - started
        await asyncio.sleep(poll_s)
    raise AssertionError(_missed(what or describe(predicate), timeout_s, last))


def wait_for_blocking(
    predicate: Callable[[], object],
    timeout_s: float,
    *,
    what: str | None = None,
    poll_s: float = POLL_S,
    ignoring: tuple[type[Exception], ...] = (),
) -> float:
    """``wait_for`` for a test without an event loop: sleeps block, ``predicate`` is plain."""
    started = time.monotonic()
    last: object = None
    while time.monotonic() - started < timeout_s:
        try:
            last = predicate()
        except ignoring as error:
            last = error
        else:
            if last:
                return time.monotonic() - started
        time.sleep(poll_s)
    raise AssertionError(_missed(what or describe(predicate), timeout_s, last))
