"""Slack rate-limiting or down during an incident: the remediation runs, the failure is audited.

The playbook posts to Slack first and then scales, like the shipped cpu_bottleneck one. The
real Slack client talks to the fake Slack Web API, the real Kubernetes client to the fake
API server. A 429 is waited out when Slack asks for a short wait and given up when it asks
for longer than a notification may hold a remediation; an outage fails the post. Either way
the scale runs, is not undone, and the audit trail says in one line why the post failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.playbook_harness import StaticFeatures, handle, incident, stage
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
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        yield server


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
    """429 with Retry-After 1 s: the post goes out after the wait, then the scale runs."""
    fake_slack.rate_limit_next(1, retry_after_s=1)
    records = await handle(acting(kube, fake_slack), incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [("slack.post", "ran", "step"), ("kubernetes.scale", "ran", "step")]
    assert [c.http_status for c in fake_slack.calls] == [429, 200]
    assert len(fake_slack.messages_in(CHANNEL)) == 1
    assert replicas(kube) == 3


async def test_a_long_rate_limit_does_not_hold_up_the_remediation(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """429 asking for 30 s: the post gives up at once and says why; the scale runs now.

    Waiting as asked would hold the scale behind the notification for half a minute, twice
    over with the retries; a notification is never worth delaying the fix.
    """
    fake_slack.rate_limit_next(5, retry_after_s=30)
    started = time.monotonic()
    records = await asyncio.wait_for(
        handle(acting(kube, fake_slack), incident(at=5000.0, opened_at=4900.0)), 20.0
    )
    took = time.monotonic() - started
    assert steps(records) == [
        ("slack.post", "failed", "step"),
        ("kubernetes.scale", "ran", "step"),
    ]
    reason = records[0].reason
    assert "rate limited" in reason and "Retry-After 30 s" in reason, reason
    assert "\n" not in reason
    assert replicas(kube) == 3
    assert took < 15.0  # bounded by the notifier's wait budget, far below 30 s
    assert fake_slack.messages_in(CHANNEL) == []


async def test_slack_down_during_the_incident_fails_the_post_and_the_scale_stays(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Slack is unreachable: the post fails in one line, the scale runs and is not undone."""
    await fake_slack.stop()
    records = await handle(acting(kube, fake_slack), incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [
        ("slack.post", "failed", "step"),
        ("kubernetes.scale", "ran", "step"),
    ]
    reason = records[0].reason
    assert reason.startswith("slack: chat.postMessage to #tritonguard-alerts: cannot reach Slack")
    assert "\n" not in reason
    assert replicas(kube) == 3


async def test_slack_down_at_escalation_still_rolls_back_and_records_the_failed_post(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """The fix did not help and Slack is down: the rollback happens, the escalation fails."""
    on = acting(kube, fake_slack, SCALE_VERIFY_ESCALATE, value=0.95)
    await fake_slack.stop()
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert steps(records) == [
        ("kubernetes.scale", "ran", "step"),
        ("verify", "failed", "step"),
        ("kubernetes.scale", "rolled_back", "rollback"),
        ("slack.post", "failed", "escalate"),
    ]
    assert "cannot reach Slack" in records[-1].reason and "\n" not in records[-1].reason
    assert replicas(kube) == 2
