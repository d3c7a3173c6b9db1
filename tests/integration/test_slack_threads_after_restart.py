"""After a restart the daemon goes on in the incident's existing Slack thread.

The playbook service is built as ``tritonguard run`` builds it, twice on one audit file (a
restart), with slack_sdk's real Web API client against the fake Slack and the real
Kubernetes client against the fake API server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests import playbook_harness, waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import CHANNEL, seed_triton_deployment, service_settings
from tests.integration.test_slack_approvals import Clock, service_of, settle
from tritonguard.settings import Settings

NOTIFY = """
name: notify
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: slack.post
"""
SCALE_THEN_VERIFY = """
name: scale-then-verify
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    params: {kind: Deployment, name: triton, add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
escalate:
  - action: slack.post
    params: {text: "scaling {{ model }} did not help"}
"""


@pytest.fixture
def kube(fake_kube: FakeKube) -> FakeKube:
    """Give the fake API server one Deployment of two replicas in ``prod``."""
    return seed_triton_deployment(fake_kube)


def settings(tmp_path: Path, slack: FakeSlack, kube: FakeKube) -> Settings:
    """Daemon settings: a notification and a verifying scale, an audit file, Slack, the API."""
    # Files load in name order: the thread opens before the scale's run begins its wait.
    books = {"a-notify.yaml": NOTIFY, "b-scale.yaml": SCALE_THEN_VERIFY}
    return service_settings(tmp_path, slack, kube, books)


async def test_a_resumed_verification_reports_in_the_thread_the_first_run_opened(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """A verification stopped by a restart is judged by the next run, in the same thread.

    Without fresh data the next run rolls the scale back and escalates; both records are
    replies in the thread the first run opened (no second root), numbered after the first
    run's messages, and the root keeps the evidence it was posted with.
    """
    clock = Clock()
    s = settings(tmp_path, fake_slack, kube)
    first = service_of(s, clock)
    event = playbook_harness.incident("cpu_bottleneck", at=clock.now)
    first.after_evaluation([event], clock.now)
    await waiting.wait_for(first.store.pending_verifications, 2.0, poll_s=0.01)
    for task in first.stage.in_flight():
        task.cancel()  # SIGTERM mid-verify
    await asyncio.gather(*first.stage.in_flight(), return_exceptions=True)
    assert first.threads is not None
    await first.threads.worker.drain()
    await first.close()
    [root] = fake_slack.roots_in(CHANNEL)
    before = len(fake_slack.thread_of(root))
    assert kube.replicas("Deployment", "prod", "triton") == 3

    clock.now += 125  # past the verification's due time and its grace without fresh data
    second = service_of(s, clock)
    try:
        second.after_evaluation([], clock.now)
        await settle(second)
        assert kube.replicas("Deployment", "prod", "triton") == 2
        assert [r.text for r in fake_slack.roots_in(CHANNEL)] == [root.text]
        later = fake_slack.thread_of(root)[before:]
        said = "\n".join(m.text for m in later)
        assert "did not help" in said
        assert "verify" in said
        assert any(b.get("block_id") == "evidence" for b in root.blocks)
        assert second.threads is not None
        keys = [r["key"] for r in second.threads.outbox.rows(event.incident_id)]
        assert len(keys) == len(set(keys))
        assert keys == sorted(keys)
        # A root update overtaken by a newer one is not sent (superseded); nothing is lost.
        assert {r["state"] for r in second.threads.outbox.rows()} <= {"sent", "superseded"}
    finally:
        await second.close()
