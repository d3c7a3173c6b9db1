"""Approvals end to end: buttons in the thread, clicks over Socket Mode, the step run or dropped.

The daemon's playbook service is built as ``tritonguard run`` builds it, on an audit file,
with slack_sdk's real Web API and aiohttp Socket Mode clients against the fake Slack and the
real Kubernetes client against the fake API server. The clock is the test's, so expiry takes
no wall time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import playbook_harness, waiting
from tests.fakes.fake_slack import FakeSlack, StoredMessage
from tests.fakes.kube import FakeKube
from tests.integration.playbook_fakes import CHANNEL, seed_triton_deployment, service_settings
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.core.slack_message import APPROVE_ACTION, REJECT_ACTION
from tritonguard.runtime.approvals import hold_socket
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.settings import Settings

ALICE = "U0ALICE001"  # in S0ONCALL01, the fake workspace's on-call group
EVE = "U0EVE00003"  # in no group

SCALE_WITH_APPROVAL = """
name: cpu-scale-with-approval
when: {causes: [cpu_bottleneck]}
guards:
  dry_run: false
  cooldown: 1h
  bounds: {replicas: {min: 1, max: 5}}
steps:
  - action: slack.post
  - action: kubernetes.scale
    approval: required
    approvers: [S0ONCALL01]
    params: {kind: Deployment, name: triton, add: 1}
  - action: slack.post
    params: {text: "added a replica to {{ model }}"}
"""


@dataclass
class Clock:
    """The service's clock, moved by the test."""

    now: float = 5000.0

    def __call__(self) -> float:
        """Return the test's time."""
        return self.now


@pytest.fixture
def kube(fake_kube: FakeKube) -> FakeKube:
    """Give the fake API server one Deployment of two replicas in ``prod``."""
    return seed_triton_deployment(fake_kube)


def settings(tmp_path: Path, slack: FakeSlack, kube: FakeKube) -> Settings:
    """Daemon settings: the test playbook, an audit file, Slack with an app token, the fake API."""
    return service_settings(
        tmp_path,
        slack,
        kube,
        {"scale.yaml": SCALE_WITH_APPROVAL},
        app_token=slack.app_token,
        approvals={"timeout_s": 600},
    )


def service_of(s: Settings, clock: Clock) -> PlaybookService:
    """Build the service as the daemon does; fresh data is not what these tests are about."""
    guards = GuardSettings(dry_run=False, require_fresh_data=False)
    return build_service(s, Engine(), clock=clock, guard_settings=guards)


async def wait_for(predicate: Callable[[], object], timeout_s: float = 5.0) -> float:
    """Poll ``predicate`` until it holds: 5 s unless told, as every approval test here waits."""
    return await waiting.wait_for(predicate, timeout_s)


async def settle(service: PlaybookService) -> None:
    """Let the playbook work finish and Slack receive every message it made."""
    await service.stage.settle()
    assert service.threads is not None
    await service.threads.worker.drain()


async def connect(service: PlaybookService, slack: FakeSlack) -> None:
    """Open the service's Socket Mode connection to the fake Slack."""
    assert service.socket is not None
    await service.socket.start()
    await slack.wait_connected()


def still_open(service: PlaybookService, *events: IncidentEvent) -> None:
    """Make ``events`` the engine's open incidents, as an approval checks at the click."""
    service.stage.open_incidents = lambda: list(events)


async def ask(service: PlaybookService, clock: Clock) -> IncidentEvent:
    """Open an incident whose playbook posts, then waits for approval of the scale."""
    event = playbook_harness.incident("cpu_bottleneck", at=clock.now)
    service.after_evaluation([event], clock.now)
    await settle(service)
    still_open(service, event)
    return event


def root(slack: FakeSlack) -> StoredMessage:
    """Return the one incident root in the channel."""
    roots = slack.roots_in(CHANNEL)
    assert len(roots) == 1, [r.text for r in roots]
    return roots[0]


def buttons(message: StoredMessage) -> list[str]:
    """Return the action ids of a message's buttons."""
    return [
        el["action_id"]
        for b in message.blocks
        if b.get("type") == "actions"
        for el in b.get("elements", [])
    ]


def replies(slack: FakeSlack) -> str:
    """Return the text of every reply in the incident's thread."""
    return "\n".join(m.text for m in slack.thread_of(root(slack)))


