"""Two shard daemons against the fake Kubernetes API: each follows only its shard's workloads.

Both daemons are built as ``tritonguard run`` builds them (playbook stage and leader election
through the official client), named as a StatefulSet names its pods, so each takes its shard
index from its ordinal. The pods of two Deployments and a StatefulSet point at real metrics
servers on loopback; Debian's kubectl reads the two Leases from the fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path

from tests import waiting
from tests.fakes.kube import FakeKube
from tests.fixtures_prometheus import MetricsServer
from tests.integration.test_discovery_rollouts import kubectl
from tritonguard.core.engine import Engine
from tritonguard.core.samples import label
from tritonguard.core.shards import shard_of
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import build_service
from tritonguard.settings import Settings

NS = "ml"
HOME = "tritonguard"
CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
INTERVAL_S = 0.5
# Pods as the controllers name them: (pod, owner kind, owner name, workload).
PODS = (
    ("triton-a-7d9f8c6b5-x2k4q", "ReplicaSet", "triton-a-7d9f8c6b5", "triton-a"),
    ("triton-a-7d9f8c6b5-p9wzt", "ReplicaSet", "triton-a-7d9f8c6b5", "triton-a"),
    ("triton-b-5c4d8f9b7-h6mlr", "ReplicaSet", "triton-b-5c4d8f9b7", "triton-b"),
    ("triton-b-5c4d8f9b7-q2vzn", "ReplicaSet", "triton-b-5c4d8f9b7", "triton-b"),
    ("bert-0", "StatefulSet", "bert", "bert"),
    ("bert-1", "StatefulSet", "bert", "bert"),
)
LATE = ("triton-b-5c4d8f9b7-k7fjd", "ReplicaSet", "triton-b-5c4d8f9b7", "triton-b")


def _settings(kubeconfig: Path, tmp_path: Path, identity: str) -> Settings:
    return Settings(
        scrape_interval_s=INTERVAL_S,
        scrape_timeout_s=INTERVAL_S,
        scrape_jitter_s=0.0,
        evaluation_interval_s=0.5,
        listen="127.0.0.1:0",
        shutdown_grace_s=2.0,
        audit_db_path=tmp_path / identity / "audit.sqlite3",
        kube={
            "kubeconfig": kubeconfig,
            "namespace": HOME,
            "leader_election": True,
            "lease_duration_s": 3,
            "identity": identity,
        },
        discovery={"namespaces": [NS], "label_selector": "app=triton"},
        shard={"count": 2},
    )


class Shard:
    """One running shard daemon and every target it was ever given."""

    def __init__(self, settings: Settings) -> None:
        engine = Engine(settings.engine_config())
        self.service = build_service(settings, engine)
        self.ever: set[str] = set()
        self.app = DaemonApp(
            settings,
            engine=engine,
            playbooks=self.service,
            on_targets=lambda ts: self.ever.update(t.name for t in ts),
        )

    def scraping(self) -> set[str]:
        """Return the pods the scrape source polls now."""
        source = self.app.scrape_source
        return set() if source is None else {t.pod for t in source.targets}

    def scraped_ok(self, pods: set[str]) -> bool:
        """Return whether every pod of ``pods`` was scraped successfully."""
        targets = self.app.readiness()[1]["targets"]
        return all(targets.get(f"scrape/{NS}/{p}", {}).get("ok") for p in pods)

    def takes_exactly(self, pods: set[str]) -> bool:
        """Return whether the daemon scrapes exactly ``pods``, each successfully."""
        return self.scraping() == pods and self.scraped_ok(pods)

    def leader(self) -> bool:
        """Return whether this daemon holds its shard's Lease."""
        state = self.service.leadership()
        return state is not None and bool(state["leader"])

    def pods_in_engine(self) -> set[str]:
        """Return the pods whose Triton series reached the engine."""
        series = self.app.engine.store.family("nv_inference_count")
        return {label(s.labels, "pod") for s in series}

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """Return one of the daemon's own metrics."""
        return self.app.registry.get_sample_value(name, labels or {})


