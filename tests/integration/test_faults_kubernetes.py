"""The Kubernetes API failing under kubernetes.scale, the leader election and the pod watch.

The official client talks to the fake API server through a fault proxy that answers some
requests itself (409, 403 and 503 with the Status bodies the real API server sends), holds
answers past the client's timeout after the server acted, or cuts a watch stream. The scale
action refuses with one line when the server refused, retries only what cannot add up (the
patch sets an absolute replica count), reads the outcome back when an answer was lost, and
never scales twice. The leader stops acting before anyone else may start; the watch loses no
change across a disconnect or a 410 Gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.fakes.kube import FakeKube
from tests.fault_harness import until
from tests.fault_servers import (
    Answer,
    CutStream,
    FaultProxy,
    ForwardLate,
    HoldAnswer,
    Rule,
    kube_status,
)
from tests.playbook_harness import StaticFeatures, handle, incident, stage
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient, PodEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

SCALE_PATH = r"/apis/apps/v1/namespaces/prod/deployments/triton/scale"
LEASE_PATH = r"/apis/coordination\.k8s\.io/v1/namespaces/tritonguard/leases/tritonguard-leader"
PODS_PATH = r"/api/v1/namespaces/prod/pods"
TIMEOUT_S = 2.0
SCALE = """
name: scale-out
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m}
steps:
  - action: kubernetes.scale
    params: {name: triton, add: 1}
"""
SCALE_VERIFIED = (
    SCALE + "verify: {wait: 60s, checks: [{feature: container_cpu_saturation, below: 0.8}]}\n"
)
CONFLICT = kube_status(
    409,
    "Conflict",
    'Operation cannot be fulfilled on deployments.apps "triton": the object has been '
    "modified; please apply your changes to the latest version and try again",
)
FORBIDDEN = kube_status(
    403,
    "Forbidden",
    'deployments.apps "triton" is forbidden: User "system:serviceaccount:tritonguard:'
    'tritonguard" cannot patch resource "deployments/scale" in API group "apps" in the '
    'namespace "prod"',
)
UNAVAILABLE = kube_status(
    503, "ServiceUnavailable", "the server is currently unable to handle the request"
)


@dataclass
class Cluster:
    """The fake API server, the proxy in front of it and a client through the proxy."""

    kube: FakeKube
    proxy: FaultProxy
    client: KubernetesClient

    def replicas(self) -> int:
        """Return the Deployment's spec.replicas as the server stores it."""
        return self.kube.replicas("Deployment", "prod", "triton")

    def patches(self) -> int:
        """Return how many scale patches were sent."""
        return sum(1 for s in self.proxy.seen if s.method == "PATCH" and s.path.endswith("/scale"))


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    """Yield the fake API server (Deployment prod/triton, 2 replicas) behind a fault proxy."""
    async with FakeKube() as kube, FaultProxy(kube.url) as proxy:
        kube.add_namespace("prod")
        kube.add_namespace("tritonguard")
        kube.add_deployment("prod", "triton", replicas=2)
        client = KubernetesClient.for_host(proxy.url, timeout_s=TIMEOUT_S)
        try:
            yield Cluster(kube, proxy, client)
        finally:
            client.close()


def scaler(cluster: Cluster, text: str = SCALE, *, value: float | None = None) -> PlaybookStage:
    """Return the playbook stage scaling through the proxy; ``value`` is every feature's value."""
    books = load_playbooks_text(text, "scale.yaml", catalog())

    async def no_wait(seconds: float) -> None:
        return None

    env = ExecutorEnv(
        kube=cluster.client,
        features=StaticFeatures(value),
        sleep=no_wait,
        clock=lambda: 5000.0,
    )
    return stage(books, AuditStore(), settings=GuardSettings(dry_run=False), env=env)


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        pytest.param(Answer(409, CONFLICT), "HTTP 409 Operation cannot be fulfilled", id="409"),
        pytest.param(
            Answer(403, FORBIDDEN), 'HTTP 403 deployments.apps "triton" is forbidden', id="403"
        ),
    ],
)
async def test_a_refused_scale_is_not_retried_and_is_recorded_in_one_line(
    cluster: Cluster, answer: Answer, kind: str
) -> None:
    """409 and 403: nothing changed, one patch sent, one line saying why; the cooldown holds.

    A conflict is not retried: the replicas were read before someone else wrote, and
    adding to a count another writer just changed could scale twice.
    """
    cluster.proxy.add("PATCH", SCALE_PATH, answer)
    on = scaler(cluster)
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    again = await handle(on, incident(at=5060.0, opened_at=5000.0))
    assert [(r.action, r.status) for r in records] == [("kubernetes.scale", "failed")]
    reason = records[0].reason
    assert kind in reason and "\n" not in reason, reason
    assert "the workload still has 2 replicas" in reason, reason
    assert cluster.replicas() == 2
    assert cluster.patches() == 1
    assert [(r.status, r.guard) for r in again] == [("skipped", "cooldown")]


