"""A healthy fleet of 2,000 subjects with Poisson noise opens nothing."""

from __future__ import annotations

from benchmarks.fleet_gen import FleetSpec
from benchmarks.healthy_fleet import run_healthy_fleet


def test_two_thousand_healthy_subjects_open_no_incident() -> None:
    """100 pods x 20 models, each its own rate, latency and queue share, 6 minutes of scrapes.

    Every subject is evaluated at every 10 s scrape, through the start (no history yet),
    the baselines being learnt and the steady state after; any incident is a false alarm.
    """
    run = run_healthy_fleet(FleetSpec(pods=100, models=20, interval_s=10.0), scrapes=36)
    assert run.subjects == 2000
    assert run.opened == [], run.summary()
