"""The incident chart as a PNG: latency split and the deciding signal, onset and actions marked.

Drawn with matplotlib's Agg canvas (no display, no pyplot state) from
:mod:`tritonguard.core.chart_data`, so the daemon's threads, ``replay`` and the demo draw the
same picture. :class:`IncidentCharts` is the thread planner's ``ChartMaker``: it writes each
chart into a directory next to the audit database (at most ``max_files`` there, the oldest
deleted first), and the outbox uploads it into the incident's thread with ``files_upload_v2``
(without a token the console prints its path). A chart that cannot be drawn is logged and
left out; the thread goes on without it.

**Off the event loop.** Drawing takes about 0.15 s a chart (a second more for the first, which
imports matplotlib); fifty incidents at once would hold the daemon's loop up for seconds, past
the Lease renewal and Socket Mode's 3 s ack. So the daemon's chart maker (``background=True``,
as :func:`chart_maker` builds it) only reads the numbers on the loop (the series store is not
thread-safe) and hands drawing, the file write and the pruning to one worker thread. The
planner gets the file's path at once; the outbox waits for the drawing (:meth:`ready`, at
most ``CHART_WAIT_S``) before it uploads, and drops the upload, with a log line, when the
chart was not drawn.

matplotlib is imported on the first chart, in the thread that draws it, not with this module:
the CLI commands that never draw do not pay for it, and the daemon's loop never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.baselines import Baseline
from tritonguard.core.chart_data import ChartData, Mark, chart_data, newest_time
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.slack_thread import ChartMaker
from tritonguard.core.thresholds import Thresholds
from tritonguard.logs import get_logger
from tritonguard.settings import Settings

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Charts kept next to the audit database; about 50 KB each, so about 10 MB at most.
MAX_CHART_FILES = 200
QUEUE_COLOUR = "#e4572e"
COMPUTE_COLOUR = "#4c78a8"
SIGNAL_COLOUR = "#6a3d9a"
ACTION_COLOUR = "#2e7d32"
FAILED_COLOUR = "#c62828"
# Action labels written on the chart at most; the rest are counted.
MAX_MARK_LABELS = 8
# How long the outbox waits for a chart being drawn before it drops the upload: far longer
# than a storm's queue of charts takes (about 0.15 s each), short enough that the thread's
# next replies are not held for long when drawing hangs.
CHART_WAIT_S = 30.0


def chart_dir(audit_db_path: Path) -> Path:
    """Return where charts go: a directory next to the audit database (temp for ``:memory:``)."""
    if str(audit_db_path) == ":memory:":
        return Path(tempfile.gettempdir()) / "tritonguard-charts"
    return audit_db_path.parent / f"{audit_db_path.stem}-charts"


def _tick_step(span_s: float) -> float:
    """Return the spacing of the time axis' ticks: round minutes (or 30 s), at most 10 ticks."""
    for step in (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0):
        if span_s / step <= 10:
            return step
    return 3600.0


