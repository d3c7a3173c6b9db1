"""Pytest fixtures that start the fake Kubernetes API server and the fake Slack Web API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube


@pytest.fixture
async def fake_kube() -> AsyncIterator[FakeKube]:
    """Serve a fake Kubernetes API on the test's event loop; stop it after the test."""
    async with FakeKube() as server:
        yield server


@pytest.fixture
def fake_kube_thread() -> Iterator[FakeKube]:
    """Serve a fake Kubernetes API from its own thread, for synchronous tests (kubectl)."""
    server = FakeKube()
    with server.run_in_thread():
        yield server


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """Serve a fake Slack Web API (one bot token, three channels) on the test's event loop."""
    async with FakeSlack() as server:
        yield server
