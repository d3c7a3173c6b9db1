"""Replay of the seventh held-out part of the v2 set: the config read on a shift, tested once.

Six recordings made to test where reading a model's config on a latency shift could be
wrong: too_many_instances raised 2 -> 5 (5 s scrapes) and 1 -> 2 without DCGM (2 s), a
healthy raise 2 -> 4, a neighbour slowing a model of three instances (a configured count
once read as instances fighting), a count dropped 4 -> 2 at 10 s and a batcher's delay raised
at 15 s, where the first reading may weigh the config the deploy replaced. They were recorded
from a real Triton on 2026-12-07 into a directory nobody tuning the engine read, with the
engine frozen at that change (a3d5efb), and replayed once, the lab's config reads answered
as the daemon's would be. What the engine does not get right is declared below as measured,
with the reading; any other outcome fails, as in the other held-out parts.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

# Five instances where two ran, on one accelerator at a steady 50/s with 4 ms switches:
# compute per inference rose 1.12x at most and the queue's share fell (0.14 -> 0.11), so
# latency never rose past the symptom's bar; no cause is named, and none should be. Too mild
# to be an explosion, as the fourth part's was.
_MILD = "no latency symptom: compute per inference up 1.12x at most, the queue's share down"
MEASURED: Measured = {
    ("too_many_instances_h7", variant): ("silent", _MILD)
    for variant in ("native", "10s", "30s", "triton-only", "no-summaries")
}
CASES = cases("held_out_7")


def test_the_part_holds_its_six_recordings() -> None:
    """Six recordings, one per scenario of the part, and every declaration names one of them."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 6
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
