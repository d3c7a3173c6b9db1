"""Streamed replay: time order from time buckets on disk, memory bounded whatever the length."""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.core.trace_writer import render_trace
from tritonguard.sources.replay import TraceError, load_trace
from tritonguard.sources.trace_stream import open_trace, scan_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "fixtures" / "traces"
START = 1_700_000_000.0


def _write(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


def _series_by_series(series: int, steps: int, step_s: float = 10.0) -> str:
    """Render a trace laid out as promtool backfill files are: each series whole, in turn."""
    rows = ["# TYPE probe gauge\n"]
    for i in range(series):
        lab = f'probe{{namespace="ns",pod="p{i % 3}",i="{i}"}}'
        rows += [f"{lab} {i * 1000 + k} {START + k * step_s:.3f}\n" for k in range(steps)]
    rows.append("# EOF\n")
    return "".join(rows)


def _stable_sort(samples: Iterable[Sample]) -> list[Sample]:
    return sorted(samples, key=lambda s: s.timestamp or 0.0)


@pytest.mark.parametrize(
    ("bucket_samples", "span"),
    [(1_000_000, 60.0), (7, 60.0), (7, 1e9), (1, 0.5)],
    ids=["one-bucket-each", "resplit", "one-huge-bucket", "tiny"],
)
def test_streamed_order_is_a_stable_sort_of_the_file(
    tmp_path: Path, bucket_samples: int, span: float
) -> None:
    """Buckets, re-splits and ties give exactly what a stable sort of the whole file gives."""
    text = _series_by_series(series=5, steps=40)
    # Ties across series (same instant), a repeated instant and a series that starts before
    # the ones written above it ended.
    text = text.replace("# EOF\n", "")
    text += f'probe{{i="late"}} 1 {START:.0f}\nprobe{{i="late"}} 2 {START:.0f}\n'
    text += f'probe{{i="late"}} 3 {START + 5:.0f}\n# EOF\n'
    path = _write(tmp_path / "t.om.gz", text)
    with open_trace(path, bucket_samples=bucket_samples, bucket_span_s=span) as trace:
        streamed = list(trace)
        again = list(trace)
    assert streamed == _stable_sort(load_trace(path))
    assert again == streamed, "each iteration starts again from the beginning"


def test_a_series_whose_points_go_back_in_time_is_refused_at_its_line(tmp_path: Path) -> None:
    """OpenMetrics orders one series' points by time: a point going back names its line."""
    text = _series_by_series(series=2, steps=3).replace("# EOF\n", "")
    text += f'probe{{i="late"}} 1 {START + 5:.0f}\nprobe{{i="late"}} 2 {START:.0f}\n# EOF\n'
    path = _write(tmp_path / "t.om.gz", text)
    with (
        pytest.raises(TraceError, match=r"t\.om\.gz:9: .*goes back.*time order"),
        open_trace(path, bucket_samples=4, bucket_span_s=60.0) as trace,
    ):
        list(trace)


def test_one_instant_larger_than_the_budget_streams_in_file_order(tmp_path: Path) -> None:
    """A scrape bigger than the bucket budget is passed through without sorting or holding it."""
    rows = [f'probe{{i="{i}"}} {i} {START:.0f}\n' for i in range(50)]
    path = _write(tmp_path / "t.om", "".join(rows) + f'probe{{i="x"}} 0 {START - 1:.0f}\n# EOF\n')
    with open_trace(path, bucket_samples=8, bucket_span_s=3600) as trace:
        streamed = list(trace)
        assert trace.peak_held <= 8
    assert streamed == _stable_sort(load_trace(path))


def test_samples_held_at_once_do_not_grow_with_the_trace_length(tmp_path: Path) -> None:
    """Ten times the duration holds no more samples in memory, spilling or replaying."""
    peaks = []
    for steps in (200, 2000):
        path = _write(tmp_path / f"t{steps}.om.gz", _series_by_series(series=20, steps=steps))
        with open_trace(
            path, bucket_samples=500, bucket_span_s=600.0, spill_buffer_bytes=20 * 300
        ) as trace:
            assert trace.samples == 20 * steps
            assert sum(1 for _ in trace) == 20 * steps
            peaks.append((trace.peak_held, trace.peak_buffered))
    (held_short, buffered_short), (held_long, buffered_long) = peaks
    # A 600 s bucket of 20 series at 10 s is 1200 samples: over the budget, so it is split.
    assert held_long <= 500 and buffered_long <= 300
    assert held_long <= held_short and buffered_long <= buffered_short


def test_replay_events_are_identical_to_replaying_the_sorted_trace() -> None:
    """On recorded traces the streamed replay reports exactly what the in-memory one did."""
    for name in ("batching_delay", "retry_storm", "cold_start"):
        path = TRACES / f"{name}.om.gz"
        before = [[ev.as_dict() for ev in evs] for _, evs in drive(Engine(), load_trace(path))]
        with open_trace(path, bucket_samples=2000, bucket_span_s=30.0) as trace:
            after = [[ev.as_dict() for ev in evs] for _, evs in drive(Engine(), trace)]
        assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True), name
        assert any(after), f"{name}: expected incidents in the recorded trace"


