"""Steadiness is judged from the shift on, without hiding bursts inside the window."""

from __future__ import annotations

from tritonguard.core.derive import shift_start, since_shift


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


def test_a_shift_begins_at_its_first_abnormal_scrape() -> None:
    """The window before the shift ends where the first slow scrape of the stretch begins."""
    points = [(10.0, 2.0), (20.0, 2.0), (30.0, 9.0), (40.0, 9.5)]
    assert shift_start(points, limit=5.0, quiet=4) == 30.0


def test_a_shift_runs_through_fewer_normal_scrapes_than_the_quiet_run() -> None:
    """Reloads leave a normal scrape or two between slow ones: still the same shift."""
    points = [(10.0, 2.0), (20.0, 9.0), (30.0, 2.0), (40.0, 2.0), (50.0, 9.0)]
    assert shift_start(points, limit=5.0, quiet=3) == 20.0


def test_a_quiet_run_ends_the_shift() -> None:
    """As many normal scrapes in a row as the quiet run: an earlier slow scrape is another episode."""
    points = [(10.0, 9.0), (20.0, 2.0), (30.0, 2.0), (40.0, 9.0)]
    assert shift_start(points, limit=5.0, quiet=2) == 40.0


def test_no_shift_without_an_abnormal_scrape_or_a_limit() -> None:
    """Nothing above the limit, or no baseline to set one: there is no shift to read before."""
    points = [(10.0, 2.0), (20.0, 3.0)]
    assert shift_start(points, limit=5.0, quiet=4) is None
    assert shift_start(points, limit=None, quiet=4) is None