def by_status(service: PlaybookService, status: str) -> list[ActionRecord]:
    """Return the audit trail's records with ``status``."""
    return [r for r in service.store.decisions() if r.status == status]


async def click(slack: FakeSlack, message: StoredMessage, action: str, user: str) -> None:
    """Click a button as ``user`` and require the daemon's acknowledgement."""
    assert await slack.click(message, action, user), "the envelope was not acknowledged"


async def test_approve_runs_the_step_and_the_rest_of_its_run(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """An on-call member's Approve runs the waiting scale, then the step after it.

    Until then the Deployment keeps its replicas and the root carries Approve and Reject;
    afterwards the buttons are gone, the thread says who approved, and the audit trail has
    who decided and when.
    """
    clock = Clock()
    service = service_of(settings(tmp_path, fake_slack, kube), clock)
    try:
        await connect(service, fake_slack)
        await ask(service, clock)
        assert kube.replicas("Deployment", "prod", "triton") == 2
        [waiting] = by_status(service, "awaiting_approval")
        assert waiting.action == "kubernetes.scale"
        assert waiting.detail["approvers"] == ["S0ONCALL01"]
        message = root(fake_slack)
        assert buttons(message) == [APPROVE_ACTION, REJECT_ACTION]
        asked = (
            "(cpu-scale-with-approval): triton +1 replicas\nWho may decide: <!subteam^S0ONCALL01>"
        )
        assert asked in replies(fake_slack)

        clock.now += 30
        await click(fake_slack, message, APPROVE_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(service, "approved")))
        await settle(service)

        assert kube.replicas("Deployment", "prod", "triton") == 3
        [approved] = by_status(service, "approved")
        assert approved.detail["decided_by"] == ALICE
        assert approved.at == 5030.0
        ran = [r.action for r in by_status(service, "ran")]
        assert ran == ["slack.post", "kubernetes.scale", "slack.post"]
        assert buttons(root(fake_slack)) == []
        assert f"Approved* by <@{ALICE}>" in replies(fake_slack)
        assert "added a replica to resnet" in replies(fake_slack)
    finally:
        await service.close()


async def test_reject_drops_the_step_and_the_rest_of_its_run(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """Reject drops the scale and the step after it; nothing changes, and who said no is kept."""
    clock = Clock()
    service = service_of(settings(tmp_path, fake_slack, kube), clock)
    try:
        await connect(service, fake_slack)
        await ask(service, clock)
        await click(fake_slack, root(fake_slack), REJECT_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(service, "rejected")))
        await settle(service)

        assert kube.replicas("Deployment", "prod", "triton") == 2
        [rejected] = by_status(service, "rejected")
        assert rejected.detail["decided_by"] == ALICE
        assert "the step and the 1 after it (slack.post) are dropped" in rejected.reason
        assert [r.action for r in by_status(service, "ran")] == ["slack.post"]
        assert buttons(root(fake_slack)) == []
        assert f"Rejected* by <@{ALICE}>" in replies(fake_slack)
    finally:
        await service.close()


