"""End to end through a real Prometheus: the causes of the lab's second run are diagnosed."""

from __future__ import annotations

import pytest

from tests.e2e.checks import check_fault
from tests.e2e.conftest import MAX_DELAY_S, MORE_FAULTS
from tritonguard.lab.live_lab import Outcome

pytestmark = pytest.mark.live


@pytest.mark.parametrize("scenario", MORE_FAULTS)
def test_prometheus_daemon_diagnoses_more_causes(
    more_outcomes: dict[str, Outcome], scenario: str
) -> None:
    """The Prometheus-reading daemon opens the right cause on the right model within 60 s.

    Instances fighting over one saturated accelerator, and a polled repository rewritten file
    by file every 15 s: each on its own Triton scraped by a real Prometheus, and nothing opened
    on that model before the right diagnosis (nor before onset).
    """
    check_fault(more_outcomes[scenario], "prometheus", MAX_DELAY_S)
