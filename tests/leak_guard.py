"""Leak guard: a test fails when it leaves asyncio tasks, threads, child processes or unclosed resources.

What exists after a test and its fixtures' teardown is compared with what existed before it.
What a fixture of a wider scope (the shared live lab, a module-wide Triton server, a
module-scoped event loop) starts during its setup is its own until its teardown, whichever
test first needed it, and so are the children of its processes (a Triton's backend stubs).
Each leak is named with where it was created or what it is doing, so the failure says which
code to fix.

- Tasks: an event loop's shutdown (``asyncio.run`` and the test's own loop alike) cancels what
  is still pending without a word; the guard sees those tasks first, after a short grace for
  work that was about to finish. Tasks made during the test in a loop that outlives it count too.
- Threads: a new thread still alive after a grace (a joined thread is gone) is a leak, unless it
  is a pooled worker of the default executor of an event loop that outlives the test
  (``asyncio.to_thread``); a worker whose executor is shut down is given the grace to exit.
- Processes: descendants of the test process, and processes that carry this session's marker
  in their environment (a child's children, orphaned when it died), that outlive a grace.
- Resources: ``ResourceWarning`` is an error (pyproject.toml), and those raised in ``__del__``
  (unclosed sockets, files, event loops, aiohttp sessions and connectors) are caught here, as are
  the event loop's own reports (aiohttp's "Unclosed client session", a task destroyed while
  pending). A full garbage collection at teardown makes each show in the test that dropped it.

A test that leaks because of a known product defect carries ``@pytest.mark.allow_leak(kind,
pattern, reason=...)``: only leaks of that kind whose name matches the pattern are accepted.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import concurrent.futures.thread
import contextlib
import fnmatch
import gc
import itertools
import os
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal, TypeVar

import pytest

_T = TypeVar("_T")
Kind = Literal["task", "thread", "process", "resource"]
KINDS: tuple[Kind, ...] = ("task", "thread", "process", "resource")

# How long things that end on their own (a thread finishing its last request, a child
# exiting after SIGTERM) may take once the test and its fixtures are done.
GRACE_S = float(os.environ.get("PYTEST_LEAK_GUARD_GRACE_S", "2.0"))
# Tasks get less: a loop at shutdown has nothing left to wait for but them.
TASK_GRACE_S = min(0.5, GRACE_S)
# Children inherit this variable, so a grandchild orphaned by its parent's death is still ours.
SESSION_MARKER = "PYTEST_LEAK_GUARD_SESSION"
# Frames of the machinery between a test and the code that leaked (shown only if nothing else).
_MACHINERY = (
    f"{os.sep}asyncio{os.sep}",
    f"{os.sep}_pytest{os.sep}",
    f"{os.sep}pluggy{os.sep}",
    f"{os.sep}pytest_asyncio{os.sep}",
    f"{os.sep}threading.py",
    f"{os.sep}leak_guard.py",
    f"{os.sep}pytest{os.sep}__main__.py",
    "<frozen runpy>",
)
_STACK_LIMIT = 40
_SHOWN_FRAMES = 8
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# When the session started, in /proc's clock ticks: older processes are not this session's.
_SESSION_TICK = [0]


@dataclass(frozen=True, slots=True)
class Leak:
    """One thing a test left behind: its kind, a name to match exemptions on, and the story."""

    kind: Kind
    name: str
    detail: str

    def render(self) -> str:
        """Return the leak as an indented block for the failure message."""
        lines = [f"- {self.kind} {self.name!r}"]
        lines += [f"    {line}" for line in self.detail.rstrip().splitlines()]
        return "\n".join(lines)


def _stack_here(skip: int = 2) -> traceback.StackSummary:
    """Return the caller's stack without reading source lines (cheap; read when shown)."""
    frame: FrameType | None = sys._getframe(skip)
    return traceback.StackSummary.extract(
        traceback.walk_stack(frame), limit=_STACK_LIMIT, lookup_lines=False
    )