def _clock(t: float, _pos: int | None = None) -> str:
    """Return an epoch time as UTC wall-clock time (the axis is in epoch seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S" if t % 60 else "%H:%M")


def _steps(
    starts: Sequence[float], ends: Sequence[float], values: Sequence[float | None]
) -> tuple[list[float], list[float]]:
    """Return step coordinates: each value held over its own interval, NaN (a gap) if unknown."""
    xs: list[float] = []
    ys: list[float] = []
    for a, b, v in zip(starts, ends, values, strict=True):
        y = math.nan if v is None else v
        xs += [a, b]
        ys += [y, y]
    return xs, ys


def _grouped(marks: Sequence[Mark], within: float) -> list[tuple[float, list[str], bool]]:
    """Return marks closer than ``within`` seconds as one: (time, texts, any failed)."""
    out: list[tuple[float, list[str], bool]] = []
    for m in marks:
        failed = m.kind in ("failed", "rolled_back")
        if out and m.at - out[-1][0] <= within:
            at, texts, bad = out[-1]
            if m.text not in texts:
                texts.append(m.text)
            out[-1] = (at, texts, bad or failed)
        else:
            out.append((m.at, [m.text], failed))
    return out


def _footer(data: ChartData, groups: list[tuple[float, list[str], bool]]) -> list[str]:
    """Return the lines under the chart: the onset, each numbered action, the resolution."""
    items = [f"onset {_clock(data.onset)} UTC"]
    shown = groups[:MAX_MARK_LABELS]
    items += [f"{i} {_clock(at)} {', '.join(texts)}" for i, (at, texts, _) in enumerate(shown, 1)]
    if len(groups) > len(shown):
        items.append(f"+{sum(len(g[1]) for g in groups[len(shown) :])} more")
    if data.resolved_at is not None:
        items.append(f"resolved {_clock(data.resolved_at)}")
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(item) + 5 <= 140:
            lines[-1] += "     " + item
        else:
            lines.append(item)
    return lines[:4]


def _no_data(ax: Axes, text: str) -> None:
    ax.text(
        0.5,
        0.5,
        text,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=9,
        color="#777777",
    )


def render_png(data: ChartData) -> bytes:
    """Return the chart as PNG bytes (1000 × 620 px)."""
    import io  # noqa: PLC0415 - with the drawing imports

    # matplotlib only when drawing, in the thread that draws (it costs about 1 s to import).
    from matplotlib import ticker, transforms  # noqa: PLC0415 - see above
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - see above
    from matplotlib.figure import Figure  # noqa: PLC0415 - see above

    fig = Figure(figsize=(10.0, 6.2), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    fig.suptitle(data.title, x=0.01, y=0.985, ha="left", fontsize=12, fontweight="bold")

    xs, queue = _steps(data.starts, data.times, data.queue_ms)
    _, compute = _steps(data.starts, data.times, data.compute_ms)
    total = [q + c for q, c in zip(queue, compute, strict=True)]
    top.fill_between(xs, 0.0, queue, color=QUEUE_COLOUR, alpha=0.8, lw=0, label="queue")
    top.fill_between(xs, queue, total, color=COMPUTE_COLOUR, alpha=0.8, lw=0, label="compute")
    if data.baseline_ms is not None:
        top.axhline(data.baseline_ms, color="#444444", ls="--", lw=1.0, label="healthy mean")
    top.set_ylabel("ms per request", fontsize=9)
    top.set_ylim(bottom=0.0)
    top.set_title("Where request time goes, per scrape: queue vs compute", loc="left", fontsize=9.5)
    top.legend(loc="upper left", fontsize=8, framealpha=0.85)

    if data.signal:
        _, signal = _steps(data.starts, data.times, data.signal_values)
        bottom.plot(xs, signal, color=SIGNAL_COLOUR, lw=1.6, label=data.signal_label)
        if data.signal_reference is not None:
            bottom.axhline(
                data.signal_reference,
                color="#444444",
                ls="--",
                lw=1.0,
                label=data.signal_reference_label,
            )
        known = [v for v in data.signal_values if v is not None]
        if known:
            bottom.set_ylim(bottom=min(0.0, *known))
        else:
            _no_data(bottom, f"no per-scrape reading of {data.signal_label}")
        bottom.set_title(f"Deciding signal: {data.signal_evidence}", loc="left", fontsize=9.5)
        bottom.set_ylabel(data.signal_label, fontsize=9)
        bottom.legend(loc="upper left", fontsize=8, framealpha=0.85)
    else:
        _no_data(bottom, "no evidence of this finding can be followed per scrape")

    groups = _grouped(data.marks, (data.end - data.start) * 0.015)
    for ax in (top, bottom):
        ax.axvline(data.onset, color="black", lw=1.2, ls="--")
        for at, _, failed in groups:
            ax.axvline(at, color=FAILED_COLOUR if failed else ACTION_COLOUR, lw=1.2, ls="-.")
        if data.resolved_at is not None:
            ax.axvline(data.resolved_at, color=ACTION_COLOUR, lw=2.0)
        ax.grid(alpha=0.25)
    # Numbers at the top of the action lines; the footer says what each was.
    on_top = transforms.blended_transform_factory(top.transData, top.transAxes)
    top.text(data.onset, 1.005, "onset ", transform=on_top, ha="right", va="bottom", fontsize=8)
    for i, (at, _, failed) in enumerate(groups[:MAX_MARK_LABELS], 1):
        colour = FAILED_COLOUR if failed else ACTION_COLOUR
        top.text(
            at,
            1.005,
            f" {i}",
            transform=on_top,
            ha="left",
            va="bottom",
            fontsize=8.5,
            color=colour,
            fontweight="bold",
        )
    if data.resolved_at is not None:
        top.text(
            data.resolved_at,
            1.005,
            "resolved ",
            transform=on_top,
            ha="right",
            va="bottom",
            fontsize=8,
            color=ACTION_COLOUR,
        )

    bottom.set_xlim(data.start, data.end)
    bottom.xaxis.set_major_locator(ticker.MultipleLocator(_tick_step(data.end - data.start)))
    bottom.xaxis.set_major_formatter(ticker.FuncFormatter(_clock))
    bottom.set_xlabel("UTC", fontsize=9)
    lines = _footer(data, groups)
    fig.text(0.01, 0.01, "\n".join(lines), ha="left", va="bottom", fontsize=8, family="monospace")
    fig.subplots_adjust(
        left=0.08, right=0.98, top=0.89, bottom=0.11 + 0.028 * len(lines), hspace=0.32
    )
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _write(path: Path, png: bytes) -> None:
    """Write the file whole or not at all: an upload never reads half a chart."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(png)
    os.replace(tmp, path)