async def test_a_scale_the_server_did_not_apply_is_retried_once_and_lands_once(
    cluster: Cluster,
) -> None:
    """A 503 on the patch: the same absolute count is sent again, and 2 becomes 3, not 4."""
    cluster.proxy.add("PATCH", SCALE_PATH, Answer(503, UNAVAILABLE))
    records = await handle(scaler(cluster), incident(at=5000.0, opened_at=4900.0))
    assert [(r.action, r.status) for r in records] == [("kubernetes.scale", "ran")], records
    assert records[0].detail["replicas"] == 3
    assert cluster.replicas() == 3
    assert cluster.patches() == 2


async def test_a_scale_whose_answer_was_lost_is_read_back_kept_once_and_undoable(
    cluster: Cluster,
) -> None:
    """The server scaled but its answer came after the client's timeout.

    The action reads the scale back: 3 replicas, as asked, so the step ran and its undo is
    in the ledger. When the verify step then fails, the rollback puts 2 back. The patch is
    not sent twice and the Deployment never reaches 4.
    """
    cluster.proxy.add("PATCH", SCALE_PATH, HoldAnswer(TIMEOUT_S + 3.0))
    on = scaler(cluster, SCALE_VERIFIED, value=0.95)
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert [(r.action, r.status) for r in records] == [
        ("kubernetes.scale", "ran"),
        ("verify", "failed"),
        ("kubernetes.scale", "rolled_back"),
    ], records
    assert "timed out" in records[0].detail["note"]
    assert cluster.replicas() == 2
    assert cluster.patches() == 2  # the scale once, its rollback once


async def test_a_scale_stuck_on_its_way_is_sent_again_and_still_lands_once(
    cluster: Cluster,
) -> None:
    """The patch is held on its way past the client's timeout, then reaches the server.

    The count read back is still 2, so the action sends the same absolute count once more
    (3) and the step runs. The first patch then arrives late and sets 3 again: an absolute
    count cannot add up, so the Deployment ends at 3, not 4.
    """
    cluster.proxy.add("PATCH", SCALE_PATH, ForwardLate(TIMEOUT_S + 2.0))
    records = await handle(scaler(cluster), incident(at=5000.0, opened_at=4900.0))
    assert [(r.action, r.status) for r in records] == [("kubernetes.scale", "ran")], records
    assert "sent once more after" in records[0].detail["note"]
    assert "timed out" in records[0].detail["note"]
    await cluster.proxy.settle()  # the late patch has reached the server
    assert cluster.replicas() == 3
    assert cluster.patches() == 2


async def test_a_lease_renewal_that_conflicts_is_retried_in_the_same_round(
    cluster: Cluster,
) -> None:
    """A 409 on the renewal (the write raced another) re-reads the lease and renews it.

    The lease is still this replica's, so it stays leader without a gap.
    """
    elector = LeaderElector(
        cluster.client,
        AuditStore(),
        namespace="tritonguard",
        name="tritonguard-leader",
        identity="tritonguard-a",
        duration_s=15,
    )
    assert await elector.step()
    cluster.proxy.add(
        "PUT", LEASE_PATH, Answer(409, kube_status(409, "Conflict", "the object has been modified"))
    )
    assert await elector.step()
    assert elector.is_leader() and elector.last_error is None
    puts = [s.fault for s in cluster.proxy.seen if s.method == "PUT"]
    assert puts == ["Answer", "forwarded"]


