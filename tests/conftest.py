"""Shared pytest set-up: the leak guard on every test, the property-test profiles, and the fakes.

The fakes are the Kubernetes and Slack APIs and a real Prometheus factory.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from _pytest.nodeid import coerce_node_id  # xdist's group suffix, below
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


# Wider-scoped fixtures worth starting once: a real Triton or lab per module, a wheel build, a
# promtool run over every trace. Under ``-n 2 --dist loadgroup`` the tests sharing one run on
# one worker, so the fixture is set up once instead of once per worker that drew one of them.
_SHARED_SCOPES = ("session", "package", "module")


def shared_group(item: pytest.Item) -> str | None:
    """Return the xdist group of a test that uses a project fixture wider than a function.

    A session fixture is shared by every test using it, wherever they live (the live lab's
    outcomes); a module fixture by the tests of that module.
    """
    if not isinstance(item, pytest.Function):
        return None
    # pytest has no public view of an item's resolved fixture definitions at collection time.
    defs = item._fixtureinfo.name2fixturedefs
    wide = [
        (fixdefs[-1].scope, name, fixdefs[-1].baseid)
        for name, fixdefs in sorted(defs.items())
        if fixdefs and fixdefs[-1].scope in _SHARED_SCOPES and fixdefs[-1].baseid
    ]
    for scope, name, baseid in wide:
        if scope == "session":
            return f"{baseid}::{name}"
    if wide:
        return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests that share a wider-scoped fixture, as the xdist scheduler sees them.

    xdist 3.8 hands groups to the scheduler as ``nodeid@group`` by assigning ``item._nodeid``,
    which pytest 9 no longer reads (the id is ``item._id``), so every test went out alone and
    each worker set up the shared fixtures again. On a worker under --dist loadgroup the id is
    suffixed here, as xdist means to.
    """
    # Set by xdist on its workers under --dist loadgroup; absent without xdist (-p no:xdist).
    suffix = bool(getattr(config.option, "loadgroup", False))
    for item in items:
        group = shared_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        names = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if suffix and names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


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
