"""End to end: the same faults diagnosed by a daemon reading a real Prometheus."""

from __future__ import annotations

import pytest

from tests.e2e.checks import check_control, check_fault
from tests.e2e.conftest import CONTROL, FAULTS, MAX_DELAY_S
from tritonguard.lab.live_lab import Outcome

pytestmark = pytest.mark.live


@pytest.mark.parametrize("scenario", FAULTS)
def test_prometheus_daemon_diagnoses_fault(
    live_outcomes: dict[str, Outcome], scenario: str
) -> None:
    """The Prometheus-reading daemon opens the right cause on the right model within 60 s.

    A real Prometheus scrapes the lab; the daemon reads it with PromQL range selectors through
    prometheus-api-client, and opens nothing on that model before the right diagnosis.
    """
    check_fault(live_outcomes[scenario], "prometheus", MAX_DELAY_S)


def test_prometheus_daemon_leaves_healthy_control_alone(
    live_outcomes: dict[str, Outcome],
) -> None:
    """The healthy control, read through Prometheus, opens no incident."""
    check_control(live_outcomes[CONTROL], "prometheus")
