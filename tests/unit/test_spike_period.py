"""A period is read from spikes only where chance could not have placed them so evenly."""

from __future__ import annotations

import random

from tritonguard.core.recurrence import regularity
from tritonguard.core.thresholds import Thresholds

T = Thresholds()


def periodic(onsets: list[float]) -> bool:
    """Whether the onsets pass as a period, as model_reload judges them."""
    _, spread = regularity(onsets)
    return len(onsets) >= T.period_min_spikes and spread is not None and spread <= T.period_max_cv


def test_reloads_every_twenty_seconds_seen_within_a_scrape_are_a_period() -> None:
    """A job every 20 s, seen at 5 s scrapes: each spacing within a scrape of the period."""
    assert periodic([0.0, 20.0, 45.0, 65.0])
    assert periodic([0.0, 15.0, 30.0, 47.0, 62.0])


def test_three_spikes_are_no_period_however_even() -> None:
    """Two spacings cannot tell a period from chance: three spikes never read as one."""
    assert not periodic([0.0, 83.0, 166.0])


def test_one_wide_gap_breaks_a_period() -> None:
    """A robust spread would forgive the one gap that shows the spikes are not a job's."""
    assert not periodic([0.0, 15.0, 30.0, 45.0, 90.0])
    assert not periodic([-98.0, 4.0, 68.0, 75.0])


def test_random_spikes_rarely_pass_as_a_period() -> None:
    """Poisson spikes, four at a time, pass in about 5 % of sets (a robust spread: 45 %)."""
    rng = random.Random(7)
    sets = 20_000
    passed = 0
    for _ in range(sets):
        at = 0.0
        onsets = []
        for _ in range(4):
            at += rng.expovariate(1 / 60.0)
            onsets.append(at)
        passed += periodic(onsets)
    assert passed / sets < 0.08
