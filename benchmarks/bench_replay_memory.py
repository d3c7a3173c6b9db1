"""Replay memory: write long Triton traces series by series and replay them in bounded memory.

``python -m benchmarks.bench_replay_memory write TRACE --hours 24`` writes a trace of 5 pods x
10 models scraped every 10 s (what a small production cluster records in a day), the way
promtool backfill files and ``trace_writer`` lay them out: family by family, series by series.
Replay it under ``/usr/bin/time -v tritonguard replay TRACE --format json`` and compare the
peak resident size of a 1 h and a 24 h trace; ``measure`` does both and prints the table.

With ``--fleet`` the trace is a generated fleet instead (``benchmarks.fleet_gen``: P pods x M
models of Triton 2.51's series with their summaries, DCGM, cAdvisor, node-exporter and
kube-state-metrics, Poisson traffic): ``write TRACE --fleet --pods 50 --models 20 --hours 1``
writes exactly what ``Fleet.trace`` renders (``render_trace``'s order, byte for byte) without
holding the trace in memory, and ``measure --fleet --hours 0.25 0.5 1`` replays such traces
and prints samples, size, wall and CPU seconds and peak RSS. ``profile TRACE`` runs one replay
under cProfile and prints where its time goes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from benchmarks.fleet_gen import Fleet, FleetSpec, scrape_samples
from tritonguard.core.samples import Labels, Sample, make_labels
from tritonguard.core.trace_writer import format_number, render_trace

START = 1_700_000_000.0

# Per-request time of a healthy model, in µs, for each duration counter Triton exports.
_DURATIONS_US = {
    "nv_inference_request_duration_us": 11_400.0,
    "nv_inference_queue_duration_us": 1_000.0,
    "nv_inference_compute_input_duration_us": 100.0,
    "nv_inference_compute_infer_duration_us": 10_000.0,
    "nv_inference_compute_output_duration_us": 100.0,
}
_PER_REQUEST = ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count")
_FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
_HOST_GAUGES = {
    "nv_cpu_utilization": 0.3,
    "nv_cpu_memory_used_bytes": 1.7e9,
    "nv_gpu_utilization": 0.4,
    "nv_gpu_memory_used_bytes": 6.0e9,
}


def _models(pods: int, models: int) -> list[tuple[Labels, float]]:
    """Return (labels, requests per second) of every model on every pod."""
    return [
        (
            make_labels(
                {
                    "namespace": "prod",
                    "pod": f"triton-{p}",
                    "model": f"model_{m:02d}",
                    "version": "1",
                }
            ),
            20.0 + m,
        )
        for p in range(pods)
        for m in range(models)
    ]


def _families(pods: int, models: int, scrapes: int, interval: float) -> Iterator[list[Sample]]:
    """Yield the samples of one family at a time, over the whole trace."""
    subjects = _models(pods, models)
    times = [START + k * interval for k in range(scrapes)]
    for name in _PER_REQUEST:
        yield [
            Sample(name, lab, rps * interval * k, t)
            for lab, rps in subjects
            for k, t in enumerate(times)
        ]
    for name, us in _DURATIONS_US.items():
        yield [
            Sample(name, lab, rps * interval * us * k, t)
            for lab, rps in subjects
            for k, t in enumerate(times)
        ]
    yield [
        Sample("nv_inference_request_failure", make_labels([*lab, ("reason", r)]), 0.0, t)
        for lab, _ in subjects
        for r in _FAILURE_REASONS
        for t in times
    ]
    yield [
        Sample("nv_inference_pending_request_count", lab, 0.0, t)
        for lab, _ in subjects
        for t in times
    ]
    hosts = [make_labels({"namespace": "prod", "pod": f"triton-{p}"}) for p in range(pods)]
    for name, value in _HOST_GAUGES.items():
        yield [Sample(name, lab, value, t) for lab in hosts for t in times]


def write_trace(
    path: Path, *, hours: float, pods: int = 5, models: int = 10, interval: float = 10.0
) -> int:
    """Write a gzipped trace family by family (never all of it in memory); return its samples."""
    scrapes = int(hours * 3600 / interval) + 1
    count = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as out:
        for family in _families(pods, models, scrapes, interval):
            count += len(family)
            out.write(render_trace(family).removesuffix("# EOF\n"))
        out.write("# EOF\n")
    return count


# ---- a generated fleet, written in bounded memory -----------------------------------------

# Values held at once while spilling scrapes (one chunk of scrapes, every series) and while
# writing (one block of series, every scrape): 8 bytes each.
CHUNK_VALUES = 4_000_000
BLOCK_VALUES = 4_000_000
# Trace lines joined before each write to the gzip stream.
WRITE_LINES = 65_536
_FLOAT = np.dtype(np.float64)


@dataclass(frozen=True, slots=True)
class FleetTrace:
    """What ``write_fleet_trace`` wrote: samples, scrapes, series a scrape, families (blocks)."""

    samples: int
    scrapes: int
    series: int
    families: int


@dataclass(frozen=True, slots=True)
class _Family:
    """One family block of the trace: its TYPE line and its label groups as column ranges."""

    type_line: str
    runs: list[tuple[int, int]]


def _layout(
    samples: list[Sample], types: Mapping[str, str]
) -> tuple[list[int], list[str], list[_Family]]:
    """Lay one scrape out as ``render_trace`` does; return its order, series texts and families.

    Each sample is rendered with its own index as its value, so the rendered text tells
    where every sample goes (family, series and demotions) without repeating the writer's
    rules here. Only the label group of a MetricPoint (the labels without ``quantile`` or
    ``le``) is worked out here, and checked to come out contiguous as the writer's sort has it.
    """
    t = samples[0].timestamp
    tagged = [Sample(s.name, s.labels, float(i), t) for i, s in enumerate(samples)]
    order: list[int] = []
    heads: list[str] = []
    blocks: list[tuple[str, str, int]] = []
    for line in render_trace(tagged, types).splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            blocks.append((family, kind, len(order)))
        elif not line.startswith("#"):
            head, index, _ = line.rsplit(" ", 2)
            order.append(int(index))
            heads.append(head)
    if len(order) != len(samples):
        raise ValueError("a scrape holds one series twice; the fleet trace needs each once")
    families: list[_Family] = []
    for b, (family, kind, start) in enumerate(blocks):
        end = blocks[b + 1][2] if b + 1 < len(blocks) else len(order)
        bound = "quantile" if kind == "summary" else "le"
        runs: list[tuple[int, int]] = []
        seen: set[tuple[tuple[str, str], ...]] = set()
        previous: tuple[tuple[str, str], ...] | None = None
        for col in range(start, end):
            group = tuple(p for p in samples[order[col]].labels if p[0] != bound)
            if not runs or group != previous:
                if group in seen:
                    raise ValueError(f"{family}: a label group is split in render_trace's order")
                seen.add(group)
                runs.append((col, col + 1))
                previous = group
            else:
                runs[-1] = (runs[-1][0], col + 1)
        families.append(_Family(f"# TYPE {family} {kind}\n", runs))
    return order, heads, families


def _read_columns(
    fd: int, chunks: list[tuple[int, int, int]], cols: tuple[int, int], scrapes: int
) -> npt.NDArray[np.float64]:
    """Return columns ``cols`` of every spilled chunk: one row a series, one column a scrape."""
    c0, c1 = cols
    width = c1 - c0
    values = np.empty((width, scrapes))
    for offset, k0, rows in chunks:
        size = width * rows * _FLOAT.itemsize
        data = os.pread(fd, size, offset + c0 * rows * _FLOAT.itemsize)
        if len(data) != size:
            raise OSError(f"short read of the spilled scrapes: {len(data)} of {size} bytes")
        values[:, k0 : k0 + rows] = np.frombuffer(data, dtype=_FLOAT).reshape(width, rows)
    return values


class _Out(Protocol):
    def write(self, data: bytes, /) -> int: ...


def _open_out(path: Path, compresslevel: int) -> gzip.GzipFile | io.BufferedWriter:
    """Open the trace for writing, gzipped if its name ends with ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "wb", compresslevel)
    return path.open("wb")


