"""End to end, second lab run: four more causes, diagnosed directly and through Prometheus."""

from __future__ import annotations

import pytest

from tests.e2e.checks import check_fault
from tests.e2e.conftest import MAX_DELAY_S, MORE_FAULTS
from tritonguard.lab.live_lab import Outcome

pytestmark = pytest.mark.live


@pytest.mark.parametrize("way", ["scrape", "prometheus"])
@pytest.mark.parametrize("scenario", MORE_FAULTS)
def test_daemon_diagnoses_more_causes(
    more_outcomes: dict[str, Outcome], scenario: str, way: str
) -> None:
    """Each way opens the right cause on the right model within 60 s, nothing else before.

    Instances contending for one saturated accelerator, a polled repository rewritten file
    by file, a client sending inputs 180 times larger and preprocessing throttled at its CPU
    quota, each on its own Triton, scraped by the daemon and by a real Prometheus the other
    daemon reads.
    """
    check_fault(more_outcomes[scenario], way, MAX_DELAY_S)