def _show_stack(frames: Iterable[traceback.FrameSummary], title: str) -> str:
    """Return the frames outside the test machinery, innermost last, under ``title``."""
    listed = list(frames)
    own = [f for f in listed if not any(part in f.filename for part in _MACHINERY)]
    shown = (own or listed)[-_SHOWN_FRAMES:]
    if not shown:
        return ""
    body = "".join(traceback.format_list(shown))
    return f"{title}:\n" + "\n".join(f"  {line}" for line in body.rstrip().splitlines())


@dataclass(slots=True)
class _Recorder:
    """Session-wide bookkeeping that the event loop hooks write into while a test runs."""

    loops: weakref.WeakSet[asyncio.AbstractEventLoop] = field(default_factory=weakref.WeakSet)
    # Where each task was created, innermost frame first (as walked; reversed when shown).
    origins: weakref.WeakKeyDictionary[asyncio.Task[Any], traceback.StackSummary] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # The fixture being set up, if any, to say whose code leaked.
    phase: list[str] = field(default_factory=list)
    # One list per account open (a test, or a wider-scoped fixture's setup); the innermost
    # is charged. Outside every account (between tests) nothing is recorded.
    accounts: list[list[Leak]] = field(default_factory=list)
    # What wider-scoped fixtures started and keep until their teardown.
    owned_threads: weakref.WeakSet[threading.Thread] = field(default_factory=weakref.WeakSet)
    owned_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = field(default_factory=weakref.WeakSet)
    owned_processes: set[tuple[int, int]] = field(default_factory=set)

    def note(self, leak: Leak) -> None:
        """Charge a leak to the innermost open account."""
        if self.accounts:
            head, _, rest = leak.detail.partition("\n")
            during = f" (during {self.phase[-1]})" if self.phase else ""
            self.accounts[-1].append(Leak(leak.kind, leak.name, f"{head}{during}\n{rest}"))

    @contextlib.contextmanager
    def account(self) -> Iterator[list[Leak]]:
        """Open an account: what is noted inside lands in the list yielded."""
        leaks: list[Leak] = []
        self.accounts.append(leaks)
        try:
            yield leaks
        finally:
            # By identity: list.remove() compares, and two empty accounts are equal.
            self.accounts[:] = [a for a in self.accounts if a is not leaks]

    def describe_task(self, task: asyncio.Task[Any], why: str) -> Leak:
        """Return a task leak: its name, coroutine, where it was created and where it waits."""
        coro = task.get_coro()
        qualname = getattr(coro, "__qualname__", type(coro).__name__)
        parts = [f"{why}; coroutine {qualname}"]
        origin = self.origins.get(task)
        if origin is not None:
            parts.append(_show_stack(reversed(origin), "created at"))
        waiting = _awaiting(coro)
        if waiting:
            parts.append(_show_stack(waiting, "waiting at"))
        return Leak("task", f"{task.get_name()} ({qualname})", "\n".join(p for p in parts if p))


RECORDER = _Recorder()


def _awaiting(coro: object) -> list[traceback.FrameSummary]:
    """Return where a suspended coroutine waits, down its chain of awaits, innermost last.

    ``Task.get_stack`` shows only the task's own coroutine; the await that never returns is
    usually several coroutines deeper.
    """
    frames: list[traceback.FrameSummary] = []
    seen: set[int] = set()
    while coro is not None and id(coro) not in seen and len(frames) < _STACK_LIMIT:
        seen.add(id(coro))
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        frame = frame or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(
                traceback.FrameSummary(
                    frame.f_code.co_filename, frame.f_lineno or 0, frame.f_code.co_name
                )
            )
        coro = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "ag_await", None)
            or getattr(coro, "gi_yieldfrom", None)
        )
    return frames


def _task_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, _T] | Generator[Any, None, _T],
    /,
    **kwargs: Any,
) -> asyncio.Future[_T]:
    """Create the task as the loop would, remembering where it was created."""
    task = asyncio.Task(coro, loop=loop, **kwargs)
    RECORDER.origins[task] = _stack_here()
    return task


# Messages of the event loop's exception handler that mean something was left open or pending.
_LOOP_LEAK_MESSAGES = ("unclosed", "destroyed but it is pending")