@dataclass
class Clock:
    """A monotonic clock moved by hand."""

    now: float = 1000.0

    def __call__(self) -> float:
        """Return the reading."""
        return self.now


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(
            Answer(
                403,
                kube_status(
                    403, "Forbidden", 'leases.coordination.k8s.io "tritonguard-leader" is forbidden'
                ),
            ),
            id="403",
        ),
        pytest.param(HoldAnswer(TIMEOUT_S + 3.0), id="timeout"),
    ],
)
async def test_a_leader_that_cannot_renew_stops_acting_and_says_why(
    cluster: Cluster, fault: Answer | HoldAnswer
) -> None:
    """The lease calls fail (403, or no answer): the leader acts until 2/3 of the lease, then not.

    The playbook is then skipped by the ``leader`` guard with the API's reason in one line,
    and the Deployment is not scaled. Another replica still has to wait a whole lease.
    """
    clock = Clock()
    store = AuditStore()
    elector = LeaderElector(
        cluster.client,
        store,
        namespace="tritonguard",
        name="tritonguard-leader",
        identity="tritonguard-a",
        duration_s=15,
        monotonic=clock,
    )
    assert await elector.step()
    cluster.proxy.add("*", LEASE_PATH, fault, times=100)
    clock.now += 9.0
    assert await elector.step()  # before the deadline (10 s): still leading
    clock.now += 2.0
    assert not await elector.step()
    why = elector.leader_elsewhere()
    assert why is not None and why.startswith("cannot reach the leader lease") and "\n" not in why
    expected = "HTTP 403" if isinstance(fault, Answer) else "timed out"
    assert expected in why, why
    books = load_playbooks_text(SCALE, "scale.yaml", catalog())
    on = stage(
        books,
        store,
        settings=GuardSettings(dry_run=False),
        env=ExecutorEnv(kube=cluster.client, clock=lambda: 5000.0),
        leader_elsewhere=elector.leader_elsewhere,
    )
    records = await handle(on, incident(at=5000.0, opened_at=4900.0))
    assert [(r.status, r.guard) for r in records] == [("skipped", "leader")]
    assert why in records[0].reason
    assert cluster.replicas() == 2


async def _events(watch: AsyncIterator[PodEvent], count: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for _ in range(count):
        event = await asyncio.wait_for(anext(watch), 15.0)
        out.append((event.type, event.pod.name))
    return out


def cut_then_refuse(proxy: FaultProxy) -> Rule:
    """Cut the first watch after one event, then refuse watches (503) until disarmed.

    The refusals hold the watch away from the server for as long as the test needs to
    change things behind its back; disarming the returned rule lets it back.
    """
    proxy.add("GET", PODS_PATH, CutStream(lines=1), query=("watch",))
    return proxy.add("GET", PODS_PATH, Answer(503, UNAVAILABLE), times=10_000, query=("watch",))


async def test_a_watch_cut_mid_stream_resumes_without_losing_or_repeating_a_change(
    cluster: Cluster,
) -> None:
    """The connection drops in the middle of a watch; pods born meanwhile arrive once each."""
    away = cut_then_refuse(cluster.proxy)
    watch = cluster.client.watch_pods("prod", initial_backoff_s=0.1, max_backoff_s=0.2)
    async with contextlib.aclosing(watch) as events:
        first = await _events(events, 2)  # the initial list
        cluster.kube.add_pod("prod", "born-a", labels={"app": "triton"})
        seen = await _events(events, 1)  # the one event before the cut
        # The watch only runs while someone waits for its next event.
        pending = asyncio.ensure_future(_events(events, 2))
        await until(lambda: bool(cluster.proxy.faulted("Answer")), 10.0)
        cluster.kube.add_pod("prod", "born-b", labels={"app": "triton"})
        cluster.kube.add_pod("prod", "born-c", labels={"app": "triton"})
        away.times = 0
        later = await pending
    assert [t for t, _ in first] == ["ADDED", "ADDED"]
    assert seen + later == [("ADDED", "born-a"), ("ADDED", "born-b"), ("ADDED", "born-c")]
    assert cluster.proxy.faulted("CutStream")


async def test_a_410_after_a_disconnect_relists_and_reports_what_changed_meanwhile(
    cluster: Cluster,
) -> None:
    """A watch resumed after its history was compacted gets 410 Gone: list again and diff.

    A pod deleted and its replacement created while the watch was away come out as
    DELETED and ADDED, each once.
    """
    away = cut_then_refuse(cluster.proxy)
    watch = cluster.client.watch_pods("prod", initial_backoff_s=0.1, max_backoff_s=0.2)
    async with contextlib.aclosing(watch) as events:
        first = {name for _, name in await _events(events, 2)}
        cluster.kube.add_pod("prod", "trigger", labels={"app": "other"})
        await _events(events, 1)
        pending = asyncio.ensure_future(_events(events, 2))
        await until(lambda: bool(cluster.proxy.faulted("Answer")), 10.0)
        gone = sorted(first)[0]
        cluster.kube.delete_pod("prod", gone)  # the Deployment's controller replaces it
        cluster.kube.compact()
        away.times = 0
        changes = await pending
    assert ("DELETED", gone) in changes
    added = [name for kind, name in changes if kind == "ADDED"]
    assert len(added) == 1 and added[0] not in first
    lists = [s for s in cluster.proxy.seen if s.method == "GET" and s.path == PODS_PATH]
    assert len(lists) >= 4  # list, the cut watch, a refused one, the 410 watch, the relist
