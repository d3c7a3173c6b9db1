"""Steadiness is judged from the shift on, without hiding bursts inside the window."""

from __future__ import annotations

from tritonguard.core.derive import since_shift


def test_leading_healthy_scrapes_are_dropped() -> None:
    """A window straddling the onset keeps only the scrapes from the first abnormal one."""
    assert since_shift([2.0, 2.0, 110.0, 120.0, 115.0], limit=5.0) == [110.0, 120.0, 115.0]


def test_a_normal_scrape_between_abnormal_ones_stays() -> None:
    """Bursts (a spike, a normal scrape, a spike) still read as bursts."""
    assert since_shift([2.0, 90.0, 2.0, 95.0], limit=5.0) == [90.0, 2.0, 95.0]


def test_without_a_baseline_nothing_is_dropped() -> None:
    """No limit to compare against: the window is judged as it is."""
    assert since_shift([2.0, 90.0], limit=None) == [2.0, 90.0]


def test_a_healthy_window_is_kept_whole() -> None:
    """No abnormal scrape: nothing to align on, the whole window stays."""
    assert since_shift([2.0, 3.0, 2.5], limit=5.0) == [2.0, 3.0, 2.5]