@contextlib.asynccontextmanager
async def _running(shard: Shard) -> AsyncIterator[None]:
    task = asyncio.create_task(shard.app.run(install_signals=False))
    try:
        yield
    finally:
        shard.app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)


def _add_pod(fake: FakeKube, pod: tuple[str, str, str, str], server: MetricsServer) -> None:
    name, kind, owner, _ = pod
    port = int(server.host_port.rsplit(":", 1)[1])
    fake.add_pod(
        NS,
        name,
        labels={"app": "triton"},
        ip="127.0.0.1",
        ports={"metrics": port, "http": port},
        owner=(kind, owner),
    )


async def test_two_shards_split_the_pods_by_workload_and_each_holds_its_own_lease(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """Each shard scrapes only its workloads' pods, whole; each is leader on its own Lease."""
    text = CAPTURE.read_text()
    servers = {p[0]: await MetricsServer(render=lambda: text).start() for p in (*PODS, LATE)}
    fake_kube.add_namespace(HOME)
    for rs, deployment in {(p[2], p[3]) for p in PODS if p[1] == "ReplicaSet"}:
        fake_kube.add_replicaset(NS, rs, deployment)
    for pod in PODS:
        _add_pod(fake_kube, pod, servers[pod[0]])
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace=HOME))
    shards = [Shard(_settings(kubeconfig, tmp_path, f"tritonguard-{i}")) for i in range(2)]
    expected = [{p[0] for p in PODS if shard_of(NS, p[3], 2) == i} for i in range(2)]
    # The fixture's workloads land on both shards; otherwise the test would prove nothing.
    assert all(expected), expected
    try:
        async with _running(shards[0]), _running(shards[1]):
            for shard, want in zip(shards, expected, strict=True):
                await waiting.wait_for(
                    functools.partial(shard.takes_exactly, want), 20.0, poll_s=0.05
                )
            await waiting.wait_for(lambda: all(s.leader() for s in shards), 20.0, poll_s=0.05)

            leases = json.loads(await kubectl(kubeconfig, "get", "lease", "-o", "json"))
            holders = {
                item["metadata"]["name"]: item["spec"]["holderIdentity"] for item in leases["items"]
            }
            assert holders == {
                "tritonguard-leader-shard-0": "tritonguard-0",
                "tritonguard-leader-shard-1": "tritonguard-1",
            }

            # A pod of a workload already on shard 1 arrives later: shard 1 takes it.
            _add_pod(fake_kube, LATE, servers[LATE[0]])
            late_shard = shard_of(NS, LATE[3], 2)
            expected[late_shard].add(LATE[0])
            await waiting.wait_for(
                lambda: shards[late_shard].scraping() == expected[late_shard], 20.0, poll_s=0.05
            )
            await waiting.wait_for(
                lambda: shards[late_shard].scraped_ok({LATE[0]}), 20.0, poll_s=0.05
            )
            await asyncio.sleep(3 * INTERVAL_S)

            for i, shard in enumerate(shards):
                others = expected[1 - i]
                assert shard.scraping() == expected[i]
                assert not {name.split("/", 1)[1] for name in shard.ever} & others
                assert shard.pods_in_engine() == expected[i]
                ready = shard.app.readiness()[1]
                assert ready["shard"] == {"index": i, "count": 2}
                assert not any(p in ready["discovery"]["namespaces"][NS]["skipped"] for p in others)
                assert shard.metric("tritonguard_shard", {"index": str(i), "count": "2"}) == 1
                owned = {"source": "scrape", "owner": "this"}
                assert shard.metric("tritonguard_shard_pods", owned) == len(expected[i])
            # Every pod was scraped by someone, and only by the shard that owns it.
            assert all(server.hits > 0 for server in servers.values())
    finally:
        for shard in shards:
            shard.service.store.close()
        for server in servers.values():
            await server.stop()
