"""A run's thread says what was done while its verify step still waits, not a minute later.

The playbook posts, scales and then verifies after a wait, as the shipped ones do. The
records of the post and the scale are reported as each is written, so the root reaches
Slack (slack_sdk against the fake Slack Web API) while the verify step waits, and already
names the scale; Kubernetes is the fake API server behind the real client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import seed_triton_deployment
from tests.playbook_harness import StaticFeatures, handle, incident, resolved, stage
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
POST_SCALE_VERIFY = """
name: post-scale-verify
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: slack.post
  - action: kubernetes.scale
    params: {name: triton, add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
"""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with one Deployment of two replicas."""
    async with FakeKube() as server:
        yield seed_triton_deployment(server)


class VerifyWait:
    """The executor's sleep: says when the verify step starts waiting, returns when released."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        """Wait for the test instead of ``seconds``."""
        self.waiting.set()
        await self.release.wait()


def acting(kube: FakeKube, slack: FakeSlack, wait: VerifyWait) -> PlaybookStage:
    """Return the stage with the real clients against the fakes and the verify wait held."""
    env = ExecutorEnv(
        kube=KubernetesClient.for_host(kube.url),
        slack=SlackNotifier(slack.token, base_url=slack.base_url),
        slack_channel=CHANNEL,
        features=StaticFeatures(0.3),
        sleep=wait,
        clock=lambda: 5000.0,
    )
    books = load_playbooks_text(POST_SCALE_VERIFY, "inline.yaml", catalog())
    return stage(books, AuditStore(), settings=GuardSettings(dry_run=False), env=env)


def steps(records: list[ActionRecord]) -> list[tuple[str, str]]:
    """Return (action, status) of each record."""
    return [(r.action, r.status) for r in records]


async def test_the_root_names_the_scale_while_the_verify_step_waits(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Root and scale are in Slack before the verify wait ends; the verdict follows it.

    Before, a run's records were reported only once the whole run was over, so the on-call
    saw nothing until the verify wait (60 s in the shipped playbooks) had passed, and the
    first root said no automatic change had been made.
    """
    wait = VerifyWait()
    on = acting(kube, fake_slack, wait)
    threads = attach(on, fake_slack, CHANNEL)
    run = asyncio.create_task(handle(on, incident(at=5000.0, opened_at=4900.0)))
    await asyncio.wait_for(wait.waiting.wait(), 10.0)
    assert kube.replicas("Deployment", "prod", "triton") == 3
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    shown = root.text + str(root.blocks)
    assert "kubernetes.scale" in shown, shown
    assert "No automatic change" not in shown
    assert "`verify`" not in shown, "the verdict cannot be known yet"
    assert not run.done()

    wait.release.set()
    records = await asyncio.wait_for(run, 10.0)
    assert steps(records) == [
        ("slack.post", "ran"),
        ("kubernetes.scale", "ran"),
        ("verify", "ran"),
    ]
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert "`verify`" in str(root.blocks)
    replies = fake_slack.thread_of(root)
    assert [m.text.split(":")[0] for m in replies] == ["done", "verified"]
    await threads.close()


async def test_a_verdict_after_the_incident_resolved_still_reaches_its_thread(
    kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """The incident resolves while the verify step waits; its verdict is still told after it."""
    wait = VerifyWait()
    on = acting(kube, fake_slack, wait)
    threads = attach(on, fake_slack, CHANNEL)
    opened = incident(at=5000.0, opened_at=4900.0)
    run = asyncio.create_task(handle(on, opened))
    await asyncio.wait_for(wait.waiting.wait(), 10.0)
    on.step([resolved(opened, at=5030.0)], 5030.0)
    await threads.worker.drain()
    wait.release.set()
    await asyncio.wait_for(run, 10.0)
    await on.settle()
    await threads.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    replies = [m.text.split(":")[0] for m in fake_slack.thread_of(root)]
    assert "verified" in replies, replies
    await threads.close()
