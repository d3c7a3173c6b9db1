"""A subject's birth, for its cold start, is when it began serving, not when its series appeared."""

from __future__ import annotations

from array import array

from tritonguard.core.births import first_served
from tritonguard.core.series_store import Series


def _success(times: list[float], values: list[float]) -> Series:
    return Series(
        "nv_inference_request_success",
        (("model", "m"), ("pod", "p-1")),
        True,
        array("d", times),
        array("d", values),
        born=times[0],
    )


def test_a_pod_ready_before_its_traffic_is_born_at_the_scrape_before_its_first_request() -> None:
    """Scraped empty from t=0, first requests in the scrape at t=30: its birth is t=28.

    A scale-out's pod is Ready (and scraped) before the load balancer routes to it; its
    cold first executions come with its first request, which fell between 28 and 30.
    """
    times = [float(t) for t in range(0, 40, 2)]
    values = [0.0] * 15 + [4.0, 9.0, 15.0, 22.0, 30.0]
    assert first_served([_success(times, values)], 0.0) == 28.0


def test_a_subject_that_served_at_once_keeps_its_birth() -> None:
    """Requests from its first scrape on, or none at all yet: the series' birth stands."""
    times = [10.0, 12.0, 14.0]
    assert first_served([_success(times, [3.0, 8.0, 12.0])], 10.0) == 10.0
    assert first_served([_success(times, [0.0, 0.0, 0.0])], 10.0) == 10.0
