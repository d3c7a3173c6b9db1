"""Replay of the eighth held-out part of the v2 set: judging each scrape with its config read.

Seven recordings made to test where judging at every scrape, with a shift's judgment held for
the config read it asked for, could open early or on the config a deploy replaced: a
batcher's delay raised on a 40 ms model (10 s scrapes, no summaries), a count dropped 3 -> 1
(5 s, no exporters), a new version deployed cold (5 s, no summaries), reloads through the
repository API every 18 s beside a light neighbour (2 s), inputs grown 120x (2 s, no
summaries), a retry storm at Prometheus' default 15 s and traffic falling at night (2 s).
They were recorded from a real Triton on 2026-12-07 into a directory nobody tuning the
engine read, with the engine frozen at that change (de94aa8), and replayed once, the lab's
config reads answered as the daemon's would be: every case was right. Any other outcome
fails, as in the other held-out parts.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

MEASURED: Measured = {}
CASES = cases("held_out_8")


def test_the_part_holds_its_seven_recordings() -> None:
    """Seven recordings, one per scenario of the part, and none declared other than right."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 7
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
