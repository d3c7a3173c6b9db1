"""Two daemon replicas electing a leader on the fake Kubernetes API with the real client.

The replicas are ``leader_pair``'s: the real parts, wired as ``build_service`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.leader_pair import (
    LEASE,
    NS,
    SCALE,
    WALL,
    Replica,
    elect,
    lease_api,
    opened,
    replica_pair,
)
from tests.playbook_harness import StaticFeatures, handle
from tests.slack_delivery import attach
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.core.run_handover import ANNOTATION, VERIFICATIONS_ANNOTATION


@pytest.fixture
async def api() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with the daemon's namespace and a Triton Deployment."""
    async with lease_api() as server:
        yield server


@pytest.fixture
async def pair(api: FakeKube, fake_slack: FakeSlack) -> AsyncIterator[tuple[Replica, Replica]]:
    """Yield replicas a and b; a has taken the lease first."""
    with replica_pair(api, fake_slack) as (a, b):
        await elect(a.elector, b.elector)
        yield a, b


def replicas_of_triton(api: FakeKube) -> int:
    """Return the Triton Deployment's spec.replicas."""
    deployment = api.get_object("Deployment", "prod", "triton")
    assert deployment is not None
    return int(deployment["spec"]["replicas"])


async def test_only_the_leader_acts_and_the_follower_audits_why(
    pair: tuple[Replica, Replica], api: FakeKube, fake_slack: FakeSlack
) -> None:
    """Both replicas diagnose the same incident; only the lease holder scales and posts."""
    a, b = pair
    threads = [attach(a.playbooks, fake_slack), attach(b.playbooks, fake_slack)]
    ran = await handle(a.playbooks, opened())
    skipped = await handle(b.playbooks, opened())
    for t in threads:
        await t.worker.drain()
        await t.close()
    assert [(r.action, r.status) for r in ran] == [
        ("kubernetes.scale", "ran"),
        ("slack.post", "ran"),
    ]
    assert [(r.status, r.guard) for r in skipped] == [("skipped", "leader")]
    assert "replica tritonguard-a holds the leader lease" in skipped[0].reason
    assert replicas_of_triton(api) == 3
    assert len(fake_slack.messages_in("#tritonguard-alerts")) == 1
    lease = api.get_object("Lease", NS, LEASE)
    assert lease is not None and lease["spec"]["holderIdentity"] == "tritonguard-a"


async def test_takeover_inherits_the_cooldown_so_the_scale_is_not_repeated(
    pair: tuple[Replica, Replica], api: FakeKube, fake_slack: FakeSlack
) -> None:
    """The leader scales and then dies; the next leader sees the run and its cooldown holds."""
    a, b = pair
    threads = [attach(a.playbooks, fake_slack), attach(b.playbooks, fake_slack)]
    await handle(a.playbooks, opened())
    assert await a.elector.step()  # the renewal publishes the run
    lease = api.get_object("Lease", NS, LEASE)
    assert lease is not None and "scale-out" in lease["metadata"]["annotations"][ANNOTATION]
    assert not await b.elector.step()  # the follower adopts it while a still leads
    assert b.elector.adopted == 1
    # a stops renewing (the pod died); after a whole lease duration unchanged, b takes over.
    b.clock.now += 16
    assert await b.elector.step()
    assert b.elector.leader_elsewhere() is None
    records = await handle(b.playbooks, opened())
    assert [(r.status, r.guard) for r in records] == [("skipped", "cooldown")]
    assert replicas_of_triton(api) == 3  # scaled once, not twice
    for t in threads:
        await t.worker.drain()
        await t.close()
    assert len(fake_slack.messages_in("#tritonguard-alerts")) == 1
    # a comes back: its deadline passed, the lease is b's, and a does not act.
    a.clock.now += 16
    assert not await a.elector.step()
    assert a.elector.leader_elsewhere() == "replica tritonguard-b holds the leader lease"


async def test_a_leader_that_cannot_renew_stops_acting_before_anyone_may_take_over(
    pair: tuple[Replica, Replica], api: FakeKube
) -> None:
    """With the API failing, the leader stops at 2/3 of the lease; others wait the whole lease."""
    a, b = pair
    api.fail_next(1000, status=503)
    a.clock.now += 9  # before the renew deadline (10 s): still leading despite the failure
    assert await a.elector.step()
    a.clock.now += 2  # 11 s since the last renewal
    assert not await a.elector.step()
    blocked = a.elector.leader_elsewhere()
    assert blocked is not None and blocked.startswith("cannot reach the leader lease")
    records = await handle(a.playbooks, opened())
    assert [(r.status, r.guard) for r in records] == [("skipped", "leader")]
    assert replicas_of_triton(api) == 2
    api.fail_next(0)
    b.clock.now += 11  # b has not yet seen the lease unchanged for 15 s
    assert not await b.elector.step()