def _write_run(
    out: _Out, heads: list[str], values: npt.NDArray[np.float64], stamps: list[str]
) -> None:
    """Write one label group over the whole trace: by time, its series in render order."""
    lines: list[str] = []
    for stamp, row in zip(stamps, values.T.tolist(), strict=True):
        for head, value in zip(heads, row, strict=True):
            lines.append(f"{head} {format_number(value)} {stamp}\n")
        if len(lines) >= WRITE_LINES:
            out.write("".join(lines).encode("utf-8"))
            lines.clear()
    if lines:
        out.write("".join(lines).encode("utf-8"))


def _blocks(
    runs: list[tuple[int, int]], scrapes: int, budget: int
) -> Iterator[list[tuple[int, int]]]:
    """Group consecutive label groups into blocks of at most ``budget`` values (one at least)."""
    block: list[tuple[int, int]] = []
    for run in runs:
        if block and (run[1] - block[0][0]) * scrapes > budget:
            yield block
            block = []
        block.append(run)
    if block:
        yield block


def scrape_count(hours: float, interval: float) -> int:
    """Return the scrapes of a trace ``hours`` long, both ends included (as ``write_trace``)."""
    return int(hours * 3600 / interval) + 1


def write_fleet_trace(
    path: Path,
    *,
    scrapes: int,
    spec: FleetSpec,
    chunk_values: int = CHUNK_VALUES,
    block_values: int = BLOCK_VALUES,
    spill_dir: Path | None = None,
    compresslevel: int = 6,
) -> FleetTrace:
    """Write a generated fleet's trace family by family, series by series, in bounded memory.

    The text is what ``Fleet(spec).trace(scrapes)`` renders, but that holds every sample;
    here the fleet is scraped once, in time order, and each scrape's values go to a
    temporary file (8 bytes a sample) in chunks of scrapes stored series-major, so that the
    second pass reads one block of series over the whole trace with one read a chunk and
    writes it in ``render_trace``'s order. Memory holds the series texts, one chunk of
    ``chunk_values`` and one block of ``block_values`` values (a single label group over the
    whole trace if that is more: 7 x 8 bytes a scrape for a summary), and one short
    timestamp text a scrape. Every scrape must hold the same series in the same order, as a
    generated fleet's do; a gzipped path (``.gz``) is compressed.
    """
    if scrapes < 1:
        raise ValueError("a trace needs one scrape at least")
    fleet = Fleet(spec)
    targets = {target.name: target for target in fleet.targets}
    types: dict[str, str] = {}
    t = fleet.timestamp(fleet.scrapes)
    first = scrape_samples(fleet.scrape(), targets, t, types)
    known_types = dict(types)
    order, heads, families = _layout(first, types)
    names = [s.name for s in first]
    series = len(first)
    rows_per_chunk = max(1, chunk_values // series)
    chunk = np.empty((rows_per_chunk, series))
    chunks: list[tuple[int, int, int]] = []
    stamps: list[str] = []
    with tempfile.TemporaryFile(dir=spill_dir) as spill:
        filled = 0
        samples = first
        for k in range(scrapes):
            if k:
                t = fleet.timestamp(fleet.scrapes)
                samples = scrape_samples(fleet.scrape(), targets, t, types)
                if [s.name for s in samples] != names or types != known_types:
                    raise ValueError(f"scrape {k} holds other series than the first")
            values = np.fromiter((s.value for s in samples), dtype=_FLOAT, count=series)
            chunk[filled] = values[order]
            stamps.append(format_number(t))
            filled += 1
            if filled == rows_per_chunk or k == scrapes - 1:
                chunks.append((spill.tell(), k + 1 - filled, filled))
                # Series-major within the chunk: a block of series is one contiguous read.
                np.ascontiguousarray(chunk[:filled].T).tofile(spill)
                filled = 0
        del chunk, samples, first
        spill.flush()
        fd = spill.fileno()
        with _open_out(path, compresslevel) as out:
            for family in families:
                out.write(family.type_line.encode("utf-8"))
                for block in _blocks(family.runs, scrapes, block_values):
                    start, end = block[0][0], block[-1][1]
                    values = _read_columns(fd, chunks, (start, end), scrapes)
                    for c0, c1 in block:
                        _write_run(out, heads[c0:c1], values[c0 - start : c1 - start], stamps)
            out.write(b"# EOF\n")
    return FleetTrace(series * scrapes, scrapes, series, len(families))


# ---- replaying ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayCost:
    """One replay in a child process: wall and CPU seconds, peak RSS, exit status, JSON lines."""

    wall_s: float
    cpu_s: float
    peak_kib: int
    exit: int
    timed_out: bool = False
    events: int = 0


def _time_field(stderr: str, label: str) -> str | None:
    match = re.search(rf"{re.escape(label)}: ([0-9.]+)", stderr)
    return match.group(1) if match else None


def replay_cost(trace: Path, *extra: str, timeout_s: float | None = None) -> ReplayCost:
    """Replay a trace under ``/usr/bin/time -v`` in a child process; return what it cost.

    The child runs in its own session with its own temporary directory, so that a replay
    stopped at ``timeout_s`` is killed whole and leaves no spilled buckets behind.
    """
    spill = tempfile.mkdtemp(prefix="bench-replay-")
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "tritonguard.cli.main",
        "replay",
        str(trace),
        "--format",
        "json",
        *extra,
    ]
    started = time.perf_counter()
    timed_out = False
    try:
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, "TMPDIR": spill},
        ) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    wall = time.perf_counter() - started
    user = _time_field(stderr, "User time (seconds)")
    system = _time_field(stderr, "System time (seconds)")
    peak = _time_field(stderr, "Maximum resident set size (kbytes)")
    return ReplayCost(
        wall_s=wall,
        cpu_s=float(user or "nan") + float(system or "nan"),
        peak_kib=int(peak) if peak else -1,
        exit=proc.returncode,
        timed_out=timed_out,
        events=stdout.count("\n"),
    )


