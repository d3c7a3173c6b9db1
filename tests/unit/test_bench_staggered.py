"""The staggered-fleet benchmark: what its figure in docs/benchmarks.md rests on."""

from __future__ import annotations

from benchmarks.bench_staggered import measure


def test_each_subject_is_judged_once_a_scrape_among_staggered_evaluations() -> None:
    """Ten evaluations an interval, each subject's baseline one snapshot a scrape at most.

    The benchmark times the daemon's case (targets arriving all through the interval); an
    engine that judged every subject at every evaluation would hold ten snapshots a scrape.
    """
    cost = measure(60, 2, slots=10, warmup=4)
    assert cost.slots == 10 and cost.subjects == 60 and cost.scrapes == 6
    assert 0 < cost.snapshots <= cost.subjects * cost.scrapes
    assert cost.evaluate_s > 0 and cost.baseline_s > 0
    assert "evaluations an interval" in cost.line()