async def test_expiry_drops_the_step_and_a_late_click_changes_nothing(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """Nobody decides within the timeout: the next evaluation expires it, recorded as such.

    The thread says it expired, and the root and the request's reply lose their buttons (the
    reply is updated in place); a click on the reply as a client still showing it had it is
    acknowledged and changes nothing.
    """
    clock = Clock()
    service = service_of(settings(tmp_path, fake_slack, kube), clock)
    try:
        await connect(service, fake_slack)
        await ask(service, clock)
        [shown] = [m for m in fake_slack.thread_of(root(fake_slack)) if buttons(m)]
        request = dataclasses.replace(shown, blocks=list(shown.blocks))
        clock.now += 599
        service.after_evaluation([], clock.now)
        assert not by_status(service, "expired")
        clock.now += 1
        service.after_evaluation([], clock.now)
        await settle(service)

        [expired] = by_status(service, "expired")
        assert expired.at == 5600.0
        assert expired.reason.startswith("nobody decided within 600s")
        assert buttons(root(fake_slack)) == []
        assert "Expired" in replies(fake_slack)
        assert not [m for m in fake_slack.thread_of(root(fake_slack)) if buttons(m)]
        assert "Approval needed" in shown.text
        await click(fake_slack, request, APPROVE_ACTION, ALICE)
        await asyncio.sleep(0.2)
        await settle(service)
        assert kube.replicas("Deployment", "prod", "triton") == 2
        assert not by_status(service, "approved")
    finally:
        await service.close()


async def test_an_approver_not_allowed_is_refused_and_recorded(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """Someone outside the approvers' group cannot approve: recorded, and the step still waits.

    Membership is asked of Slack (``usergroups.users.list``); a member then approves.
    """
    clock = Clock()
    service = service_of(settings(tmp_path, fake_slack, kube), clock)
    try:
        await connect(service, fake_slack)
        await ask(service, clock)
        message = root(fake_slack)
        await click(fake_slack, message, APPROVE_ACTION, EVE)
        await wait_for(lambda: any(r.guard == "approver" for r in service.store.decisions()))
        [refused] = [r for r in service.store.decisions() if r.guard == "approver"]
        assert refused.status == "awaiting_approval"
        assert refused.detail["refused"] == EVE
        assert f"{EVE} is not among the approvers (S0ONCALL01)" in refused.reason
        assert any(c.method == "usergroups.users.list" for c in fake_slack.calls)
        assert kube.replicas("Deployment", "prod", "triton") == 2
        assert buttons(root(fake_slack)) == [APPROVE_ACTION, REJECT_ACTION]

        await click(fake_slack, message, APPROVE_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(service, "approved")))
        await settle(service)
        assert kube.replicas("Deployment", "prod", "triton") == 3
    finally:
        await service.close()


async def test_a_pending_approval_survives_a_restart(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """A daemon restarted on the same audit file still honours the button, then the deadline.

    The first approval is approved after the restart and its step runs. The thread is the one
    the first run opened: the root keeps its evidence and loses its buttons, the request's
    reply too, and the decision and the steps after it are replies there. A second incident's
    approval, left alone, expires by its original deadline, not one restarted with the daemon.
    """
    clock = Clock()
    s = settings(tmp_path, fake_slack, kube)
    first = service_of(s, clock)
    asked = await ask(first, clock)
    other = playbook_harness.incident("cpu_bottleneck", pod="triton-5d9c7b-k8k2z", at=clock.now)
    first.after_evaluation([other], clock.now)
    await settle(first)
    assert len(by_status(first, "awaiting_approval")) == 2
    await first.close()

    clock.now += 300
    second = service_of(s, clock)
    still_open(second, asked, other)
    try:
        await connect(second, fake_slack)
        first_root = fake_slack.roots_in(CHANNEL)[0]
        await click(fake_slack, first_root, APPROVE_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(second, "approved")))
        await settle(second)
        assert kube.replicas("Deployment", "prod", "triton") == 3
        first_root = fake_slack.roots_in(CHANNEL)[0]
        assert len(fake_slack.roots_in(CHANNEL)) == 2
        assert buttons(first_root) == []
        assert [b["block_id"] for b in first_root.blocks if b.get("block_id") == "evidence"]
        assert f"`kubernetes.scale` approved by <@{ALICE}>" in str(first_root.blocks)
        assert "waits for approval" not in str(first_root.blocks)
        thread = fake_slack.thread_of(first_root)
        assert not [m for m in thread if buttons(m)]
        said = "\n".join(m.text for m in thread)
        assert f"Approved* by <@{ALICE}>" in said
        assert "added a replica to resnet" in said

        clock.now += 299
        second.after_evaluation([], clock.now)
        assert not by_status(second, "expired")
        clock.now += 1
        second.after_evaluation([], clock.now)
        [expired] = by_status(second, "expired")
        assert expired.incident_id == other.incident_id
        assert expired.at == 5600.0
    finally:
        await second.close()


async def test_only_the_replica_that_may_act_holds_the_socket(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """Slack gives a click to any open connection, so a replica that does not lead closes its own.

    The service's background task connects while the replica may act and disconnects when
    another holds the lease.
    """
    service = service_of(settings(tmp_path, fake_slack, kube), Clock())
    leads = [True]
    assert service.socket is not None
    task = asyncio.create_task(hold_socket(service.socket, lambda: leads[0], poll_s=0.02))
    try:
        await fake_slack.wait_connected()
        leads[0] = False
        await wait_for(lambda: not fake_slack.sockets)
        assert service.socket.client is None
        leads[0] = True
        await fake_slack.wait_connected()
        assert "slack-approvals" in service.background()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await service.close()