def replay_peak(trace: Path, *extra: str) -> tuple[float, int, int]:
    """Replay a trace in a child process; return (wall seconds, peak RSS in KiB, exit status)."""
    cost = replay_cost(trace, *extra)
    return cost.wall_s, cost.peak_kib, cost.exit


def _written(trace: Path, hours: float, fleet: FleetSpec | None, pods: int, models: int) -> int:
    """Write ``trace`` unless it exists; return its samples (kept beside it in a .json)."""
    meta = trace.with_name(trace.name + ".json")
    if trace.exists() and meta.exists():
        return int(json.loads(meta.read_text())["samples"])
    if fleet is None:
        samples = write_trace(trace, hours=hours, pods=pods, models=models)
        meta.write_text(json.dumps({"samples": samples}))
        return samples
    written = write_fleet_trace(trace, scrapes=scrape_count(hours, fleet.interval_s), spec=fleet)
    meta.write_text(json.dumps(asdict(written)))
    return written.samples


def measure(
    workdir: Path,
    hours: list[float],
    *,
    fleet: FleetSpec | None = None,
    pods: int = 5,
    models: int = 10,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Write and replay one trace per duration; return one row of measurements each.

    ``fleet`` writes generated fleets' traces, else the Triton-counters-only shape of
    ``pods`` x ``models``.
    """
    rows = []
    for h in hours:
        shape = f"fleet{fleet.pods}x{fleet.models}" if fleet else f"{pods}x{models}"
        trace = workdir / f"replay-{shape}-{h:g}h.om.gz"
        if fleet is None and (pods, models) == (5, 10):
            trace = workdir / f"replay-{h:g}h.om.gz"
        samples = _written(trace, h, fleet, pods, models)
        cost = replay_cost(trace, timeout_s=timeout_s)
        rows.append(
            {
                "hours": h,
                "samples": samples,
                "gz_mb": trace.stat().st_size / 1e6,
                "wall_s": cost.wall_s,
                "cpu_s": cost.cpu_s,
                "peak_rss_mb": cost.peak_kib / 1024,
                "trace_s_per_cpu_s": h * 3600 / cost.cpu_s if cost.cpu_s > 0 else math.nan,
                "exit": cost.exit,
                "timed_out": cost.timed_out,
                "events": cost.events,
            }
        )
    return rows


# ---- where a replay's time goes -------------------------------------------------------------

# Product functions whose cumulative time explains a replay, with what each stands for. Time
# spent pulling samples out of a generator is charged to whoever consumed it: the parse
# (iter_trace) is inside the spill, and reading buckets back (SpilledTrace.__iter__) inside
# Engine.ingest, which consumes the samples.
PROFILE_PARTS = (
    ("cli/cmd_replay.py", "run", "the replay command, all of it"),
    ("sources/trace_stream.py", "_spill", "pass 1: parse and spill to time buckets"),
    ("sources/replay.py", "iter_trace", "  of which parsing the trace (inflate, lines, samples)"),
    ("sources/trace_stream.py", "__iter__", "pass 2: buckets read back and sorted"),
    ("core/engine.py", "ingest", "Engine.ingest (storing; includes the bucket reads)"),
    ("core/engine.py", "evaluate", "Engine.evaluate"),
)


def profile_parts(stats: pstats.Stats) -> list[tuple[str, float, float]]:
    """Return (part, cumulative seconds, share of the replay command) for ``PROFILE_PARTS``."""
    cumulative: dict[tuple[str, str], float] = {}
    for (filename, _, func), row in stats.stats.items():  # type: ignore[attr-defined]
        for suffix, name, _ in PROFILE_PARTS:
            if func == name and filename.endswith(suffix):
                cumulative[(suffix, name)] = cumulative.get((suffix, name), 0.0) + row[3]
    total = cumulative.get(PROFILE_PARTS[0][:2], 0.0)
    if total <= 0:
        return []
    parts = [
        (what, cumulative.get((suffix, name), 0.0), cumulative.get((suffix, name), 0.0) / total)
        for suffix, name, what in PROFILE_PARTS
    ]
    stored = cumulative.get(PROFILE_PARTS[4][:2], 0.0) - cumulative.get(PROFILE_PARTS[3][:2], 0.0)
    parts.append(("storing alone (Engine.ingest less the bucket reads)", stored, stored / total))
    return parts


def top_cumulative(stats: pstats.Stats, top: int) -> list[str]:
    """Return the ``top`` product functions by cumulative time, as shares of the replay."""
    rows = [
        (row[3], row[1], filename, func)
        for (filename, _, func), row in stats.stats.items()  # type: ignore[attr-defined]
        if "/tritonguard/" in filename
    ]
    total = max((r[0] for r in rows if r[3] == "run" and "cmd_replay" in r[2]), default=0.0)
    if total <= 0:
        return []
    rows.sort(reverse=True)
    return [
        f"{ct / total:6.1%}  {calls:>10} calls  {filename.split('/tritonguard/')[-1]}:{func}"
        for ct, calls, filename, func in rows[:top]
    ]


def profile(trace: Path, out: Path, *, timeout_s: float | None = None) -> ReplayCost:
    """Replay ``trace`` as ``python -m cProfile -o OUT -m tritonguard.cli.main replay``.

    Its stats go to ``out``; the CPU and peak RSS are not read (cProfile inflates them).
    """
    started = time.perf_counter()
    spill = tempfile.mkdtemp(prefix="bench-replay-")
    command = [
        sys.executable,
        "-m",
        "cProfile",
        "-o",
        str(out),
        "-m",
        "tritonguard.cli.main",
        "replay",
        str(trace),
        "--format",
        "json",
    ]
    timed_out = False
    try:
        with subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TMPDIR": spill},
        ) as proc:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return ReplayCost(
        time.perf_counter() - started, math.nan, -1, proc.returncode, timed_out=timed_out
    )


# ---- command line ---------------------------------------------------------------------------


def _spec(args: argparse.Namespace) -> FleetSpec:
    return FleetSpec(
        pods=args.pods if args.pods is not None else 50,
        models=args.models if args.models is not None else 20,
        interval_s=args.interval,
        seed=args.seed,
    )


def main() -> None:
    """Write a trace, write and replay several and print their cost, or profile one replay."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write one synthetic trace")
    w.add_argument("trace", type=Path)
    w.add_argument("--hours", type=float, default=1.0)
    w.add_argument("--pods", type=int, help="default 5, with --fleet 50")
    w.add_argument("--models", type=int, help="default 10, with --fleet 20")
    w.add_argument("--interval", type=float, default=10.0)
    w.add_argument("--fleet", action="store_true", help="a generated fleet (benchmarks.fleet_gen)")
    w.add_argument("--seed", type=int, default=0, help="--fleet: the generator's seed")
    m = sub.add_parser("measure", help="write and replay traces of several durations")
    m.add_argument("--dir", type=Path, default=Path("/tmp"))
    m.add_argument("--hours", type=float, nargs="+", default=[1.0, 24.0])
    m.add_argument("--pods", type=int, help="default 5, with --fleet 50")
    m.add_argument("--models", type=int, help="default 10, with --fleet 20")
    m.add_argument("--interval", type=float, default=10.0, help="--fleet: seconds a scrape")
    m.add_argument("--fleet", action="store_true", help="generated fleets' traces")
    m.add_argument("--seed", type=int, default=0, help="--fleet: the generator's seed")
    m.add_argument("--timeout", type=float, help="stop a replay after this many wall seconds")
    p = sub.add_parser("profile", help="replay one trace under cProfile; print the shares")
    p.add_argument("trace", type=Path)
    p.add_argument("--out", type=Path, help="keep the profile here (default: a temporary file)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--timeout", type=float, help="stop the replay after this many wall seconds")
    args = parser.parse_args()
    if args.command == "write":
        if args.fleet:
            written = write_fleet_trace(
                args.trace, scrapes=scrape_count(args.hours, args.interval), spec=_spec(args)
            )
            print(
                f"wrote {args.trace}: {written.samples} samples, {written.scrapes} scrapes of "
                f"{written.series} series, {written.families} families"
            )
            return
        n = write_trace(
            args.trace,
            hours=args.hours,
            pods=args.pods if args.pods is not None else 5,
            models=args.models if args.models is not None else 10,
            interval=args.interval,
        )
        print(f"wrote {args.trace}: {n} samples")
        return
    if args.command == "profile":
        out = args.out or Path(tempfile.mkdtemp(prefix="bench-profile-")) / "replay.prof"
        cost = profile(args.trace, out, timeout_s=args.timeout)
        print(f"{args.trace}: exit {cost.exit}, {cost.wall_s:.1f} s wall under cProfile")
        if cost.timed_out or not out.exists():
            return
        stats = pstats.Stats(str(out))
        for what, seconds, share in profile_parts(stats):
            print(f"{share:6.1%}  {seconds:8.1f} s  {what}")
        print()
        for line in top_cumulative(stats, args.top):
            print(line)
        return
    rows = measure(
        args.dir,
        args.hours,
        fleet=_spec(args) if args.fleet else None,
        pods=args.pods if args.pods is not None else 5,
        models=args.models if args.models is not None else 10,
        timeout_s=args.timeout,
    )
    print(
        "| trace | samples | gz MB | wall s | CPU s | peak RSS MB | trace-s / CPU-s | exit "
        "| events |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['hours']:g} h | {row['samples']:,} | {row['gz_mb']:.1f} | "
            f"{row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['peak_rss_mb']:.1f} | "
            f"{row['trace_s_per_cpu_s']:.1f} | {row['exit']}"
            f"{' (stopped)' if row['timed_out'] else ''} | {row['events']} |"
        )


if __name__ == "__main__":
    main()
