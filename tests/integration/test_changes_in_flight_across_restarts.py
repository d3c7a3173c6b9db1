"""A scale in flight when the daemon dies is scaled back by the next start, or the next leader.

The scale goes through a fault proxy to the fake Kubernetes API with the official client. The
proxy lets the patch reach the server and holds its answer, so the call is still open when the
daemon is stopped (its task cancelled, as at the end of SIGTERM's grace) or killed (the task
abandoned: nothing after the call runs, as with SIGKILL). A second stage on the same audit
file stands in for the restarted daemon; two replicas on a Lease stand in for a leader that
dies and the follower that takes over.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.fault_servers import Answer, FaultProxy, HoldAnswer, kube_status
from tests.playbook_harness import StaticFeatures, incident, resolved, stage
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

SCALE_PATH = r"/apis/apps/v1/namespaces/prod/deployments/triton/scale"
T0 = 5000.0
# The patch's answer is held this long: the restart happens well within it. The official
# client waits in a thread, so a cancelled call still holds its connection until then.
HELD_S = 5.0
SCALE = """
name: scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
escalate:
  - action: slack.post
    params: {text: "scaling {{ model }} was interrupted and undone"}
"""
# The restore, then the playbook's escalation (a restore is a rollback).
RESTORED = [("kubernetes.scale", "rolled_back"), ("slack.post", "ran")]
CONFLICT = kube_status(
    409, "Conflict", 'Operation cannot be fulfilled on deployments.apps "triton"'
)


@dataclass
class Cluster:
    """The fake API server, the proxy in front of it, and a Slack."""

    kube: FakeKube
    proxy: FaultProxy
    slack: FakeSlack

    def replicas(self) -> int:
        """Return the Deployment's spec.replicas as the server stores it."""
        return self.kube.replicas("Deployment", "prod", "triton")

    def patches(self) -> int:
        """Return how many scale patches went through the proxy."""
        return sum(1 for s in self.proxy.seen if s.method == "PATCH" and s.path.endswith("/scale"))


@pytest.fixture
async def cluster(fake_slack: FakeSlack) -> AsyncIterator[Cluster]:
    """Yield the fake API server (Deployment prod/triton, 2 replicas) behind a fault proxy."""
    async with FakeKube() as kube, FaultProxy(kube.url) as proxy:
        kube.add_namespace("prod")
        kube.add_namespace("tritonguard")
        kube.add_deployment("prod", "triton", replicas=2)
        yield Cluster(kube, proxy, fake_slack)


def daemon(
    cluster: Cluster,
    db: Path | str,
    clients: list[KubernetesClient],
    *,
    leader_elsewhere: str | None = None,
    kube: KubernetesClient | None = None,
) -> PlaybookStage:
    """Return one daemon's playbook stage on the audit file ``db``, scaling through the proxy."""
    if kube is None:
        kube = KubernetesClient.for_host(cluster.proxy.url, timeout_s=30.0)
        clients.append(kube)
    env = ExecutorEnv(
        kube=kube,
        slack=SlackNotifier(cluster.slack.token, base_url=cluster.slack.base_url),
        slack_channel="#ml-oncall",
        features=StaticFeatures(),
        clock=lambda: T0,
    )
    books = load_playbooks_text(SCALE, "scale.yaml", catalog())
    return stage(
        books,
        AuditStore(db),
        settings=GuardSettings(dry_run=False),
        env=env,
        leader_elsewhere=lambda: leader_elsewhere,
    )


async def until_patched(cluster: Cluster, on: PlaybookStage) -> None:
    """Wait until the scale patch has reached the server while its answer is held."""
    await waiting.wait_for(
        lambda: cluster.replicas() == 3 and on.executor.intending,
        5.0,
        what="the scale to reach the server",
        poll_s=0.01,
    )


def flat(records: dict[str, list[ActionRecord]]) -> list[ActionRecord]:
    """Return every record of a step, in order."""
    return [r for rs in records.values() for r in rs]


def intent_states(db: Path) -> list[str]:
    """Return the state of every intent in the audit file."""
    with sqlite3.connect(db) as conn:
        return [str(r[0]) for r in conn.execute("SELECT state FROM intents ORDER BY id")]


