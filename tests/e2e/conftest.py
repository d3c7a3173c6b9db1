"""Two live lab runs shared by the end-to-end tests: faults and a control, watched two ways.

The second run takes the first's outcomes as a fixture, so it starts only after the first
ended, on the same xdist worker (tests/conftest.py groups them): two labs side by side
would share two cores between eight Tritons, two Prometheus servers and four daemons.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil

import pytest

from tritonguard.lab.live_lab import Outcome, retimed, run_live, sigterm_as_interrupt
from tritonguard.lab.scenario_runner import Scenario
from tritonguard.lab.scenarios import SCENARIOS
from tritonguard.lab.triton_server import TritonServerError, pytriton_root

# Faults injected at once, each on its own Triton, plus a healthy control in its own namespace
# (ingress counters join on namespace, so the control must not share one with a fault).
FAULTS = ("batching_delay", "too_few_instances", "retry_storm", "cold_start")
CONTROL = "healthy_steady"
BASELINE_S = 60.0  # the engine needs about 50 s of healthy history for a baseline
FAULT_S = 60.0  # detection must come within 60 s of onset
MAX_DELAY_S = 60.0
# The second run: causes that load no more CPU than the first run's. cpu_bottleneck's
# server is held to its 1-core quota as CFS would hold it (LabExporters enforces it), so it
# queues without taking the node. node_contention needs other work saturating the node,
# which would slow the other worker's tests and every Triton of the run, and on a node the
# suite already keeps busy its busy share cannot rise (node_contention.busier): it runs
# alone after the suite (test_diagnosis_contention.py). memory_copy's 12 MB inputs failed unsent in
# the suite until pyproject.toml let aiohttp's large-body ResourceWarning through
# (docs/detection.md, "End-to-end tests").
MORE_FAULTS = ("too_many_instances", "model_reload", "memory_copy", "cpu_bottleneck")


def _scenarios() -> list[Scenario]:
    faults = [retimed(SCENARIOS[name], BASELINE_S, FAULT_S) for name in FAULTS]
    control = dataclasses.replace(
        retimed(SCENARIOS[CONTROL], BASELINE_S, FAULT_S), namespace="catalog"
    )
    return [*faults, control]


def _run(scenarios: list[Scenario]) -> dict[str, Outcome]:
    """Run ``scenarios`` at once on live Tritons, watched both ways; outcomes by name."""
    try:
        pytriton_root()
    except TritonServerError as exc:
        pytest.fail(str(exc))
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus is not installed; run `make system-deps`")
    with sigterm_as_interrupt():
        outcomes = asyncio.run(run_live(scenarios, ways=("scrape", "prometheus")))
    for o in outcomes:  # shown with -s: what each daemon concluded, for the CI log
        print(json.dumps(o.as_dict(), default=str))
    return {o.name: o for o in outcomes}


@pytest.fixture(scope="session")
def live_outcomes() -> dict[str, Outcome]:
    """Run the faults and the control once, watched by a scraping and a Prometheus-reading daemon."""
    return _run(_scenarios())


@pytest.fixture(scope="session")
def more_outcomes(live_outcomes: dict[str, Outcome]) -> dict[str, Outcome]:
    """Run the second set of faults once the first run is over, watched both ways."""
    del live_outcomes  # a dependency for the order only: one lab at a time on the node
    return _run([retimed(SCENARIOS[name], BASELINE_S, FAULT_S) for name in MORE_FAULTS])