def prune(directory: Path, keep: int) -> int:
    """Delete the oldest charts beyond ``keep``; return how many went."""
    charts = []
    for p in directory.glob("*.png"):
        with contextlib.suppress(OSError):
            charts.append((p.stat().st_mtime, p))
    charts.sort()
    gone = 0
    for _, p in charts[: max(0, len(charts) - keep)]:
        with contextlib.suppress(OSError):
            p.unlink()
            gone += 1
    return gone


def render_incident_chart(
    store: SeriesStore,
    incident: IncidentEvent,
    records: Sequence[ActionRecord],
    path: Path | str,
    *,
    thresholds: Thresholds | None = None,
    baseline: Baseline | None = None,
    now: float | None = None,
    minutes: float = 10.0,
    resolved_at: float | None = None,
) -> Path | None:
    """Draw an incident's chart into ``path`` (a PNG); return the path, or None.

    For use outside the daemon (the demo, a notebook): ``store`` is the engine's series store
    (``engine.store``), ``records`` the incident's audit records. The chart ends at ``now``
    (default: the subject's newest scrape) and shows ``minutes`` before it. None when the
    store holds no latency for the subject, or drawing failed (logged).
    """
    end = now if now is not None else newest_time(store, incident.subject)
    if end is None:
        end = max([incident.at, *(r.at for r in records)])
    try:
        data = chart_data(
            store,
            thresholds or Thresholds(),
            incident,
            records,
            now=end,
            minutes=minutes,
            baseline=baseline,
            resolved_at=resolved_at,
        )
        if not data.has_data():
            return None
        out = Path(path)
        _write(out, render_png(data))
    except Exception as exc:  # a chart is a help, never a reason to fail the caller
        get_logger("tritonguard.slack").warning(
            "incident chart not drawn", incident=incident.incident_id, error=repr(exc)
        )
        return None
    return out


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


