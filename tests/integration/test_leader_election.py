"""Two daemon replicas electing a leader on the fake Kubernetes API with the real client."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.playbook_harness import StaticFeatures, handle, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.core.run_handover import ANNOTATION, VERIFICATIONS_ANNOTATION
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

NS = "tritonguard"
LEASE = "tritonguard-leader"
WALL = 10_000.0
_ids = itertools.count(1)

SCALE = """
name: scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
  - action: slack.post
    params: {text: "{{ model }} scaled out"}
"""


@dataclass
class Clock:
    """A monotonic clock the test advances by hand, so lease expiry needs no sleeping."""

    now: float = 1000.0

    def __call__(self) -> float:
        """Return the current reading."""
        return self.now


@dataclass
class Replica:
    """One daemon replica: its own API client, clock, audit store, elector and playbook stage."""

    name: str
    kube: KubernetesClient
    clock: Clock
    store: AuditStore
    elector: LeaderElector
    playbooks: PlaybookStage
    closers: list[KubernetesClient] = field(default_factory=list)


@pytest.fixture
async def api() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with the daemon's namespace and a Triton Deployment."""
    async with FakeKube() as server:
        server.add_namespace(NS)
        server.add_namespace("prod")
        server.add_deployment("prod", "triton", replicas=2)
        yield server


def replica(
    name: str,
    api: FakeKube,
    slack: FakeSlack,
    *,
    playbook: str = SCALE,
    features: StaticFeatures | None = None,
    sleep: asyncio.Event | None = None,
) -> Replica:
    """Build a replica the way build_service wires one, with hand-driven clocks.

    ``sleep``, when given, holds verify waits until it is set.
    """

    async def wait(seconds: float) -> None:
        if sleep is not None:
            await sleep.wait()

    clock = Clock()
    kube = KubernetesClient.for_host(api.url, timeout_s=5.0)
    kube.monotonic = clock
    store = AuditStore()
    elector = LeaderElector(
        kube,
        store,
        namespace=NS,
        name=LEASE,
        identity=name,
        duration_s=15,
        clock=lambda: WALL,
        monotonic=clock,
    )
    env = ExecutorEnv(
        kube=kube,
        slack=SlackNotifier(slack.token, base_url=slack.base_url),
        slack_channel="#tritonguard-alerts",
        clock=lambda: WALL,
        on_run=elector.nudge,
        features=features or StaticFeatures(),
        sleep=wait,
    )
    books = load_playbooks_text(playbook, "scale.yaml", catalog())
    playbooks = stage(
        books,
        store,
        settings=GuardSettings(dry_run=False),
        env=env,
        leader_elsewhere=elector.leader_elsewhere,
    )
    return Replica(name, kube, clock, store, elector, playbooks)


def opened() -> IncidentEvent:
    """Return a cpu_bottleneck incident as each replica's own engine would open it."""
    return IncidentEvent(
        event="opened",
        incident_id=f"inc-{next(_ids)}",
        cause="cpu_bottleneck",
        subject=Subject("prod", "resnet", "triton-5d9c7b-x2x9q"),
        at=WALL,
        confidence=0.9,
        summary="container CPU at its quota while the GPU idles",
        evidence={"cpu": Evidence(0.97, "ratio", 60, "container CPU / quota")},
        fix=Fix("raise the CPU limit"),
        opened_at=WALL - 60,
    )


@pytest.fixture
async def pair(api: FakeKube, fake_slack: FakeSlack) -> AsyncIterator[tuple[Replica, Replica]]:
    """Yield replicas a and b; a has taken the lease first."""
    a, b = replica("tritonguard-a", api, fake_slack), replica("tritonguard-b", api, fake_slack)
    assert await a.elector.step()
    assert not await b.elector.step()
    try:
        yield a, b
    finally:
        for r in (a, b):
            r.kube.close()
            r.store.close()


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
    a = replica("tritonguard-a", api, fake_slack, playbook=VERIFIED, sleep=held)
    b = replica("tritonguard-b", api, fake_slack, playbook=VERIFIED, features=StaticFeatures(0.95))
    try:
        assert await a.elector.step()
        assert not await b.elector.step()
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
    finally:
        for r in (a, b):
            r.kube.close()


async def test_a_follower_drops_a_verification_the_leader_has_judged(
    api: FakeKube, fake_slack: FakeSlack
) -> None:
    """Once the leader's verdict is in, the next publication no longer lists it: b forgets it."""
    held = asyncio.Event()
    a = replica(
        "tritonguard-a",
        api,
        fake_slack,
        playbook=VERIFIED,
        sleep=held,
        features=StaticFeatures(0.4),
    )
    b = replica("tritonguard-b", api, fake_slack, playbook=VERIFIED)
    try:
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
    finally:
        for r in (a, b):
            r.kube.close()
