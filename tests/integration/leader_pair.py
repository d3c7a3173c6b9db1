"""Two tritonguard replicas electing a leader on one Lease of the fake Kubernetes API, for tests.

A replica comes in two builds. ``replica`` (``replica_pair`` for two on one playbook) wires
the parts (the real Kubernetes client, an elector, an in-memory audit store, a playbook
stage) as ``build_service`` does, with clocks the test moves by hand, so lease expiry needs
no sleeping. ``service_pair`` builds whole
services as ``tritonguard run`` does, each on its own audit file, with Slack's real clients
against the fake Slack. Either way ``elect`` has the first take the Lease and the others
find it held, which is where every test of a leader change starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration import test_slack_approvals as approvals_flow
from tests.integration.playbook_fakes import seed_triton_deployment
from tests.playbook_harness import StaticFeatures, stage
from tritonguard.actions.registry import catalog
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_service import PlaybookService
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.settings import KubeSettings

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


@contextlib.asynccontextmanager
async def lease_api() -> AsyncIterator[FakeKube]:
    """Run a fake API server with the Lease's namespace and Deployment prod/triton (2 replicas)."""
    async with FakeKube() as server:
        server.add_namespace(NS)
        yield seed_triton_deployment(server)


@dataclass
class Clock:
    """A monotonic clock the test advances by hand, so lease expiry needs no sleeping."""

    now: float = 1000.0

    def __call__(self) -> float:
        """Return the current reading."""
        return self.now


@dataclass
class Replica:
    """One daemon replica: its own API client, clock, audit store, elector and playbook stage.

    Used as a context manager, it closes its API client and store on leaving.
    """

    name: str
    kube: KubernetesClient
    clock: Clock
    store: AuditStore
    elector: LeaderElector
    playbooks: PlaybookStage

    def close(self) -> None:
        """Release the API client's connections and the audit store."""
        self.kube.close()
        self.store.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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


@contextlib.contextmanager
def replica_pair(
    api: FakeKube,
    slack: FakeSlack,
    *,
    playbook: str = SCALE,
    held: asyncio.Event | None = None,
    features_a: StaticFeatures | None = None,
    features_b: StaticFeatures | None = None,
) -> Iterator[tuple[Replica, Replica]]:
    """Build replicas ``tritonguard-a`` and ``tritonguard-b`` on ``playbook``; close both after.

    ``held`` holds a's verify waits until it is set; neither has stepped its elector yet.
    """
    with (
        replica(
            "tritonguard-a", api, slack, playbook=playbook, features=features_a, sleep=held
        ) as a,
        replica("tritonguard-b", api, slack, playbook=playbook, features=features_b) as b,
    ):
        yield a, b


async def elect(leader: LeaderElector, *followers: LeaderElector) -> None:
    """Have ``leader`` take the Lease, then each of ``followers`` find it held."""
    assert await leader.step()
    for follower in followers:
        assert not await follower.step()


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


def service_replica(
    tmp_path: Path,
    name: str,
    slack: FakeSlack,
    kube: FakeKube,
    clock: approvals_flow.Clock,
    *,
    playbook: str | None = None,
) -> PlaybookService:
    """Build replica ``name`` as ``tritonguard run`` does, on its own audit file, electing.

    Its playbook is the approval flow's scale-with-approval unless ``playbook`` is given.
    """
    (tmp_path / name).mkdir()
    s = approvals_flow.settings(tmp_path / name, slack, kube)
    if playbook is not None:
        (tmp_path / name / "books" / "scale.yaml").write_text(playbook)
    s = s.model_copy(
        update={
            "kube": KubeSettings(
                kubeconfig=s.kube.kubeconfig, leader_election=True, identity=f"tritonguard-{name}"
            )
        }
    )
    return approvals_flow.service_of(s, clock)


@contextlib.asynccontextmanager
async def service_pair(
    tmp_path: Path,
    slack: FakeSlack,
    kube: FakeKube,
    clock: approvals_flow.Clock,
    *,
    playbook: str | None = None,
) -> AsyncIterator[tuple[PlaybookService, PlaybookService]]:
    """Run services ``a`` and ``b`` on the shared Lease, ``a`` leading; close both after."""
    a = service_replica(tmp_path, "a", slack, kube, clock, playbook=playbook)
    try:
        b = service_replica(tmp_path, "b", slack, kube, clock, playbook=playbook)
        try:
            assert a.elector is not None and b.elector is not None
            await elect(a.elector, b.elector)
            yield a, b
        finally:
            await b.close()
    finally:
        await a.close()