async def test_a_scale_in_flight_when_the_daemon_is_killed_is_scaled_back_at_the_next_start(
    tmp_path: Path, cluster: Cluster
) -> None:
    """Killed with the patch applied and its answer not back: the restart puts 2 back, once.

    The step wrote its undo (scale to the 2 it read) before the patch. The killed daemon
    records nothing more. The next start restores 2 at once, records it in one line, rolls
    back and escalates the rest of the run, and is held back by the cooldown when the
    incident comes again: the scale is never repeated.
    """
    db = tmp_path / "audit.sqlite3"
    clients: list[KubernetesClient] = []
    cluster.proxy.add("PATCH", SCALE_PATH, HoldAnswer(HELD_S))
    first = daemon(cluster, db, clients)
    try:
        first.step([incident(at=T0)], T0)
        await until_patched(cluster, first)
        assert first.store.decisions() == []  # the step's outcome is not on file: killed here
        restarted = daemon(cluster, db, clients)
        records = flat(await restarted.run_step([], T0 + 5))
        assert [(r.action, r.status, r.phase) for r in records] == [
            ("kubernetes.scale", "rolled_back", "rollback"),
            ("slack.post", "ran", "escalate"),
        ]
        assert "kubernetes.scale was in flight when the daemon stopped" in records[0].reason
        assert records[0].params["replicas"] == 2
        assert cluster.replicas() == 2
        assert intent_states(db) == ["restored"]
        again = flat(await restarted.run_step([incident(at=T0 + 10)], T0 + 10))
        assert [(r.action, r.status, r.guard) for r in again] == [("*", "skipped", "cooldown")]
        assert cluster.patches() == 2  # the change once, the restore once
        assert await restarted.run_step([], T0 + 20) == {}  # restored once, not again
    finally:
        for task in first.in_flight():
            task.cancel()
        await asyncio.gather(*first.in_flight(), return_exceptions=True)
        for client in clients:
            client.close()


async def test_a_stop_mid_scale_is_recorded_and_the_next_start_scales_back(
    tmp_path: Path, cluster: Cluster
) -> None:
    """SIGTERM's grace over with the patch in flight: cancelled, outcome unknown, then undone.

    The stopping daemon leaves the intent for the restart (it never restores in its last
    moments); the restarted one scales back to 2.
    """
    db = tmp_path / "audit.sqlite3"
    clients: list[KubernetesClient] = []
    cluster.proxy.add("PATCH", SCALE_PATH, HoldAnswer(HELD_S))
    first = daemon(cluster, db, clients)
    try:
        first.step([incident(at=T0)], T0)
        await until_patched(cluster, first)
        for task in first.in_flight():
            task.cancel()
        await asyncio.gather(*first.in_flight(), return_exceptions=True)
        [cancelled] = first.store.decisions()
        assert (cancelled.action, cancelled.status) == ("kubernetes.scale", "cancelled")
        assert "puts back the state from before it" in cancelled.reason
        assert intent_states(db) == ["pending"]
        assert await first.run_step([], T0 + 1) == {}  # not this process's to settle
        first.store.close()
        restarted = daemon(cluster, db, clients)
        records = flat(await restarted.run_step([], T0 + 5))
        assert [(r.action, r.status) for r in records] == RESTORED
        assert cluster.replicas() == 2
    finally:
        for client in clients:
            client.close()


async def test_an_intent_whose_change_never_happened_restores_harmlessly(
    tmp_path: Path, cluster: Cluster
) -> None:
    """The daemon died between writing the intent and sending the patch: scaling to 2 is a no-op.

    That is why the restore needs no knowledge of whether the change landed.
    """
    db = tmp_path / "audit.sqlite3"
    clients: list[KubernetesClient] = []
    dead = AuditStore(db)
    dead.begin_intent(
        incident(at=T0),
        "scale-out",
        "kubernetes.scale",
        (
            "kubernetes.scale",
            {"kind": "Deployment", "name": "triton", "namespace": "prod", "replicas": 2},
        ),
        [],
        T0,
    )
    dead.close()
    try:
        restarted = daemon(cluster, db, clients)
        records = flat(await restarted.run_step([], T0 + 5))
        assert [(r.action, r.status) for r in records] == RESTORED
        assert cluster.replicas() == 2
    finally:
        for client in clients:
            client.close()


async def test_a_step_with_an_outcome_settles_its_intent_and_the_next_start_leaves_it_alone(
    tmp_path: Path, cluster: Cluster
) -> None:
    """Ran: the intent joins the step's undo. Refused (409, nothing changed): it is discarded.

    Either way the next start finds nothing to restore, and the scale that ran stays.
    """
    db = tmp_path / "audit.sqlite3"
    clients: list[KubernetesClient] = []
    try:
        first = daemon(cluster, db, clients)
        scaled = incident(at=T0, pod="triton-a")
        await first.run_step([scaled], T0)
        assert cluster.replicas() == 3
        # Over: the next incident's scale is no longer covered by this one's.
        await first.run_step([resolved(scaled, at=T0)], T0)
        cluster.proxy.add("PATCH", SCALE_PATH, Answer(409, CONFLICT))
        await first.run_step([incident(at=T0, pod="triton-b")], T0)
        assert intent_states(db) == ["ran", "failed"]
        undos = [
            u
            for i in first.store.incidents()
            for u in first.store.pending_undos(str(i["incident_id"]))
        ]
        assert [(u.action, u.params["replicas"]) for u in undos] == [("kubernetes.scale", 2)]
        first.store.close()
        restarted = daemon(cluster, db, clients)
        assert await restarted.run_step([], T0 + 5) == {}
        assert cluster.replicas() == 3
    finally:
        for client in clients:
            client.close()