def _loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Record the loop's reports of unclosed resources and abandoned tasks, then log as usual."""
    message = str(context.get("message", ""))
    if any(m in message.lower() for m in _LOOP_LEAK_MESSAGES):
        task = context.get("task")
        if isinstance(task, asyncio.Task):
            RECORDER.note(RECORDER.describe_task(task, message))
        else:
            obj = next(
                (v for k, v in context.items() if k not in {"message", "source_traceback"}),
                None,
            )
            RECORDER.note(Leak("resource", message, f"object: {obj!r}"))
    loop.default_exception_handler(context)


class _GuardedPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, with every new loop's tasks and leak reports watched."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        """Return a new loop that records where its tasks come from and what it finds unclosed."""
        loop = super().new_event_loop()
        loop.set_task_factory(_task_factory)
        loop.set_exception_handler(_loop_exception_handler)
        RECORDER.loops.add(loop)
        return loop


_original_cancel_all: Callable[[asyncio.AbstractEventLoop], None] | None = None


def _cancel_all_watched(loop: asyncio.AbstractEventLoop) -> None:
    """Before a runner cancels what is left in its loop, record what is left after a grace."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=TASK_GRACE_S))
        for task in pending:
            if not task.done():
                RECORDER.note(
                    RECORDER.describe_task(task, "still pending when its event loop shut down")
                )
    assert _original_cancel_all is not None
    _original_cancel_all(loop)


def install(config: pytest.Config) -> None:
    """Watch every event loop from now on; mark this session's children (pytest_configure)."""
    global _original_cancel_all  # noqa: PLW0603 - one patch of the runner for the whole session
    with warnings.catch_warnings():
        # Python 3.14 deprecates policies; until then this is the one hook asyncio.run and
        # pytest-asyncio both create their loops through.
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_event_loop_policy(_GuardedPolicy())
    # Runner.close (asyncio.run, pytest-asyncio) calls this module function to cancel what is
    # left; it is the one moment a leaked task is still visible as pending.
    original = getattr(asyncio.runners, "_cancel_all_tasks", None)
    if original is not None and _original_cancel_all is None:
        _original_cancel_all = original
        asyncio.runners._cancel_all_tasks = _cancel_all_watched  # type: ignore[attr-defined]  # private hook, checked for above
    os.environ[SESSION_MARKER] = str(os.getpid())
    _SESSION_TICK[0] = _boot_ticks_now()


def freeze_startup_objects() -> None:
    """Move what imports and collection made out of the collector's sight (pytest_collection_finish).

    Those objects live for the whole session; leaving them out makes the per-test collection
    cost what the test allocated, not what the whole session holds.
    """
    gc.collect()
    gc.freeze()


# ---- processes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Proc:
    pid: int
    start_tick: int
    state: str
    ppid: int

    @property
    def key(self) -> tuple[int, int]:
        """Identify the process across pid reuse."""
        return (self.pid, self.start_tick)


def _read_proc(pid: int) -> _Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return _Proc(pid, int(fields[19]), fields[0], int(fields[1]))


def _cmdline(pid: int) -> str:
    """Return the command line, or the command name of a zombie (which has none)."""
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        shown = raw.replace(b"\0", b" ").decode(errors="replace").strip()[:300]
        if shown:
            return shown
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return f"pid {pid}"


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


def _descendants() -> dict[tuple[int, int], _Proc]:
    found: dict[tuple[int, int], _Proc] = {}
    todo = _children(os.getpid())
    while todo:
        pid = todo.pop()
        proc = _read_proc(pid)
        if proc is None or proc.key in found:
            continue
        found[proc.key] = proc
        todo += _children(pid)
    return found


