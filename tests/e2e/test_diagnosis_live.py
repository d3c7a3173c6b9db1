"""End to end: the daemon scraping live Tritons directly diagnoses injected faults."""

from __future__ import annotations

import pytest

from tests.e2e.checks import check_control, check_fault
from tests.e2e.conftest import CONTROL, FAULTS, MAX_DELAY_S
from tritonguard.lab.live_lab import Outcome

pytestmark = pytest.mark.live


@pytest.mark.parametrize("scenario", FAULTS)
def test_scraping_daemon_diagnoses_fault(live_outcomes: dict[str, Outcome], scenario: str) -> None:
    """The scraping daemon opens the right cause on the right model within 60 s of onset.

    It scrapes Triton, the lab exporters and the ingress counters directly, as `run` does,
    and opens nothing on that model before the right diagnosis.
    """
    check_fault(live_outcomes[scenario], "scrape", MAX_DELAY_S)


def test_scraping_daemon_leaves_healthy_control_alone(live_outcomes: dict[str, Outcome]) -> None:
    """A model serving steady traffic within capacity, scraped the same way, opens no incident."""
    check_control(live_outcomes[CONTROL], "scrape")