async def test_a_change_whose_undo_cannot_be_written_is_not_made(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit file refuses the intent (disk full): the scale is not sent, the step fails.

    A change is only made once its way back is on disk.
    """
    clients: list[KubernetesClient] = []

    def refuse(*args: object, **kwargs: object) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    try:
        on = daemon(cluster, tmp_path / "audit.sqlite3", clients)
        monkeypatch.setattr(on.store, "begin_intent", refuse)
        records = flat(await on.run_step([incident(at=T0)], T0))
        assert [(r.action, r.status) for r in records][:1] == [("kubernetes.scale", "failed")]
        assert "cannot write the undo to the audit store before the change" in records[0].reason
        assert "nothing was changed" in records[0].reason
        assert cluster.patches() == 0 and cluster.replicas() == 2
    finally:
        for client in clients:
            client.close()


@dataclass
class Replica:
    """One replica: its stage on its own audit store, its elector and a hand-moved clock."""

    stage: PlaybookStage
    elector: LeaderElector
    clock: list[float]


def replica(name: str, cluster: Cluster, clients: list[KubernetesClient]) -> Replica:
    """Build a replica the way build_service wires one (leader election on the fake API)."""
    clock = [1000.0]
    kube = KubernetesClient.for_host(cluster.proxy.url, timeout_s=30.0)
    kube.monotonic = lambda: clock[0]
    clients.append(kube)
    store = AuditStore()
    elector = LeaderElector(
        kube,
        store,
        namespace="tritonguard",
        name="tritonguard-leader",
        identity=name,
        duration_s=15,
        clock=lambda: T0,
        monotonic=lambda: clock[0],
    )
    env = ExecutorEnv(
        kube=kube,
        slack=SlackNotifier(cluster.slack.token, base_url=cluster.slack.base_url),
        slack_channel="#ml-oncall",
        features=StaticFeatures(),
        clock=lambda: T0,
        on_run=elector.nudge,
    )
    books = load_playbooks_text(SCALE, "scale.yaml", catalog())
    on = stage(
        books,
        store,
        settings=GuardSettings(dry_run=False),
        env=env,
        leader_elsewhere=elector.leader_elsewhere,
    )
    return Replica(on, elector, clock)


def opened() -> IncidentEvent:
    """Return the incident both replicas' engines open."""
    return incident(at=T0, incident_id="inc-shared")


async def test_the_next_leader_scales_back_a_change_the_dead_leader_left_in_flight(
    cluster: Cluster,
) -> None:
    """The leader dies with its patch applied: the lease hands the intent over; b restores.

    While the leader lives, b holds the intent and leaves it alone (only the leader acts).
    """
    clients: list[KubernetesClient] = []
    cluster.proxy.add("PATCH", SCALE_PATH, HoldAnswer(HELD_S))
    a, b = replica("tritonguard-a", cluster, clients), replica("tritonguard-b", cluster, clients)
    try:
        assert await a.elector.step()
        assert not await b.elector.step()
        a.stage.step([opened()], T0)
        await until_patched(cluster, a.stage)
        assert await a.elector.step()  # publishes the change in flight
        assert not await b.elector.step()
        [adopted] = b.stage.store.pending_intents()
        assert (adopted.action, adopted.undo_params["replicas"]) == ("kubernetes.scale", 2)
        assert await b.stage.run_step([], T0 + 1) == {}  # a still leads
        # a dies; the lease goes unrenewed for a whole duration and b takes over.
        b.clock[0] += 16
        assert await b.elector.step()
        records = flat(await b.stage.run_step([], T0 + 20))
        assert [(r.action, r.status) for r in records] == RESTORED
        assert cluster.replicas() == 2
        again = flat(await b.stage.run_step([incident(at=T0 + 21)], T0 + 21))
        assert ("*", "skipped", "cooldown") in [(r.action, r.status, r.guard) for r in again]
    finally:
        for task in a.stage.in_flight():
            task.cancel()
        await asyncio.gather(*a.stage.in_flight(), return_exceptions=True)
        for client in clients:
            client.close()


async def test_a_follower_drops_a_change_the_leader_settled(cluster: Cluster) -> None:
    """Once the leader's step has its outcome, the next publication leaves it out: b forgets it."""
    clients: list[KubernetesClient] = []
    cluster.proxy.add("PATCH", SCALE_PATH, HoldAnswer(1.0))
    a, b = replica("tritonguard-a", cluster, clients), replica("tritonguard-b", cluster, clients)
    try:
        assert await a.elector.step()
        a.stage.step([opened()], T0)
        await until_patched(cluster, a.stage)
        assert await a.elector.step()
        assert not await b.elector.step()
        assert len(b.stage.store.pending_intents()) == 1
        await a.stage.settle()
        assert await a.elector.step()
        assert not await b.elector.step()
        assert b.stage.store.pending_intents() == []
        assert cluster.replicas() == 3
    finally:
        for client in clients:
            client.close()