def test_temporary_files_go_on_close_and_when_the_trace_is_refused(tmp_path: Path) -> None:
    """Spilled buckets live in one private directory, removed on close and on a bad trace."""
    spill = tmp_path / "spill"
    spill.mkdir()
    path = _write(tmp_path / "t.om", _series_by_series(series=3, steps=30))
    trace = open_trace(path, spill_dir=spill)
    assert any(spill.iterdir())
    trace.close()
    assert not any(spill.iterdir())
    bad = _write(tmp_path / "bad.om", _series_by_series(series=3, steps=30).replace("# EOF\n", ""))
    with pytest.raises(TraceError, match=r"bad.om:\d+: missing the closing '# EOF'"):
        open_trace(bad, spill_dir=spill)
    assert not any(spill.iterdir())


def test_scan_reports_count_and_span_without_holding_the_trace(tmp_path: Path) -> None:
    """A regression test's start comes from one streaming pass over its trace."""
    path = _write(tmp_path / "t.om.gz", _series_by_series(series=4, steps=25))
    summary = scan_trace(path)
    assert (summary.samples, summary.start, summary.end) == (100, START, START + 240)


def test_an_error_at_the_end_of_a_trace_comes_before_any_event(tmp_path: Path) -> None:
    """Streaming does not print half a replay: a bad last line is found before the first event."""
    series = triton_model(
        [Phase(24, rps=30), Phase(24, rps=49, queue_ms=300, pending=12)], interval=5.0
    )
    text = render_trace(samples_of(series, interval=5.0)).replace("# EOF\n", "garbage\n# EOF\n")
    path = _write(tmp_path / "t.om", text)
    proc = subprocess.run(
        [sys.executable, "-m", "tritonguard.cli.main", "replay", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        len(proc.stderr.strip().splitlines()) == 1
        and "sample 'garbage' has no value" in proc.stderr
    )


def _limit_address_space(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_a_long_trace_replays_under_a_tight_address_space_limit(tmp_path: Path) -> None:
    """A million samples replay in a process allowed 400 MiB; holding them whole needs more.

    Loaded into memory the samples alone take some 700 MB, so this fails unless replay
    streams. The probe series keep the engine's own work small.
    """
    path = tmp_path / "long.om.gz"
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write("# TYPE probe gauge\n")
        for i in range(500):
            lab = f'probe{{i="{i}",namespace="ns",pod="p{i % 7}"}}'
            out.write("".join(f"{lab} {k} {START + 3600.0 * k:.0f}\n" for k in range(2000)))
        out.write("# EOF\n")
    limit = 400 * 1024 * 1024
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonguard.cli.main",
            "replay",
            str(path),
            "--format",
            "json",
            "--stats",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=lambda: _limit_address_space(limit),
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(1000000 samples)" in proc.stderr
    assert time.monotonic() - started < 300
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tritonguard-replay-")]
