"""Slack rate-limiting or down during an incident: the remediation runs, the thread waits.

The playbook posts to Slack first and then scales, like the shipped cpu_bottleneck one. The
real Slack client talks to the fake Slack Web API, the real Kubernetes client to the fake
API server. ``slack.post`` hands its message to the persisted outbox and never waits for
Slack, so the scale runs at once whatever Slack does; the outbox waits out a 429 as long as
Retry-After asks and retries through an outage, and the thread arrives once Slack answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import seed_triton_deployment
from tests.playbook_harness import StaticFeatures, handle, incident, stage
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

CHANNEL = "#tritonguard-alerts"
POST_THEN_SCALE = """
name: tell-then-scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m}
steps:
  - action: slack.post
  - action: kubernetes.scale
    params: {name: triton, add: 1}
"""
SCALE_VERIFY_ESCALATE = """
name: scale-verify-escalate
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
escalate:
  - action: slack.post
    params: {text: "scaling {{ model }} did not help; rolled back"}
"""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with one Deployment of two replicas."""
    async with FakeKube() as server:
        yield seed_triton_deployment(server)


def acting(
    kube: FakeKube, slack: FakeSlack, text: str = POST_THEN_SCALE, value: float | None = None
) -> PlaybookStage:
    """Return the playbook stage with the real clients against the fakes, as the daemon builds it."""

    async def no_wait(seconds: float) -> None:
        return None

    env = ExecutorEnv(
        kube=KubernetesClient.for_host(kube.url),
        slack=SlackNotifier(slack.token, base_url=slack.base_url),
        slack_channel=CHANNEL,
        features=StaticFeatures(value),
        sleep=no_wait,
        clock=lambda: 5000.0,
    )
    books = load_playbooks_text(text, "inline.yaml", catalog())
    return stage(books, AuditStore(), settings=GuardSettings(dry_run=False), env=env)


def replicas(kube: FakeKube) -> int:
    """Return the Deployment's replica count."""
    return kube.replicas("Deployment", "prod", "triton")


def steps(records: list[ActionRecord]) -> list[tuple[str, str, str]]:
    """Return (action, status, phase) of each record."""
    return [(r.action, r.status, r.phase) for r in records]


async def test_a_short_rate_limit_is_waited_out_and_the_scale_follows(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """429 with Retry-After 1 s: the scale runs at once; the root goes out after the wait."""
    fake_slack.rate_limit_next(1, retry_after_s=1)
    on = acting(kube, fake_slack)
    threads = attach(on, fake_slack, CHANNEL)
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [("slack.post", "ran", "step"), ("kubernetes.scale", "ran", "step")]
    assert replicas(kube) == 3
    started = time.monotonic()
    await threads.worker.drain()
    assert time.monotonic() - started >= 0.9, "the outbox waited as long as Slack asked"
    assert fake_slack.calls[0].http_status == 429
    assert len(fake_slack.roots_in(CHANNEL)) == 1
    await threads.close()


async def test_a_long_rate_limit_does_not_hold_up_the_remediation(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """429 asking for 30 s: the scale runs now; the outbox holds the message for the 30 s.

    A notification is never worth delaying the fix, and a message is never dropped for being
    rate limited: it waits in the outbox until Slack takes it.
    """
    fake_slack.rate_limit_next(5, retry_after_s=30)
    on = acting(kube, fake_slack)
    threads = attach(on, fake_slack, CHANNEL)
    started = time.monotonic()
    records = await asyncio.wait_for(handle(on, incident(at=5000.0, opened_at=4900.0)), 5.0)
    assert time.monotonic() - started < 2.0
    assert steps(records) == [("slack.post", "ran", "step"), ("kubernetes.scale", "ran", "step")]
    assert replicas(kube) == 3
    await threads.worker.deliver_due()
    assert threads.worker.paused_until - time.time() > 25.0
    assert threads.outbox.counts().get("pending", 0) >= 1
    assert fake_slack.messages_in(CHANNEL) == []
    await threads.close()


async def test_slack_down_during_the_incident_the_scale_stays_and_the_thread_follows(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Slack is unreachable: the scale runs and stays; the thread arrives when Slack is back."""
    await fake_slack.stop()
    on = acting(kube, fake_slack)
    threads = attach(on, fake_slack, CHANNEL)
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [("slack.post", "ran", "step"), ("kubernetes.scale", "ran", "step")]
    assert replicas(kube) == 3
    await threads.worker.deliver_due()
    rows = threads.outbox.rows()
    assert rows[0]["attempts"] == 1 and "cannot reach Slack" in rows[0]["last_error"]
    await fake_slack.start()
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert [m.text.split(":")[0] for m in fake_slack.thread_of(root)] == ["done"]
    await threads.close()


async def test_slack_down_at_escalation_still_rolls_back_and_the_escalation_arrives_later(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """The fix did not help and Slack is down: the rollback happens; the escalation waits."""
    on = acting(kube, fake_slack, SCALE_VERIFY_ESCALATE, value=0.95)
    threads = attach(on, fake_slack, CHANNEL)
    await fake_slack.stop()
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [
        ("kubernetes.scale", "ran", "step"),
        ("verify", "failed", "step"),
        ("kubernetes.scale", "rolled_back", "rollback"),
        ("slack.post", "ran", "escalate"),
    ]
    assert replicas(kube) == 2
    await fake_slack.start()
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert "did not help; rolled back" in str(root.blocks)
    done = next(b for b in root.blocks if b.get("block_id") == "done")["text"]["text"]
    assert "rolled back" not in done or "rollback:" in done
    await threads.close()
