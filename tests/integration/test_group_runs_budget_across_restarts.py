"""The global budget counts the changes a fleet group's runs made, from the audit trail.

Pods of one Deployment form a fleet group; after the first pod raises the Deployment, the
others' runs are covered by that raise and change nothing. What counts toward
``action_budget_per_hour`` is decided from what each run did, as the SQLite audit file
records it: a raise the group repeated after a rollback always counts, a covered run
never does, before and after its group resolves and across a restart (a new executor and
store on the same file). A covered run's verification judged after a restart remembers the
raise it relied on, so a failed verdict leaves that raise in place. Kubernetes and Slack
are the fake servers, driven by the real clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import playbook_harness, waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.playbook_harness import StaticFeatures, resolved, stage
from tests.slack_delivery import attach
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.core.run_handover import (
    decode_runs,
    decode_verifications,
    encode_runs,
    encode_verifications,
)
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

PODS = ["triton-5d9c7b-a1", "triton-5d9c7b-b2", "triton-5d9c7b-c3"]
OTHERS = ["other-a", "other-b"]
# Two changes an hour in all: small enough that one uncounted change shows.
BUDGET = GuardSettings(dry_run=False, action_budget_per_hour=2)

# The rate is far above the budget, so only the budget can stop a run here.
SCALE = """
name: scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m, max_runs_per_hour: 10}
steps:
  - action: kubernetes.scale
    params: {add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
"""

# As test_fleet_group_rollback: a custom rollback that would shrink the Deployment under
# the pod whose raise the others rely on.
SHRINKING = """
name: scale-out-or-shrink
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m, max_runs_per_hour: 10}
steps:
  - action: kubernetes.scale
    params: {add: 1}
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
rollback:
  - action: kubernetes.scale
    params: {name: triton, replicas: 1}
escalate:
  - action: slack.post
"""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield Deployments prod/triton (the three pods) and prod/other-{a,b}, 2 replicas each."""
    async with FakeKube() as server:
        server.add_namespace("prod")
        for name, pods in (("triton", PODS), *((o, [f"{o}-7f8e-p1"]) for o in OTHERS)):
            rs = "triton-5d9c7b" if name == "triton" else f"{name}-7f8e"
            server.add_deployment("prod", name, replicas=2)
            server.add_replicaset("prod", rs, deployment=name)
            for pod in pods:
                server.add_pod("prod", pod, owner=("ReplicaSet", rs))
        yield server


class _Saturation(StaticFeatures):
    """CPU saturation by pod: the pods named stay saturated, so their verify fails."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.failing = failing

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return a saturation above the check for a failing pod, below it otherwise."""
        return 0.95 if subject.pod in self.failing else 0.3