async def test_release_at_shutdown_hands_over_at_once(pair: tuple[Replica, Replica]) -> None:
    """A leader that releases the lease lets the follower lead on its next round, no waiting."""
    a, b = pair
    await a.elector.release()
    assert not a.elector.is_leader()
    assert await b.elector.step()
    assert b.elector.holder == "tritonguard-b"


async def test_an_unreadable_annotation_is_ignored_not_guessed(
    pair: tuple[Replica, Replica], api: FakeKube
) -> None:
    """Garbage in the handover annotation adopts nothing and does not stop the election."""
    _, b = pair
    lease = api.get_object("Lease", NS, LEASE)
    assert lease is not None
    client_a = KubernetesClient.for_host(api.url, timeout_s=5.0)
    try:
        assert await client_a.renew_lease(
            NS, LEASE, "tritonguard-a", 15, {ANNOTATION: '{"v": 1, "runs": [["x"]]}'}
        )
    finally:
        client_a.close()
    assert not await b.elector.step()
    assert b.elector.adopted == 0
    assert b.elector.last_error is None


VERIFIED = SCALE.replace(
    "  - action: slack.post",
    "verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}\n"
    "escalate:\n  - action: slack.post",
)


async def test_the_next_leader_judges_a_verification_the_dead_leader_left(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """The leader dies mid-verify; the lease hands the verification over with its undo.

    The follower adopts it while the leader still renews, takes over after a whole lease,
    judges it when due on its own fresh data (the fix did not help) and rolls the scale back.
    A verification the leader settles is dropped from the follower's store.
    """
    held = asyncio.Event()
    with replica_pair(
        api, fake_slack, playbook=VERIFIED, held=held, features_b=StaticFeatures(0.95)
    ) as (a, b):
        await elect(a.elector, b.elector)
        a.playbooks.step([opened()], WALL)
        await waiting.wait_for(lambda: a.playbooks.executor.verifying, 2.0, poll_s=0.01)
        assert replicas_of_triton(api) == 3
        assert await a.elector.step()  # publishes the pending verification
        lease = api.get_object("Lease", NS, LEASE)
        assert lease is not None
        assert "scale-out" in lease["metadata"]["annotations"][VERIFICATIONS_ANNOTATION]
        assert not await b.elector.step()
        [adopted] = b.store.pending_verifications()
        assert adopted.playbook == "scale-out"
        # a dies: its work stops, the lease goes unrenewed for a whole duration.
        for task in a.playbooks.in_flight():
            task.cancel()
        await asyncio.gather(*a.playbooks.in_flight(), return_exceptions=True)
        b.clock.now += 16
        assert await b.elector.step()
        assert await b.playbooks.run_step([], WALL + 30) == {}  # not due before started + 60 s
        records = [r for rs in (await b.playbooks.run_step([], WALL + 61)).values() for r in rs]
        assert [(r.action, r.status) for r in records] == [
            ("verify", "failed"),
            ("kubernetes.scale", "rolled_back"),
            ("slack.post", "ran"),
        ]
        assert replicas_of_triton(api) == 2


async def test_a_follower_drops_a_verification_the_leader_has_judged(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """Once the leader's verdict is in, the next publication no longer lists it: b forgets it."""
    held = asyncio.Event()
    with replica_pair(
        api, fake_slack, playbook=VERIFIED, held=held, features_a=StaticFeatures(0.4)
    ) as (a, b):
        assert await a.elector.step()
        a.playbooks.step([opened()], WALL)
        await waiting.wait_for(lambda: a.playbooks.executor.verifying, 2.0, poll_s=0.01)
        assert await a.elector.step()
        assert not await b.elector.step()
        assert len(b.store.pending_verifications()) == 1
        held.set()
        await a.playbooks.settle()
        assert [(r.action, r.status) for r in a.store.decisions()][-1] == ("verify", "ran")
        assert await a.elector.step()
        assert not await b.elector.step()
        assert b.store.pending_verifications() == []
