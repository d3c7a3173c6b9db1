"""Replay memory: write long Triton traces series by series and replay them in bounded memory.

``python -m benchmarks.bench_replay_memory write TRACE --hours 24`` writes a trace of 5 pods x
10 models scraped every 10 s (what a small production cluster records in a day), the way
promtool backfill files and ``trace_writer`` lay them out: family by family, series by series.
Replay it under ``/usr/bin/time -v tritonguard replay TRACE --format json`` and compare the
peak resident size of a 1 h and a 24 h trace; ``measure`` does both and prints the table.
"""

from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tritonguard.core.samples import Labels, Sample, make_labels
from tritonguard.core.trace_writer import render_trace

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


def replay_peak(trace: Path, *extra: str) -> tuple[float, int, int]:
    """Replay a trace in a child process; return (wall seconds, peak RSS in KiB, exit status)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [
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
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return wall, int(match.group(1)) if match else -1, proc.returncode


def measure(workdir: Path, hours: list[float]) -> list[dict[str, Any]]:
    """Write and replay one trace per duration; return one row of measurements each."""
    rows = []
    for h in hours:
        trace = workdir / f"replay-{h:g}h.om.gz"
        if not trace.exists():
            write_trace(trace, hours=h)
        wall, peak_kib, code = replay_peak(trace)
        rows.append(
            {
                "hours": h,
                "gz_mb": trace.stat().st_size / 1e6,
                "wall_s": wall,
                "peak_rss_mb": peak_kib / 1024,
                "exit": code,
            }
        )
    return rows


def main() -> None:
    """Write a trace, or write and replay several and print their peak memory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write one synthetic trace")
    w.add_argument("trace", type=Path)
    w.add_argument("--hours", type=float, default=1.0)
    w.add_argument("--pods", type=int, default=5)
    w.add_argument("--models", type=int, default=10)
    w.add_argument("--interval", type=float, default=10.0)
    m = sub.add_parser("measure", help="write and replay traces of several durations")
    m.add_argument("--dir", type=Path, default=Path("/tmp"))
    m.add_argument("--hours", type=float, nargs="+", default=[1.0, 24.0])
    args = parser.parse_args()
    if args.command == "write":
        n = write_trace(
            args.trace, hours=args.hours, pods=args.pods, models=args.models, interval=args.interval
        )
        print(f"wrote {args.trace}: {n} samples")
        return
    for row in measure(args.dir, args.hours):
        print(
            f"{row['hours']:>5g} h  {row['gz_mb']:7.1f} MB gz  replay {row['wall_s']:7.1f} s  "
            f"peak RSS {row['peak_rss_mb']:7.1f} MB  exit {row['exit']}"
        )


if __name__ == "__main__":
    main()
