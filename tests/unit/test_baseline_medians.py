"""Baseline medians and spreads: the same numbers, to the bit, as statistics.median per feature."""

from __future__ import annotations

import math
import random
from statistics import median

from tritonguard.core.baselines import BASELINE_FEATURES, BaselineHistory
from tritonguard.core.features import FeatureSet
from tritonguard.core.thresholds import Thresholds

KEY = ("prod", "triton-0", "resnet")


def _features(rng: random.Random) -> FeatureSet:
    f = FeatureSet(window_s=30.0, interval_s=10.0, fresh=True)
    for name in BASELINE_FEATURES:
        # Some features unknown at some scrapes, one never known; ties and exact zeros too.
        if name == "pcie_tx_bps" or rng.random() < 0.15:
            continue
        choice = rng.random()
        value = 0.0 if choice < 0.1 else round(rng.lognormvariate(5.0, 1.0), rng.choice((0, 9)))
        setattr(f, name, value)
    return f


def _reference(snapshots: list[FeatureSet]) -> tuple[dict[str, float], dict[str, float]]:
    values: dict[str, float] = {}
    spreads: dict[str, float] = {}
    for name in BASELINE_FEATURES:
        known = [v for f in snapshots if (v := getattr(f, name)) is not None]
        if known:
            values[name] = mid = median(known)
            spreads[name] = median(abs(v - mid) for v in known)
    return values, spreads


def test_medians_and_spreads_match_statistics_median_for_odd_and_even_counts() -> None:
    """Every known feature's median and MAD are statistics.median's; unknown ones are absent.

    From 5 to 44 healthy snapshots (odd and even counts), with unknown values, ties and zeros.
    """
    t = Thresholds()
    rng = random.Random(7)
    for count in range(5, 45):
        history = BaselineHistory(t)
        snapshots = [_features(rng) for _ in range(count)]
        for k, f in enumerate(snapshots):
            history.remember(KEY, 10.0 * k, f, healthy=True)
        now = 10.0 * (count - 1) + 30.0  # the gap excludes nothing newer than the last one
        base = history.baseline(KEY, now, 30.0, 10.0, None)
        assert base is not None and base.snapshots == count
        values, spreads = _reference(snapshots)
        assert base.values == values and base.spreads == spreads
        assert list(base.values) == list(values)  # in the features' order, as before
        assert "pcie_tx_bps" not in base.values
        assert all(type(v) is float and not math.isnan(v) for v in base.values.values())


def test_unhealthy_and_recent_snapshots_stay_out_of_the_medians() -> None:
    """Only healthy snapshots older than the gap count, whatever their values."""
    t = Thresholds()
    history = BaselineHistory(t)
    for k in range(10):
        f = FeatureSet(window_s=30.0, interval_s=10.0, fresh=True, mean_latency_us=float(k))
        history.remember(KEY, 10.0 * k, f, healthy=k % 3 != 0)
    base = history.baseline(KEY, 90.0, 30.0, 10.0, None)
    assert base is not None
    # Healthy and at or before 60 s: 1, 2, 4, 5.
    assert base.snapshots == 4 and base.values["mean_latency_us"] == 3.0
    assert base.spreads["mean_latency_us"] == 1.5