class _Fleet:
    """The engine's side (incidents and their fleet groups) and one daemon on an audit file.

    :meth:`restart` stops the daemon and starts a new one (executor, store) on the same
    file; the engine's incidents stay open across it.
    """

    def __init__(
        self,
        db: Path,
        kube: FakeKube,
        slack: FakeSlack,
        books: str = SCALE,
        features: StaticFeatures | None = None,
    ) -> None:
        self.db, self.kube, self.slack, self.books = db, kube, slack, books
        self.features = features or _Saturation()
        self.groups = FleetGroups(
            workload_of=lambda ns, pod: f"Deployment/{pod.rsplit('-', 2)[0]}",
            pods_of=lambda ns, model: len(PODS),
        )
        self.open: dict[str, IncidentEvent] = {}
        self.now = 5000.0
        # Set to hold every verify wait until the step is cancelled (the daemon stops).
        self.hold = False
        self.stage = self._start()

    def _start(self) -> PlaybookStage:
        async def wait(seconds: float) -> None:
            if self.hold:
                await asyncio.Event().wait()

        env = ExecutorEnv(
            kube=KubernetesClient.for_host(self.kube.url),
            slack=SlackNotifier(self.slack.token, base_url=self.slack.base_url),
            slack_channel="#ml-oncall",
            features=self.features,
            clock=lambda: self.now,
            sleep=wait,
        )
        return stage(
            load_playbooks_text(self.books, "inline.yaml", catalog()),
            AuditStore(self.db),
            settings=BUDGET,
            env=env,
            open_incidents=lambda: self.groups.annotate(list(self.open.values())),
        )

    def restart(self) -> None:
        """Stop the daemon and start a new one on the same audit file."""
        self.stage.store.close()
        self.stage = self._start()

    def observe(self, events: list[IncidentEvent]) -> list[IncidentEvent]:
        """Open or close the events' incidents on the engine's side, in their groups."""
        events = self.groups.observe(events)
        for e in events:
            if e.event == "resolved":
                self.open.pop(e.incident_id, None)
            else:
                self.open[e.incident_id] = e
        return events

    async def step(self, events: list[IncidentEvent], now: float) -> list[tuple[str, str, str]]:
        """Feed one evaluation; return (pod, action, status[:guard]) of what it recorded."""
        self.now = now
        events = self.observe(events)
        pods = {e.incident_id: e.subject.pod for e in [*events, *self.open.values()]}
        pods.update({f"inc-{p}": p for p in PODS})
        records = await self.stage.run_step(events, now)
        return sorted(
            (pods[i], r.action, f"{r.status}:{r.guard}" if r.guard else r.status)
            for i, recs in records.items()
            for r in recs
            if r.phase == "step"
        )

    async def stop_mid_verify(self, events: list[IncidentEvent], now: float) -> None:
        """Start the step's runs, wait for a verify to begin waiting, then stop the daemon."""
        self.now, self.hold = now, True
        on = self.stage
        on.step(self.observe(events), now)
        await waiting.wait_for(lambda: on.executor.verifying, 2.0, poll_s=0.01)
        for task in on.in_flight():
            task.cancel()
        await asyncio.gather(*on.in_flight(), return_exceptions=True)
        self.hold = False
        self.restart()

    def covered(self) -> dict[str, str]:
        """Return, by subject, whose raise each run the trail marks as covered relied on."""
        return {r.subject_key: r.covered_by for r in self.stage.store.history(0.0) if r.covered_by}


def _opening(pod: str, model: str = "resnet") -> IncidentEvent:
    return playbook_harness.incident(
        "cpu_bottleneck", model, pod=pod, at=5000.0, opened_at=4900.0, incident_id=f"inc-{pod}"
    )


def _lone(name: str) -> IncidentEvent:
    return _opening(f"{name}-7f8e-p1", model=name)


def _replicas(kube: FakeKube, name: str = "triton") -> int:
    return kube.replicas("Deployment", "prod", name)


def _b_failing(
    db: Path, kube: FakeKube, slack: FakeSlack, books: str
) -> tuple[_Fleet, IncidentEvent, IncidentEvent]:
    """Return a daemon on ``books`` whose check of pod b fails, and pods a's and b's openings."""
    fleet = _Fleet(db, kube, slack, books, _Saturation(frozenset({PODS[1]})))
    first, second = (_opening(p) for p in PODS[:2])
    return fleet, first, second


async def _judge_when_due(fleet: _Fleet, slack: FakeSlack) -> dict[str, list[ActionRecord]]:
    """Run the step at which a check stopped at 5005 s is due, its Slack threads attached."""
    threads = attach(fleet.stage, slack, "#ml-oncall")
    try:
        fleet.now = 5070.0
        return await fleet.stage.run_step([], 5070.0)
    finally:
        await threads.close()


# b's failed check judged: the rollback's scale to 1 replica is skipped as covered by a's
# raise, and the escalation still posts.
SPARED = [
    ("verify", "step", "failed", ""),
    ("kubernetes.scale", "rollback", "skipped", "covered"),
    ("slack.post", "escalate", "ran", ""),
]


