"""Shared pytest set-up: the leak guard on every test, the property-test profiles, and the fakes.

The fakes are the Kubernetes and Slack APIs and a real Prometheus factory.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests import leak_guard
from tests.fixtures_fakes import fake_kube, fake_kube_thread, fake_slack
from tests.fixtures_prometheus import prometheus_factory

__all__ = ["fake_kube", "fake_kube_thread", "fake_slack", "prometheus_factory"]

# Property tests run the same examples on every machine and in CI, bounded in time, with no
# example database to carry state between runs: a failure reproduces from the seed alone.
settings.register_profile(
    "ci",
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# For a long hunt on a developer machine: HYPOTHESIS_PROFILE=long pytest tests/unit -k propert
# Random seeds, many more examples, and failures kept (and replayed first) between runs.
settings.register_profile(
    "long",
    max_examples=5000,
    stateful_step_count=80,
    deadline=None,
    database=DirectoryBasedExampleDatabase(
        Path(__file__).parent.parent / ".pytest_cache" / "hypothesis"
    ),
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """Watch event loops, tasks and child processes from before the first test on."""
    leak_guard.install(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep the per-test garbage collection as cheap as what each test allocates."""
    leak_guard.freeze_startup_objects()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    """Name the fixture in a leak's report, and hold wider-scoped fixtures to their own account."""
    with leak_guard.watching_fixture(fixturedef):
        return (yield)


@pytest.fixture(autouse=True)
def _no_leaks(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """Fail the test if it or its fixtures leave tasks, threads, processes or resources behind.

    Autouse and in the outermost conftest, so it is set up before, and torn down after, every
    other fixture of the test (the test's event loop included).
    """
    yield from leak_guard.guard(request.node)
