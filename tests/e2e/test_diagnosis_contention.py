"""End to end, alone on the node: a neighbour's CPU hog named node_contention, both ways."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.e2e.checks import check_fault
from tests.e2e.conftest import BASELINE_S, FAULT_S, MAX_DELAY_S
from tritonguard.lab.live_lab import Outcome, retimed, run_live, sigterm_as_interrupt
from tritonguard.lab.scenarios import SCENARIOS

# The cause's mechanism is other work taking the node's CPUs, so this run must have the node
# to itself: beside the suite's other worker the hog would slow every test and Triton there,
# and on a node the suite already keeps busy the busy share has no room to rise (the
# signature discounts a node saturated before the shift). `make test` runs it after the
# parallel suite, alone (`-m node_exclusive`); the suite's own run deselects it.
pytestmark = [pytest.mark.live, pytest.mark.node_exclusive]


@pytest.fixture(scope="module")
def contention_outcome() -> Outcome:
    """Run the node_contention scenario once, watched by a scraping and a Prometheus-reading daemon."""
    scenario = retimed(SCENARIOS["node_contention"], BASELINE_S, FAULT_S)
    with sigterm_as_interrupt():
        (outcome,) = asyncio.run(run_live([scenario], ways=("scrape", "prometheus")))
    print(json.dumps(outcome.as_dict(), default=str))  # what each daemon concluded, for CI
    return outcome


@pytest.mark.parametrize("way", ["scrape", "prometheus"])
def test_a_cpu_hog_beside_triton_is_named_node_contention(
    contention_outcome: Outcome, way: str
) -> None:
    """A hog in a heavier-weighted session takes the node's CPUs from a steady model.

    Compute per inference inflates at unchanged load, concurrency and config while the node's
    busy share rises with the shift and Triton's own CPU does not: each way opens
    node_contention on the model within 60 s of the hog's start, with nothing before it.
    """
    check_fault(contention_outcome, way, MAX_DELAY_S)