def _boot_ticks_now() -> int:
    """Return now in the clock ticks since boot that /proc/<pid>/stat's start time uses."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)


def _marked_since(tick: int) -> dict[tuple[int, int], _Proc]:
    """Return processes started at or after ``tick`` that carry this session's marker."""
    marker = f"{SESSION_MARKER}={os.getpid()}".encode()
    found: dict[tuple[int, int], _Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        proc = _read_proc(int(entry))
        if proc is None or proc.start_tick < tick or proc.pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found[proc.key] = proc
    return found


def _processes_since(tick: int) -> dict[tuple[int, int], _Proc]:
    if not Path("/proc/self/task").is_dir():
        return {}  # no procfs: processes are not watched here
    return {**_descendants(), **_marked_since(tick)}


# ---- threads ------------------------------------------------------------------------------


def _pool_of(thread: threading.Thread) -> concurrent.futures.ThreadPoolExecutor | None:
    """Return the executor a pooled worker thread serves, if it is one."""
    if thread not in concurrent.futures.thread._threads_queues:
        return None
    args = getattr(thread, "_args", ())
    ref = args[0] if args else None
    executor = ref() if isinstance(ref, weakref.ref) else None
    return executor if isinstance(executor, concurrent.futures.ThreadPoolExecutor) else None


def _describe_thread(thread: threading.Thread, why: str) -> Leak:
    target = getattr(thread, "_target", None)
    what = getattr(target, "__qualname__", None) or type(thread).__qualname__
    parts = [f"{why}; target {what}{', daemon' if thread.daemon else ''}"]
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is not None:
        running = traceback.extract_stack(frame)
        parts.append(_show_stack(running, "running at"))
    return Leak("thread", thread.name, "\n".join(parts))


# ---- the guard ----------------------------------------------------------------------------


@dataclass(slots=True)
class Snapshot:
    """What existed before a test: threads, processes, event loops and their pending tasks."""

    threads: set[threading.Thread]
    processes: dict[tuple[int, int], _Proc]
    loops: set[asyncio.AbstractEventLoop]
    tasks: set[asyncio.Task[Any]]
    start_tick: int

    @classmethod
    def take(cls) -> Snapshot:
        """Look at everything that exists now."""
        loops = {loop for loop in RECORDER.loops if not loop.is_closed()}
        tasks: set[asyncio.Task[Any]] = set()
        for loop in loops:
            tasks |= _pending(loop)
        return cls(
            threads=set(threading.enumerate()),
            processes=_processes_since(_SESSION_TICK[0]),
            loops=loops,
            tasks=tasks,
            start_tick=_boot_ticks_now(),
        )


def _pending(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    # all_tasks() of another thread's running loop may race with it; one retry is enough.
    for _ in range(3):
        with contextlib.suppress(RuntimeError):
            return {t for t in asyncio.all_tasks(loop) if not t.done()}
    return set()


def _grace(until: float) -> Iterator[float]:
    """Yield the time left, pausing between checks, until ``until`` passes."""
    for step in itertools.count():
        left = until - time.monotonic()
        if left <= 0:
            return
        yield left
        time.sleep(min(0.01 * (step + 1), 0.1, max(left, 0.0)))


def _leaked_tasks(before: Snapshot, deadline: float) -> list[Leak]:
    """Tasks made during the test that still wait in event loops that outlive it."""
    out: list[Leak] = []
    for loop in [loop for loop in RECORDER.loops if not loop.is_closed()]:
        new = _pending(loop) - before.tasks
        if not new:
            continue
        if loop.is_running():
            for _ in _grace(deadline):  # another thread runs it: watch the tasks end
                if all(t.done() for t in new):
                    break
        else:
            # An idle loop (a wider-scoped one between tests, or one the test left open) runs
            # its tasks only when driven: give them the grace the test's own loop gets.
            with contextlib.suppress(RuntimeError):  # its owner started it meanwhile
                loop.run_until_complete(asyncio.wait(new, timeout=TASK_GRACE_S))
        kept = loop in before.loops or loop in RECORDER.owned_loops
        why = (
            "still pending after the test, in an event loop that outlives it"
            if kept
            else "left in an event loop the test never closed"
        )
        out += [RECORDER.describe_task(t, why) for t in new if not t.done()]
    return out


def _pooled_by_outliving_loop(
    executor: concurrent.futures.ThreadPoolExecutor, before: Snapshot
) -> bool:
    """Tell whether ``executor`` is the default executor of a loop that outlives the test."""
    return any(
        not loop.is_closed() and getattr(loop, "_default_executor", None) is executor
        for loop in [*before.loops, *RECORDER.owned_loops]
    )


def _leaked_threads(before: Snapshot, deadline: float) -> list[Leak]:
    new = [
        t
        for t in threading.enumerate()
        if t not in before.threads and t not in RECORDER.owned_threads and t.is_alive()
    ]
    suspects: list[threading.Thread] = []
    for thread in new:
        pool = _pool_of(thread)
        idle_pool = pool is not None and not getattr(pool, "_shutdown", False)
        if idle_pool and pool is not None and _pooled_by_outliving_loop(pool, before):
            continue  # asyncio.to_thread's pool of a loop that outlives the test
        suspects.append(thread)
    for left in _grace(deadline):
        suspects = [t for t in suspects if t.is_alive()]
        if not suspects:
            break
        suspects[0].join(min(left, 0.1))
    out: list[Leak] = []
    for thread in suspects:
        if not thread.is_alive():
            continue
        pool = _pool_of(thread)
        if pool is None:
            why = f"still running {GRACE_S:.0f} s after the test"
        elif getattr(pool, "_shutdown", False):
            why = "worker of a shut-down executor still busy after the grace"
        else:
            why = "worker of a thread pool nobody shut down (or of an event loop left open)"
        out.append(_describe_thread(thread, why))
    return out


def _kept_by_elder(proc: _Proc, elders: set[tuple[int, int]]) -> bool:
    """Tell whether ``proc`` descends from a process that outlives the test.

    A module-wide Triton starts a Python backend stub for each model it (re)loads: the stub
    is the server's, as the server is its fixture's.
    """
    pid, seen = proc.ppid, 0
    while pid > 1 and pid != os.getpid() and seen < 64:
        parent = _read_proc(pid)
        if parent is None:
            return False
        if parent.key in elders:
            return True
        pid, seen = parent.ppid, seen + 1
    return False


def _leaked_processes(before: Snapshot, deadline: float) -> list[Leak]:
    elders = set(before.processes) | RECORDER.owned_processes

    def alive_new() -> dict[tuple[int, int], _Proc]:
        now = _processes_since(before.start_tick)
        return {k: p for k, p in now.items() if k not in elders and not _kept_by_elder(p, elders)}

    new = alive_new()
    for _ in _grace(deadline):
        if not new:
            break
        new = alive_new()
    out: list[Leak] = []
    for proc in new.values():
        cmd = _cmdline(proc.pid)
        if proc.state == "Z":
            why = "exited but was never waited for (a zombie: call wait() or use a context manager)"
        elif proc.ppid != os.getpid() and proc.key not in _descendants():
            why = "orphaned and still running (its parent died without stopping it)"
        else:
            why = "still running after the test"
        out.append(Leak("process", cmd, f"pid {proc.pid}, {why}"))
    return out


@dataclass(frozen=True, slots=True)
class Exemption:
    """An ``allow_leak`` marker: the kind and name pattern it accepts, and the defect why."""

    kind: Kind
    pattern: str
    reason: str

    @classmethod
    def from_marker(cls, marker: pytest.Mark) -> Exemption:
        """Read and check one marker; a vague exemption is an error, not a pass."""
        if len(marker.args) != 2 or not marker.kwargs.get("reason"):
            raise pytest.UsageError(
                "allow_leak needs (kind, pattern, reason=...); the reason names the defect"
            )
        kind, pattern = (str(a) for a in marker.args)
        if kind not in KINDS:
            raise pytest.UsageError(f"allow_leak kind {kind!r} is not one of {', '.join(KINDS)}")
        if pattern.strip("*?") == "":
            raise pytest.UsageError("allow_leak pattern must name something, not match all")
        return cls(kind, pattern, str(marker.kwargs["reason"]))

    def accepts(self, leak: Leak) -> bool:
        """Tell whether this exemption covers ``leak``."""
        return leak.kind == self.kind and fnmatch.fnmatchcase(leak.name, self.pattern)


def _unraisable_detail(unraisable: Any) -> str:
    """Say where the warning came from; a ``__del__`` names only the class it finalises."""
    obj = unraisable.object
    qualname = getattr(obj, "__qualname__", "")
    if qualname.endswith(".__del__"):
        return f"found unclosed when a {qualname.removesuffix('.__del__')} was garbage-collected"
    return f"object: {obj!r}"


def _unraisable_catcher() -> Callable[[Any], None]:
    """Return an unraisable hook that keeps ResourceWarnings for the test, passing the rest on."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, ResourceWarning):
            RECORDER.note(Leak("resource", str(exc), _unraisable_detail(unraisable)))
        else:
            previous(unraisable)

    return hook


_MODULE_SEEN = [""]


def collect_garbage(item: pytest.Item) -> None:
    """Collect what the test dropped; the whole heap only once the tests move to a new module.

    A full collection walks every object, and a worker's heap grows over the session (a few
    hundred thousand objects by its end): done after every test it was two thirds of the unit
    tests' time. So what survives a test's collection is frozen out of the next one's sight,
    and the heap is collected in full after the first test of each module: the garbage of the
    previous module's wider-scoped fixtures, torn down after its last test, is found there, in
    the same test as before. What is no longer found in its own test: a reference cycle of
    objects older than the test (a module fixture's) that dies during it; it is found, and
    warns, at the next module's first test.
    """
    module = item.nodeid.split("::", 1)[0]
    if module != _MODULE_SEEN[0]:
        _MODULE_SEEN[0] = module
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def guard(item: pytest.Item) -> Generator[None, None, None]:
    """Snapshot before the test; after it and its fixtures' teardown, fail on what it left."""
    exemptions = [Exemption.from_marker(m) for m in item.iter_markers("allow_leak")]
    before = Snapshot.take()
    previous_hook = sys.unraisablehook
    with RECORDER.account() as noted:
        sys.unraisablehook = _unraisable_catcher()
        try:
            yield
            # Objects the test dropped warn (or report to their loop) now, within this test.
            collect_garbage(item)
            deadline = time.monotonic() + GRACE_S
            found = _leaked_tasks(before, deadline)
            found += _leaked_threads(before, deadline)
            found += _leaked_processes(before, deadline)
        finally:
            sys.unraisablehook = previous_hook
        leaks = noted + found
    fail_on(leaks, exemptions, "the test left {n} thing(s) behind after it and its fixtures ended")


def fail_on(leaks: list[Leak], exemptions: list[Exemption], headline: str) -> None:
    """Fail with every leak no exemption covers; warn about exemptions that covered nothing."""
    unexcused = [leak for leak in leaks if not any(e.accepts(leak) for e in exemptions)]
    for exemption in exemptions:
        if not any(exemption.accepts(leak) for leak in leaks):
            warnings.warn(
                pytest.PytestWarning(
                    f"allow_leak({exemption.kind!r}, {exemption.pattern!r}) matched nothing; "
                    f"if the defect ({exemption.reason}) is fixed, remove the exemption"
                ),
                stacklevel=1,
            )
    if unexcused:
        report = "\n".join(leak.render() for leak in unexcused)
        pytest.fail(
            f"{headline.format(n=len(unexcused))}; stop, close, cancel or await each:\n{report}",
            pytrace=False,
        )


@contextlib.contextmanager
def watching_fixture(fixturedef: pytest.FixtureDef[Any]) -> Iterator[None]:
    """Account for a fixture's setup (pytest_fixture_setup).

    A function-scoped fixture is part of its test: a leak is the test's, naming the fixture.
    What a wider-scoped fixture starts (threads, processes, event loops) is its own until its
    teardown, whichever test first needs it; a task its own event loop cancelled at shutdown,
    or a resource it dropped unclosed, is a leak of the fixture, and fails its setup.
    """
    if fixturedef.scope == "function":
        RECORDER.phase.append(f"setup of fixture {fixturedef.argname!r}")
        try:
            yield
        finally:
            RECORDER.phase.pop()
        return
    threads = set(threading.enumerate())
    loops = set(RECORDER.loops)
    tick = _boot_ticks_now()
    processes = _processes_since(tick)
    RECORDER.phase.append(f"setup of {fixturedef.scope}-scoped fixture {fixturedef.argname!r}")
    try:
        with RECORDER.account() as leaks:
            yield
    finally:
        RECORDER.phase.pop()
        RECORDER.owned_threads.update(t for t in threading.enumerate() if t not in threads)
        RECORDER.owned_loops.update(loop for loop in RECORDER.loops if loop not in loops)
        RECORDER.owned_processes.update(k for k in _processes_since(tick) if k not in processes)
    fail_on(leaks, [], f"fixture {fixturedef.argname!r} left {{n}} thing(s) behind in its setup")
