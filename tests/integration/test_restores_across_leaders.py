"""A restore on resolve survives a leader change: the next leader puts the value back.

Two replicas elect a leader on the fake Kubernetes API's Lease with the real client
(``leader_pair``'s, as in ``test_leader_election``). The leader raises a KEDA ScaledObject's
floor (a change restored when the incident resolves) and dies while verifying it; the next
leader judges the verification and, when its own incident on the subject resolves, restores
the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import playbook_harness, waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.leader_pair import (
    LEASE,
    NS,
    WALL,
    Replica,
    elect,
    lease_api,
    opened,
    replica_pair,
    service_pair,
)
from tests.integration.test_playbooks_kube_slack import seed_incident_pod
from tests.integration.test_slack_approvals import (
    ALICE,
    Clock,
    by_status,
    click,
    connect,
    root,
    settle,
    still_open,
    wait_for,
)
from tests.playbook_harness import StaticFeatures, resolved
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.run_handover import VERIFICATIONS_ANNOTATION
from tritonguard.core.slack_message import APPROVE_ACTION

# Reaching the verify step makes the process's first Kubernetes calls, and the client loads
# its API modules on first use (about 3 s on a loaded 2-core machine): a bound, not a pause.
VERIFYING_S = 15.0
KEDA_SCALE = """
name: scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m}
steps:
  - action: kubernetes.scale
    params: {add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
escalate:
  - action: slack.post
"""


@pytest.fixture
async def api() -> AsyncIterator[FakeKube]:
    """Yield a fake API server whose Triton Deployment's floor is KEDA's (minReplicaCount 2)."""
    async with lease_api() as server:
        seed_incident_pod(server)
        server.add_scaled_object("prod", "triton-so", "triton", min_replica_count=2)
        yield server


def floor(api: FakeKube) -> int:
    """Return the ScaledObject's minReplicaCount."""
    so = api.get_object("ScaledObject", "prod", "triton-so")
    assert so is not None
    return int(so["spec"]["minReplicaCount"])


@contextlib.asynccontextmanager
async def published_raise(
    api: FakeKube, slack: FakeSlack, held: asyncio.Event
) -> AsyncIterator[tuple[Replica, Replica, IncidentEvent]]:
    """Yield a, b and a's incident: a leads, raised the floor and published its held verify.

    a's own data says the fix helped; b holds the published copy, its undo flagged to
    restore on resolve.
    """
    with replica_pair(
        api, slack, playbook=KEDA_SCALE, held=held, features_a=StaticFeatures(0.4)
    ) as (a, b):
        assert await a.elector.step()
        theirs = opened()
        a.playbooks.step([theirs], WALL)
        await waiting.wait_for(lambda: a.playbooks.executor.verifying, VERIFYING_S, poll_s=0.01)
        assert await a.elector.step()
        assert not await b.elector.step()
        [copy] = b.store.pending_verifications()
        assert [u.on_resolve for u in b.store.undos_by_id(copy.undo_ids)] == [True]
        yield a, b, theirs


async def test_the_next_leader_restores_a_floor_the_dead_leader_raised(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """The handed verification carries its undo's restore on resolve, and the resolve runs it.

    The Lease row says which undo restores on resolve; the next leader's verdict keeps the
    change (the fix helped), and the resolution of its own incident (its own id, the same
    subject, cause and opening) puts minReplicaCount back to 2, as the old leader would have.
    """
    held = asyncio.Event()
    with replica_pair(
        api, fake_slack, playbook=KEDA_SCALE, held=held, features_b=StaticFeatures(0.4)
    ) as (a, b):
        await elect(a.elector, b.elector)
        a.playbooks.step([opened()], WALL)
        await waiting.wait_for(lambda: a.playbooks.executor.verifying, VERIFYING_S, poll_s=0.01)
        assert floor(api) == 3
        assert await a.elector.step()  # publishes the verification with its undo
        lease = api.get_object("Lease", NS, LEASE)
        assert lease is not None
        [row] = json.loads(lease["metadata"]["annotations"][VERIFICATIONS_ANNOTATION])[
            "verifications"
        ]
        assert [u[0] for u in row["undos"]] == ["kubernetes.scaledobject_min"]
        assert row["on_resolve"] == [0]
        assert not await b.elector.step()
        # a dies mid-verify; after a whole lease unrenewed, b leads.
        for task in a.playbooks.in_flight():
            task.cancel()
        await asyncio.gather(*a.playbooks.in_flight(), return_exceptions=True)
        b.clock.now += 16
        assert await b.elector.step()
        records = [r for rs in (await b.playbooks.run_step([], WALL + 61)).values() for r in rs]
        assert [(r.action, r.status) for r in records] == [("verify", "ran")]
        assert floor(api) == 3  # the fix helped: kept while the incident lasts

        mine = dataclasses.replace(opened(), at=WALL + 62)  # b's own id for the incident
        await b.playbooks.run_step([mine], WALL + 62)
        done = await b.playbooks.run_step([resolved(mine, at=WALL + 120)], WALL + 120)
        restores = [r for r in done.get(mine.incident_id, []) if r.phase == "restore"]
        assert [(r.action, r.status) for r in restores] == [
            ("kubernetes.scaledobject_min", "ran")
        ], [(r.action, r.status, r.reason) for r in done.get(mine.incident_id, [])]
        assert floor(api) == 2


async def test_a_follower_leaves_the_restore_to_the_leader_that_judged_the_change(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """Once the leader's verdict is in, the follower drops its copy of the undo, flag and all.

    The follower's resolution then restores nothing (only the leader acts) and no raise
    looks held on the follower; the leader's own resolution puts the floor back.
    """
    held = asyncio.Event()
    async with published_raise(api, fake_slack, held) as (a, b, theirs):
        held.set()
        await a.playbooks.settle()
        assert await a.elector.step()  # the verdict is in: no longer published
        assert not await b.elector.step()
        assert b.store.pending_verifications() == []
        assert b.store.live_undos_elsewhere("kubernetes.scaledobject_min", "") == []

        mine = dataclasses.replace(opened(), at=WALL + 62)
        await b.playbooks.run_step([mine], WALL + 62)
        done = await b.playbooks.run_step([resolved(mine, at=WALL + 120)], WALL + 120)
        assert [r for r in done.get(mine.incident_id, []) if r.phase == "restore"] == []
        assert floor(api) == 3
        done = await a.playbooks.run_step([resolved(theirs, at=WALL + 120)], WALL + 120)
        restores = [r for r in done.get(theirs.incident_id, []) if r.phase == "restore"]
        assert [(r.action, r.status) for r in restores] == [("kubernetes.scaledobject_min", "ran")]
        assert floor(api) == 2


async def test_a_follower_resolving_during_the_leaders_verify_changes_nothing(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """A follower's resolution before the leader's verdict records it and restores nothing.

    The follower holds the leader's undo (and its flag) while the verification is
    published; its own engine resolving the same incident must not put the floor back under
    the leader's verify. The floor stays raised until the leader's resolution restores it.
    """
    held = asyncio.Event()
    async with published_raise(api, fake_slack, held) as (a, b, theirs):
        mine = dataclasses.replace(opened(), at=WALL + 62)
        await b.playbooks.run_step([mine], WALL + 62)
        done = await b.playbooks.run_step([resolved(mine, at=WALL + 120)], WALL + 120)
        ran = [r for r in done.get(mine.incident_id, []) if r.phase == "restore"]
        assert [(r.status, r.guard) for r in ran] == [("skipped", "leader")]
        assert floor(api) == 3

        held.set()
        await a.playbooks.settle()
        assert floor(api) == 3
        done = await a.playbooks.run_step([resolved(theirs, at=WALL + 130)], WALL + 130)
        restores = [r for r in done.get(theirs.incident_id, []) if r.phase == "restore"]
        assert [(r.action, r.status) for r in restores] == [("kubernetes.scaledobject_min", "ran")]
        assert floor(api) == 2


RAISE_THEN_ASK = """
name: floor-then-approval
when: {causes: [cpu_bottleneck]}
guards:
  dry_run: false
  cooldown: 1h
  bounds: {replicas: {min: 1, max: 8}}
steps:
  - action: slack.post
  - action: kubernetes.scale
    params: {name: triton, add: 1}
  - action: kubernetes.scale
    approval: required
    approvers: [S0ONCALL01]
    params: {name: triton, add: 1}
"""


async def test_the_next_leader_restores_the_floors_of_an_approved_run(
    tmp_path: Path, fake_slack: FakeSlack, api: FakeKube
) -> None:
    """The step before an approval raised a floor; after a leader change both floors go back.

    The old leader raises minReplicaCount 2 → 3 and asks to raise it to 4; the approval is
    handed over with the first raise's undo, flagged to restore on resolve. The next leader
    runs the approved raise and, when its own incident resolves, restores 4 → 3 → 2.
    """
    clock = Clock()
    async with service_pair(tmp_path, fake_slack, api, clock, playbook=RAISE_THEN_ASK) as (a, b):
        assert a.elector is not None and b.elector is not None
        events = {}
        for name, replica_ in (("a", a), ("b", b)):
            events[name] = playbook_harness.incident("cpu_bottleneck", at=clock.now)
            replica_.after_evaluation([events[name]], clock.now)
            await settle(replica_)
            still_open(replica_, events[name])
        assert floor(api) == 3
        assert await a.elector.step()  # publishes the approval with the raise's undo
        assert not await b.elector.step()
        [handed] = b.store.pending_approvals()
        assert [u.on_resolve for u in b.store.undos_by_id(handed.undo_ids)] == [True]
        await a.elector.release()
        assert await b.elector.step()
        await connect(b, fake_slack)
        clock.now += 60
        await click(fake_slack, root(fake_slack), APPROVE_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(b, "approved")))
        await settle(b)
        assert floor(api) == 4

        clock.now += 60
        b.after_evaluation([resolved(events["b"], at=clock.now)], clock.now)
        await settle(b)
        restores = [r for r in b.store.decisions() if r.phase == "restore"]
        assert [(r.action, r.params["min_replica_count"], r.status) for r in restores] == [
            ("kubernetes.scaledobject_min", 3, "ran"),
            ("kubernetes.scaledobject_min", 2, "ran"),
        ]
        assert floor(api) == 2
