"""The daemon in-process, three pods with the same fault: one Slack thread, one API entry.

Three synthetic Tritons serve model ``ranker`` on pods ranker-0..2 of namespace ``search``,
each stuck in its batcher. The daemon scrapes them, diagnoses each pod, and tells the fleet
group once: slack_sdk posts one root to the fake Slack, listing the three pods, and
``/api/incidents`` holds one entry with the group.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.fixtures_prometheus import MetricsServer
from tests.integration.test_daemon_playbooks import (
    FAST,
    daemon,
    decisions,
    running,
    settings,
    slack_of,
    wait_for,
)
from tests.synthetic_triton import BatchingTriton
from tritonguard.settings import KubeSettings, TargetSettings

PODS = ["ranker-0", "ranker-1", "ranker-2"]
# The group's story is told while its incidents stay open: at 0.25 s scrapes on loaded cores a
# 1.5 s rate window can read a pod as recovered for a second, and a pod whose incident resolves
# and reopens starts a second group, which is not what these tests are about.
HELD_OPEN = FAST.model_copy(update={"resolve_after_s": 60.0})


@pytest.fixture
async def servers() -> AsyncIterator[list[MetricsServer]]:
    """Serve three expositions of the model stuck in its batcher, one per pod."""
    started = [await MetricsServer(render=BatchingTriton().render).start() for _ in PODS]
    try:
        yield started
    finally:
        for server in started:
            await server.stop()


async def test_three_pods_with_one_cause_post_one_thread_and_list_once(
    tmp_path: Path, servers: list[MetricsServer], fake_slack: FakeSlack
) -> None:
    """One root names all three pods; the other pods' notifications are skipped as grouped."""
    targets = [
        TargetSettings(name=pod, metrics_url=server.url, namespace="search", pod=pod)
        for pod, server in zip(PODS, servers, strict=True)
    ]
    s = settings(
        tmp_path,
        servers[0],
        slack=slack_of(fake_slack),
        thresholds=HELD_OPEN,
        dry_run=False,
        targets=targets,
    )
    app, runner = daemon(s)

    def told() -> bool:
        done = decisions(runner)
        return (
            sum(d.status == "ran" for d in done) == 1
            and sum(d.guard == "grouped" for d in done) == len(PODS) - 1
        )

    def rooted() -> bool:
        roots = fake_slack.roots_in("tritonguard-alerts")
        return bool(roots) and "on 3 of 3 pods" in roots[-1].text

    async with running(app) as base, aiohttp.ClientSession() as http:
        await wait_for(told, timeout_s=30.0)
        await wait_for(rooted, timeout_s=10.0)
        async with http.get(f"{base}/api/incidents") as resp:
            body = await resp.json()
        async with http.get(f"{base}/api/incidents/history") as resp:
            history = await resp.json()
        done = decisions(runner)
    [entry] = body["incidents"]
    # The trail keeps each pod's incident (the ids tests take), each naming its group.
    assert sorted(h["pod"] for h in history["incidents"]) == PODS
    [lead] = {h["group"]["lead"] for h in history["incidents"]}
    assert lead in {h["incident_id"] for h in history["incidents"]}
    assert {h["group"]["count"] for h in history["incidents"]} == {3}
    assert (entry["cause"], entry["model"]) == ("batching_delay", "ranker")
    assert sorted(entry["group"]["pods"]) == PODS and entry["group"]["count"] == 3
    assert [a["action"] for a in entry["actions"]] == ["slack.post"]
    [root] = fake_slack.roots_in("tritonguard-alerts")
    assert "batching_delay on search/ranker on 3 of 3 pods" in root.text
    assert all(pod in str(root.blocks) for pod in PODS)
    ran = [d.subject for d in done if d.status == "ran"]
    grouped = [d.subject for d in done if d.guard == "grouped"]
    assert sorted(ran + grouped) == [f"search/{pod}/ranker" for pod in PODS]


SCALE = """
name: scale-the-batcher-out
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: slack.post
    params: {channel: "#tritonguard-alerts"}
  - action: kubernetes.scale
    params: {add: 1}
"""


async def test_three_pods_of_one_deployment_scale_it_once(
    tmp_path: Path, servers: list[MetricsServer], fake_slack: FakeSlack, fake_kube: FakeKube
) -> None:
    """The shared Deployment gains one replica for the three pods' incidents, not three.

    The targets are configured, not discovered, so the engine does not know the pods'
    owner and each pod runs the playbook; the others wait until the first pod's raise is on
    file, and their scale is then skipped as covered by it. The posts share one thread.
    """
    fake_kube.add_namespace("search")
    fake_kube.add_deployment("search", "ranker", replicas=2)
    fake_kube.add_replicaset("search", "ranker-5d9c7b", deployment="ranker")
    for pod in PODS:
        fake_kube.add_pod("search", pod, owner=("ReplicaSet", "ranker-5d9c7b"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig())
    targets = [
        TargetSettings(name=pod, metrics_url=server.url, namespace="search", pod=pod)
        for pod, server in zip(PODS, servers, strict=True)
    ]
    s = settings(
        tmp_path,
        servers[0],
        slack=slack_of(fake_slack),
        thresholds=HELD_OPEN,
        dry_run=False,
        targets=targets,
        kube=KubeSettings(kubeconfig=kubeconfig),
    )
    (tmp_path / "books" / "notify.yaml").write_text(SCALE)
    app, runner = daemon(s)

    def settled() -> bool:
        scales = [d for d in decisions(runner) if d.action in ("kubernetes.scale", "*")]
        return len(scales) >= len(PODS)

    async with running(app):
        await wait_for(settled, timeout_s=30.0)
        done = decisions(runner)
    deployment = fake_kube.get_object("Deployment", "search", "ranker")
    assert deployment is not None and deployment["spec"]["replicas"] == 3
    scales = sorted((d.status, d.guard) for d in done if d.action == "kubernetes.scale")
    assert scales == [("ran", ""), ("skipped", "covered"), ("skipped", "covered")]
    assert len(fake_slack.roots_in("tritonguard-alerts")) == 1