class IncidentCharts:
    """The thread planner's ``ChartMaker``: each incident's chart from the engine, as a file.

    A chart ends with the subject's newest scrape in the engine's store, which is the time
    the daemon (or ``replay``, in trace time) draws it at, give or take a scrape; ``clock``
    sets the end instead. The signal's reference line is the baseline the engine last judged
    the subject by.

    With ``background`` (the daemon's), a call on a running event loop reads the chart's
    numbers there and draws in a worker thread: it returns the file the chart goes to at
    once, and :meth:`ready` says when it is there. Without (``replay``, tests of the planner
    alone) it draws before it returns. :meth:`close` stops the worker.
    """

    def __init__(
        self,
        engine: Engine,
        directory: Path,
        *,
        minutes: float = 10.0,
        clock: Callable[[], float] | None = None,
        max_files: int = MAX_CHART_FILES,
        background: bool = False,
    ) -> None:
        self.engine = engine
        self.directory = directory
        self.minutes = minutes
        self.clock = clock
        self.max_files = max_files
        self.background = background
        # Diagnostics (tests, the demo): counted on the loop and in the drawing thread.
        self.drawn = 0
        self.failed = 0
        self._log = get_logger("tritonguard.slack")
        # One worker: charts are drawn one after the other, in the order the threads asked.
        self._pool: ThreadPoolExecutor | None = None
        # Charts handed to the worker and not yet waited for, by path.
        self._drawing: dict[str, Future[bool]] = {}

    def __call__(
        self, event: IncidentEvent, records: list[ActionRecord], when: str
    ) -> dict[str, str] | None:
        """Chart a thread's opening or resolution; return the file to upload, or None."""
        try:
            return self._chart(event, records, when)
        except Exception as exc:  # a chart is a help, never a reason to lose the thread
            self.failed += 1
            self._log.warning(
                "incident chart not drawn", incident=event.incident_id, error=repr(exc)
            )
            return None

    def _chart(
        self, event: IncidentEvent, records: list[ActionRecord], when: str
    ) -> dict[str, str] | None:
        s = event.subject
        seen = self.engine.last_diagnoses.get((s.namespace, s.pod, s.model))
        now = self.clock() if self.clock is not None else newest_time(self.engine.store, s)
        if now is None:
            now = max([event.at, *(r.at for r in records)])
        # On the caller's thread: the store is the loop's, and not safe to read elsewhere.
        data = chart_data(
            self.engine.store,
            self.engine.t,
            event,
            records,
            now=now,
            minutes=self.minutes,
            baseline=seen.baseline if seen is not None else None,
            resolved_at=now if when == "resolved" else None,
        )
        if not data.has_data():
            self._log.info("incident chart skipped: no latency in view", incident=event.incident_id)
            return None
        name = f"{_safe(event.incident_id)}-{_safe(when)}.png"
        path = self.directory / name
        if self.background and _on_loop():
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="tritonguard-charts")
            self._drawing[str(path)] = self._pool.submit(self._draw, data, path, event)
        elif not self._draw(data, path, event):
            return None
        shown = data.signal_label.split(" (")[0] if data.signal else "Latency"
        what = shown[:1].lower() + shown[1:]
        return {
            "path": str(path),
            "filename": name,
            "title": f"{event.cause} on {s.model}: queue vs compute and {what}",
        }

    def _draw(self, data: ChartData, path: Path, event: IncidentEvent) -> bool:
        """Draw, write and prune (in the worker thread, in the daemon); False if it failed."""
        try:
            _write(path, render_png(data))
            self.drawn += 1
            prune(self.directory, self.max_files)
        except Exception as exc:  # a chart is a help, never a reason to lose the thread
            self.failed += 1
            self._log.warning(
                "incident chart not drawn", incident=event.incident_id, error=repr(exc)
            )
            return False
        return True

    async def ready(self, file: Mapping[str, str], timeout_s: float = CHART_WAIT_S) -> bool:
        """Wait for a chart being drawn; return whether its file is there to upload.

        A file this maker is not drawing (drawn before it returned, or by an earlier run)
        is up to the upload to read. One whose drawing failed, or took over ``timeout_s``,
        is not: the outbox drops its upload.
        """
        path = file.get("path", "")
        drawing = self._drawing.get(path)
        if drawing is None:
            return True
        if drawing.cancelled():
            self._drawing.pop(path, None)
            return False  # the worker stopped (shutdown) before it drew this one
        try:
            # shield: a timeout gives up waiting, it does not stop a drawing under way.
            async with asyncio.timeout(timeout_s):
                drawn = await asyncio.shield(asyncio.wrap_future(drawing))
        except TimeoutError:
            self._drawing.pop(path, None)
            self._log.warning("incident chart not drawn in time", path=path, waited_s=timeout_s)
            return False
        # Forgotten only once answered: a wait cancelled (the outbox worker stopped at
        # shutdown) leaves the drawing known, so the shutdown's last delivery waits for it
        # too instead of taking an unknown path for a finished file and uploading nothing.
        self._drawing.pop(path, None)
        return drawn

    def close(self) -> None:
        """Stop the worker: charts not yet drawn are not (their uploads are dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _on_loop() -> bool:
    """Tell whether the caller runs on an event loop (the daemon): then drawing goes elsewhere."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def chart_maker(settings: Settings, engine: Engine) -> ChartMaker | None:
    """Return the threads' chart maker from settings, or None with ``slack.charts`` off.

    One call for every path that builds the threads (the daemon, ``replay``, tests). It draws
    off the event loop: give it to :func:`~tritonguard.runtime.slack_threads.build_threads`,
    which has the outbox wait for each chart and stops the drawing thread on close.
    """
    if not settings.slack.charts:
        return None
    return IncidentCharts(
        engine,
        chart_dir(settings.audit_db_path),
        minutes=settings.slack.chart_minutes,
        background=True,
    )