async def test_a_raise_the_group_repeats_after_a_rollback_counts_toward_the_budget(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Two raises by one open group use the budget of two: a third change elsewhere waits.

    Pod a's verify fails and its raise is rolled back; pod b, next, is no longer covered and
    raises the Deployment again. Both runs changed the cluster, so other-a is skipped for the
    budget while the group is open, and still after a restart.
    """
    fleet = _Fleet(
        tmp_path / "audit.sqlite3", kube, fake_slack, features=_Saturation(frozenset({PODS[0]}))
    )
    threads = attach(fleet.stage, fake_slack, "#ml-oncall")
    first = await fleet.step([_opening(p) for p in PODS[:2]], 5000.0)
    assert (PODS[0], "verify", "failed") in first
    assert _replicas(kube) == 2
    assert (PODS[1], "kubernetes.scale", "ran") in await fleet.step([], 5005.0)
    assert _replicas(kube) == 3
    assert fleet.covered() == {}
    assert await fleet.step([_lone("other-a")], 5010.0) == [
        ("other-a-7f8e-p1", "*", "skipped:budget")
    ]
    await threads.close()
    fleet.restart()
    assert await fleet.step([_lone("other-b")], 5015.0) == [
        ("other-b-7f8e-p1", "*", "skipped:budget")
    ]
    assert _replicas(kube, "other-a") == _replicas(kube, "other-b") == 2


async def test_covered_runs_use_no_budget_before_or_after_the_group_resolves(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """One raise and two covered runs use one change of the budget of two, for good.

    The trail marks b's and c's runs covered by a's raise. With the group open, other-a may
    still raise; after the group resolved and the daemon restarted, the covered runs still
    count for nothing: other-a's raise and a's are the two, and other-b is skipped.
    """
    fleet = _Fleet(tmp_path / "audit.sqlite3", kube, fake_slack)
    threads = attach(fleet.stage, fake_slack, "#ml-oncall")
    openings = [_opening(p) for p in PODS]
    assert (PODS[0], "kubernetes.scale", "ran") in await fleet.step(openings, 5000.0)
    for now, pod in ((5005.0, PODS[1]), (5010.0, PODS[2])):
        assert (pod, "kubernetes.scale", "skipped:covered") in await fleet.step([], now)
    assert _replicas(kube) == 3
    relied = {Subject("prod", "resnet", p).key(): f"inc-{PODS[0]}" for p in PODS[1:]}
    assert fleet.covered() == relied
    for now, event in zip((5020.0, 5025.0, 5030.0), reversed(openings), strict=True):
        await fleet.step([resolved(event, at=now)], now)
    assert fleet.groups.group_of(openings[0].incident_id) is None
    await threads.close()
    fleet.restart()
    assert fleet.covered() == relied
    assert ("other-a-7f8e-p1", "kubernetes.scale", "ran") in await fleet.step(
        [_lone("other-a")], 5035.0
    )
    assert _replicas(kube, "other-a") == 3
    assert await fleet.step([_lone("other-b")], 5040.0) == [
        ("other-b-7f8e-p1", "*", "skipped:budget")
    ]
    assert _replicas(kube, "other-b") == 2


async def test_a_covered_runs_verdict_after_a_restart_leaves_the_raise_it_relied_on(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """Pod b's verify, stopped by a restart and judged failed after it, shrinks nothing.

    b's scale was covered by a's raise. The restarted daemon judges b's pending
    verification, which remembers that raise: the rollback's scale to 1 replica is skipped
    as covered, the escalation still posts, and the Deployment keeps 3 replicas under a.
    """
    fleet, first, second = _b_failing(tmp_path / "audit.sqlite3", kube, fake_slack, SHRINKING)
    assert (PODS[0], "verify", "ran") in await fleet.step([first, second], 5000.0)
    assert _replicas(kube) == 3
    await fleet.stop_mid_verify([], 5005.0)
    [pending] = fleet.stage.store.pending_verifications()
    assert pending.incident.incident_id == second.incident_id
    assert pending.leaning_on == first.incident_id
    records = [r for rs in (await _judge_when_due(fleet, fake_slack)).values() for r in rs]
    assert [(r.action, r.phase, r.status, r.guard) for r in records] == SPARED
    assert first.incident_id in records[1].reason
    assert _replicas(kube) == 3


async def test_the_next_leader_judging_a_covered_runs_check_leaves_the_raise(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """A follower adopting the stopped leader's check of pod b spares a's raise on failure.

    The leader publishes its runs and pending verification as on the Lease; the follower,
    on its own audit file, adopts both and judges b's check when due: the rollback's scale
    to 1 replica is skipped as covered.
    """
    leader, first, second = _b_failing(tmp_path / "leader.sqlite3", kube, fake_slack, SHRINKING)
    await leader.step([first, second], 5000.0)
    await leader.stop_mid_verify([], 5005.0)
    runs = encode_runs(leader.stage.store.history(0.0), 5005.0)
    handed, _ = encode_verifications(leader.stage.store.handed_verifications())
    follower = _Fleet(tmp_path / "follower.sqlite3", kube, fake_slack, SHRINKING, leader.features)
    follower.stage.store.adopt_runs(decode_runs(runs))
    assert follower.stage.store.adopt_verifications(decode_verifications(handed), "leader") == 1
    # b's run was stopped before it ended, so nothing says it changed nothing: it counts.
    assert follower.covered() == {}
    follower.observe([first, second])
    records = (await _judge_when_due(follower, fake_slack))[second.incident_id]
    assert [(r.action, r.phase, r.status, r.guard) for r in records if r.action != "*"] == SPARED
    assert _replicas(kube) == 3


# A covered scale, then a step that waits for a human: what is approved after a restart
# goes on relying on the raise the run relied on before it waited.
APPROVED_THEN_SHRINKING = """
name: scale-out-or-shrink
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m, max_runs_per_hour: 10}
steps:
  - action: kubernetes.scale
    params: {add: 1}
  - action: kubernetes.scale
    params: {name: other-a, add: 1}
    approval: required
verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}
rollback:
  - action: kubernetes.scale
    params: {name: triton, replicas: 1}
"""


async def test_a_covered_run_approved_after_a_restart_spares_the_raise_on_failure(
    tmp_path: Path, kube: FakeKube, fake_slack: FakeSlack
) -> None:
    """An approval keeps the raise its run relied on: a's raise survives b's rollback.

    Pod b's run waits for approval after its covered scale. Approved after a restart, its
    approved step runs, its verify fails and the rollback's scale to 1 replica is skipped
    as covered: the Deployment keeps 3 replicas.
    """
    fleet, first, second = _b_failing(
        tmp_path / "audit.sqlite3", kube, fake_slack, APPROVED_THEN_SHRINKING
    )
    await fleet.step([first, second], 5000.0)
    assert (PODS[1], "kubernetes.scale", "skipped:covered") in await fleet.step([], 5005.0)
    assert _replicas(kube) == 3
    fleet.restart()
    [waiting_b] = fleet.stage.store.pending_approvals(second.incident_id)
    assert waiting_b.leaning_on == first.incident_id
    fleet.now = 5010.0
    assert fleet.stage.executor.settle_approval(waiting_b, "approved", "U1", 5010.0, "approved")
    done = fleet.stage.resume_approved(waiting_b, 5010.0, fleet.open[second.incident_id])
    records = (await done.records())[second.incident_id]
    assert [(r.action, r.phase, r.status, r.guard) for r in records] == [
        ("kubernetes.scale", "step", "ran", ""),
        ("verify", "step", "failed", ""),
        ("kubernetes.scale", "rollback", "skipped", "covered"),
    ]
    assert _replicas(kube) == 3
    assert _replicas(kube, "other-a") == 3
