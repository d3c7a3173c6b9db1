"""Replay of the third held-out part of the v2 set: recorded while the engine was being fixed.

These six traces (batching_delay, too_few_instances, model_reload, cold_start, memory_copy and
a healthy control; four at 2 s scrapes, one at 5 s, two at 10 s; other models and rates
than any earlier part) were recorded from a real Triton on the busy shared node into a
directory nobody tuning the engine read, and replayed once, after the engine was frozen on
2026-12-02. What the engine gets wrong on them is declared below as measured, with the
reading. Any other outcome fails: a change that turns a right verdict wrong, opens before
the onset or raises a false alarm is caught, and one that mends a declared case shows up,
must update the declaration, and makes the trace a tuning trace. One change came after the
replay, for a live failure, not for this part: batching_delay's compute-tail veto was
removed, which made ``batching_delay_h3`` right at 30 s scrapes (it was late, +90 s) and
30 s earlier at 10 s. A second came after it, for the same live race: cold-looking bursts on
a node with no CPU to spare count as reload signs only when they recur at a period. It made
``batching_delay_h3`` right in every variant (Triton's own ``nv_cpu_utilization`` shows the
saturated host where node-exporter is missing), so that trace is a tuning trace from then on.
"""

from __future__ import annotations

from tests.replay.held_out import Measured, assert_declarations_name_cases, cases, measured_verdicts

# The measured outcome of every case that is not right, with its reading.
MEASURED: Measured = {
    ("memory_copy_h3", "30s"): ("late", "late: +210 s at 30 s scrapes"),
    ("memory_copy_h3", "triton-only"): (
        "silent",
        "silent with Triton's series only (no summaries in this recording either)",
    ),
}
CASES = cases("held_out_3")


def test_the_part_holds_its_six_recordings() -> None:
    """Six recordings (retry_storm_h3 failed to record twice) and every declaration names one."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 6
    assert "retry_storm_h3" not in names
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
