"""A verification the daemon stopped in is resumed by the next start, or rolled back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.playbook_harness import StaticFeatures, incident, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

SCALE_THEN_VERIFY = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
escalate:
  - action: slack.post
    params: {text: "scaling {{ model }} did not help"}
"""
T0 = 5000.0


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with one Deployment of two replicas."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        yield server


class Clock:
    """The replica's wall clock, moved by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        """Return the time."""
        return self.now


def replica(
    db: Path,
    kube: FakeKube,
    slack: FakeSlack,
    *,
    features: StaticFeatures,
    clock: Clock,
    sleep: asyncio.Event | None = None,
) -> PlaybookStage:
    """Return a daemon's playbook stage on its audit file; ``sleep`` holds verify waits."""

    async def wait(seconds: float) -> None:
        if sleep is not None:
            await sleep.wait()

    env = ExecutorEnv(
        kube=KubernetesClient.for_host(kube.url),
        slack=SlackNotifier(slack.token, base_url=slack.base_url),
        slack_channel="#ml-oncall",
        features=features,
        clock=clock,
        sleep=wait,
    )
    books = load_playbooks_text(SCALE_THEN_VERIFY, "scale.yaml", catalog())
    return stage(books, AuditStore(db), settings=GuardSettings(dry_run=False), env=env)


async def stop_mid_verify(on: PlaybookStage) -> None:
    """Start the playbook, wait for the verify step to begin waiting, then cancel it (SIGTERM)."""
    on.step([incident(at=T0, opened_at=T0 - 100)], T0)
    await waiting.wait_for(
        lambda: on.store.pending_verifications() or on.executor.verifying, 2.0, poll_s=0.01
    )
    for task in on.in_flight():
        task.cancel()
    await asyncio.gather(*on.in_flight(), return_exceptions=True)
    on.store.close()


def trail(on: PlaybookStage) -> list[tuple[str, str]]:
    """Return action and status of every decision in the audit file."""
    return [(r.action, r.status) for r in on.store.decisions()]


def replicas(kube: FakeKube) -> int:
    """Return the Deployment's replica count."""
    return kube.replicas("Deployment", "prod", "triton")


async def resumed(on: PlaybookStage, at: float) -> list[ActionRecord]:
    """Return every record a step at ``at`` made."""
    return [r for rs in (await on.run_step([], at)).values() for r in rs]


async def test_a_stop_mid_verify_is_recorded_and_the_next_start_rolls_back_a_failing_fix(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """A cancel is recorded; after a restart the due check fails, the scale is undone, escalated."""
    db = tmp_path / "audit.sqlite3"
    clock = Clock()
    first = replica(
        db, kube, fake_slack, features=StaticFeatures(0.95), clock=clock, sleep=asyncio.Event()
    )
    await stop_mid_verify(first)
    assert replicas(kube) == 3
    again = replica(db, kube, fake_slack, features=StaticFeatures(0.95), clock=clock)
    threads = attach(again, fake_slack, "#ml-oncall")
    assert trail(again) == [("kubernetes.scale", "ran"), ("verify", "cancelled")]
    assert "resumes it" in again.store.decisions()[-1].reason
    clock.now = T0 + 30
    assert await resumed(again, clock.now) == []  # not due yet: the fix gets its minute
    clock.now = T0 + 61
    records = await resumed(again, clock.now)
    assert [(r.action, r.status, r.phase) for r in records] == [
        ("verify", "failed", "step"),
        ("kubernetes.scale", "rolled_back", "rollback"),
        ("slack.post", "ran", "escalate"),
    ]
    assert "resumed after a restart" in records[0].reason
    assert replicas(kube) == 2
    await threads.worker.drain()
    await threads.close()
    assert "did not help" in str(fake_slack.roots_in("#ml-oncall")[-1].blocks)
    assert await resumed(again, T0 + 120) == []  # judged once


async def test_a_fix_that_works_is_kept_when_the_resumed_check_passes(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """The resumed verification passes on fresh data: the scale stays and nothing is undone."""
    db = tmp_path / "audit.sqlite3"
    clock = Clock()
    await stop_mid_verify(
        replica(
            db, kube, fake_slack, features=StaticFeatures(0.95), clock=clock, sleep=asyncio.Event()
        )
    )
    again = replica(db, kube, fake_slack, features=StaticFeatures(0.4), clock=clock)
    clock.now = T0 + 61
    records = await resumed(again, clock.now)
    assert [(r.action, r.status) for r in records] == [("verify", "ran")]
    assert replicas(kube) == 3


async def test_without_fresh_data_the_unverified_change_is_rolled_back_after_a_grace(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """No fresh data after the restart: wait one more wait past due, then undo the change."""
    db = tmp_path / "audit.sqlite3"
    clock = Clock()
    await stop_mid_verify(
        replica(
            db, kube, fake_slack, features=StaticFeatures(0.4), clock=clock, sleep=asyncio.Event()
        )
    )
    blind = replica(db, kube, fake_slack, features=StaticFeatures(None, fresh=False), clock=clock)
    assert await resumed(blind, T0 + 61) == []
    assert await resumed(blind, T0 + 119) == []
    records = await resumed(blind, T0 + 121)
    assert [(r.action, r.status, r.guard) for r in records[:2]] == [
        ("verify", "failed", "stale"),
        ("kubernetes.scale", "rolled_back", ""),
    ]
    assert replicas(kube) == 2
