"""Replay of the CPU-pressure held-out part: recorded after the pressure evidence was set.

A slower model (40 ms + 20 MB hashed per execution, 8/s) at 10 s scrapes without summaries
beside a 3-thread hog at nice -8, and traffic falling at night (60 -> 12/s), both on a node
a background hog kept full from the first scrape. Recorded from a real Triton on 2026-12-07
after the CPU-pressure evidence and the load-fall rule of node_contention were frozen on
the tuning part (`test_v2_pressure.py`), and replayed once: the fault is right at +30 s in
every variant with cAdvisor, the night opens nothing. What is not right is declared below.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

MEASURED: Measured = {
    ("node_contention_full_slow_ph", "triton-only"): (
        "silent",
        "no CPU pressure without cAdvisor, and the host was full before the onset",
    ),
}
CASES = cases("pressure_held_out")


def test_the_part_holds_its_two_recordings() -> None:
    """Two recordings, one per scenario of the part, and every declaration names one of them."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 2
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
