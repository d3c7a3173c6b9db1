"""The baselines' memory estimate covers what a young fleet's subjects really hold."""

from __future__ import annotations

import tracemalloc

from tritonguard.core.baselines import BaselineHistory
from tritonguard.core.features import FeatureSet
from tritonguard.core.thresholds import Thresholds

SUBJECTS = 2000


def _features() -> FeatureSet:
    f = FeatureSet(window_s=30.0, interval_s=5.0, fresh=True)
    f.request_rate, f.mean_latency_us, f.mean_queue_us = 20.0, 5_000.0, 500.0
    return f


def _held(snapshots: int) -> tuple[int, int]:
    """Return (traced bytes, estimate) of SUBJECTS subjects with ``snapshots`` each."""
    f = _features()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = BaselineHistory(Thresholds())
        for n in range(snapshots):
            for k in range(SUBJECTS):
                history.remember(("prod", f"triton-{k}", "resnet"), 1000.0 + 5 * n, f, True)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return used, history.approx_bytes


def test_the_estimate_covers_subjects_with_one_snapshot() -> None:
    """Just after a start each subject holds one snapshot: its own cost dominates, and counts."""
    used, estimate = _held(1)
    assert used <= estimate, (
        f"{used / SUBJECTS:.0f} B a subject held, {estimate / SUBJECTS:.0f} counted"
    )


def test_the_estimate_covers_subjects_with_a_few_snapshots() -> None:
    """At six snapshots a subject the estimate still covers what is held."""
    used, estimate = _held(6)
    assert used <= estimate, (
        f"{used / SUBJECTS:.0f} B a subject held, {estimate / SUBJECTS:.0f} counted"
    )


def test_a_bound_sheds_the_least_recent_subjects_by_their_whole_cost() -> None:
    """With room for half the subjects (snapshot and own cost), about half are kept."""
    f = _features()
    history = BaselineHistory(Thresholds(), max_bytes=SUBJECTS // 2 * (224 + 768))
    for k in range(SUBJECTS):
        history.remember(("prod", f"triton-{k}", "resnet"), 1000.0, f, True)
    assert history.approx_bytes <= SUBJECTS // 2 * (224 + 768)
    assert history.subjects_shed == SUBJECTS - SUBJECTS // 2
