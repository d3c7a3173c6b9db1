"""An approval is checked again when it is clicked: leader, incident still open, fresh data.

Up to the timeout may pass between asking and clicking. The stage runs on an in-memory audit
store; the scale goes through the real Kubernetes client against the fake API server, with
KEDA over the Deployment so that a restore on resolve is on file.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from tests.fakes.kube import FakeKube
from tests.integration.test_playbooks_kube_slack import book, env, seed_incident_pod
from tests.playbook_harness import StaticFeatures, handle, incident, resolved, stage
from tritonguard.clients.slack_socket import ButtonClick, SlackSocket
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.runtime.approvals import Approvals, hold_socket
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_stage import PlaybookStage

SCALE_WITH_APPROVAL = """
name: scale-with-approval
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: kubernetes.scale
    approval: required
    approvers: [U0ALICE001, S0ONCALL01]
    params: {add: 1}
"""

ALICE = "U0ALICE001"  # named in the playbook
BOB = "U0BOB00002"  # admitted as a member of S0ONCALL01


@dataclasses.dataclass
class World:
    """The stage, what the engine holds open, whether this replica leads, the data's freshness."""

    kube: FakeKube
    stage: PlaybookStage
    open: list[IncidentEvent]
    leader: list[str | None]
    features: StaticFeatures


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """Yield Deployment prod/triton (2 replicas) under KEDA (floor 2), and a stage over it."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        seed_incident_pod(server)
        server.add_scaled_object(
            "prod", "triton-so", "triton", min_replica_count=2, max_replica_count=8
        )
        features = StaticFeatures(back=True)
        open_now: list[IncidentEvent] = []
        leader: list[str | None] = [None]
        on = stage(
            [book(SCALE_WITH_APPROVAL)],
            AuditStore(),
            settings=GuardSettings(dry_run=False),
            env=env(server, None, features=features),
            open_incidents=lambda: list(open_now),
            leader_elsewhere=lambda: leader[0],
        )
        yield World(server, on, open_now, leader, features)


def floor(kube: FakeKube) -> object:
    """Return the ScaledObject's minReplicaCount."""
    so = kube.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None
    return so["spec"].get("minReplicaCount")


async def ask(w: World, event: IncidentEvent | None = None) -> str:
    """Open an incident (held open by the engine) and return its approval's id."""
    event = event or incident()
    w.open.append(event)
    [waiting] = await handle(w.stage, event)
    assert waiting.status == "awaiting_approval", waiting.reason
    return str(waiting.detail["approval_id"])


async def test_an_approve_after_the_incident_closed_or_on_stale_data_runs_nothing(
    world: World,
) -> None:
    """The click expires the approval, saying why; the workload is left as it is."""
    approval = await ask(world)
    world.open.clear()
    decided = await Approvals(world.stage, clock=lambda: 5030.0).decide(approval, "approve", ALICE)
    assert decided.outcome == "expired"
    [rec] = decided.records
    assert rec.status == "expired"
    assert "is no longer open" in rec.reason and rec.reason.startswith(f"approved by {ALICE}")
    assert world.stage.store.pending_approvals() == []

    approval = await ask(world, incident(pod="triton-5d9c7b-k8m2p", at=5040.0))
    world.features.fresh = False
    decided = await Approvals(world.stage, clock=lambda: 5050.0).decide(approval, "approve", ALICE)
    assert decided.outcome == "expired"
    assert "no fresh data" in decided.records[0].reason
    assert world.kube.replicas("Deployment", "prod", "triton") == 2
    assert floor(world.kube) == 2


async def test_a_replica_that_does_not_lead_settles_no_click(world: World) -> None:
    """A Reject there is refused too, and so is an Approve whose group lookup saw the lease go."""
    approval = await ask(world)
    world.leader[0] = "tritonguard-b holds the leader lease"
    rejected = await Approvals(world.stage, clock=lambda: 5030.0).decide(approval, "reject", ALICE)
    assert rejected.outcome == "refused"
    assert "only the leader decides" in rejected.records[0].reason
    world.leader[0] = None

    async def members(group: str) -> frozenset[str]:
        world.leader[0] = "tritonguard-b holds the leader lease"  # lost while Slack answered
        return frozenset({BOB})

    approvals = Approvals(world.stage, members=members, clock=lambda: 5030.0)
    approved = await approvals.decide(approval, "approve", BOB)
    assert approved.outcome == "refused"
    assert "only the leader decides" in approved.records[0].reason
    assert [p.approval_id for p in world.stage.store.pending_approvals()] == [approval]
    assert world.kube.replicas("Deployment", "prod", "triton") == 2


async def test_an_approval_handed_over_acts_for_the_local_incident_and_its_restore_runs(
    world: World,
) -> None:
    """Another replica's incident id still finds this replica's incident on the same subject.

    The approved scale's restore is filed under the local id, so the local resolution puts
    the floor back; and a second handed approval is dropped when the local incident resolves.
    """
    theirs = incident(at=5000.0)
    approval = await ask(world, theirs)
    ours = incident(at=5010.0, opened_at=5000.0)
    world.open[:] = [ours]
    decided = await Approvals(world.stage, clock=lambda: 5030.0).decide(approval, "approve", ALICE)
    assert decided.outcome == "approved"
    assert [r.status for r in await decided.all_records()] == ["approved", "ran"]
    assert floor(world.kube) == 3
    [restore] = await handle(world.stage, resolved(ours, at=5100.0))
    assert (restore.action, restore.status) == ("kubernetes.scaledobject_min", "ran")
    assert floor(world.kube) == 2

    later = incident(pod="triton-5d9c7b-k8m2p", at=5200.0)
    await ask(world, later)
    local = incident(pod="triton-5d9c7b-k8m2p", at=5215.0, opened_at=5200.0)
    world.open[:] = [local]
    [dropped] = await handle(world.stage, resolved(local, at=5300.0))
    assert (dropped.status, dropped.incident_id) == ("expired", later.incident_id)
    assert world.stage.store.pending_approvals() == []


class _Unanswered(SlackSocket):
    """A Socket Mode connection whose start never returns, as while Slack does not answer."""

    attempts = 0
    trying = False

    async def start(self) -> None:
        """Hang until cancelled, saying meanwhile that a connection is being tried."""
        self.attempts += 1
        self.trying = True
        try:
            await asyncio.Event().wait()
        finally:
            self.trying = False


async def test_hold_socket_gives_up_connecting_once_leadership_is_lost() -> None:
    """A start that keeps retrying is cut short so that leadership is asked again.

    Once the lease is lost, no connection is tried any more, and the loop keeps polling.
    """

    async def ignore(click: ButtonClick) -> None:
        return None

    socket = _Unanswered("xapp-test", ignore)
    leads = [True]
    task = asyncio.create_task(
        hold_socket(socket, lambda: leads[0], poll_s=0.01, start_timeout_s=0.05)
    )
    try:
        await asyncio.sleep(0.02)
        assert socket.trying
        leads[0] = False
        await asyncio.sleep(0.15)
        assert not socket.trying
        assert not task.done()
        tried = socket.attempts
        await asyncio.sleep(0.1)
        assert socket.attempts == tried
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
