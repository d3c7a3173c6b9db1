"""Discovery through the real client against the fake API: rollouts, all namespaces, stale watches.

A Deployment's template is patched with ``kubectl``; the fake's controller makes the next
ReplicaSet revision and replaces the pod, and discovery names that revision and its template
diff for the new pod. A StatefulSet pod names its ControllerRevision. ``namespaces: ["*"]``
follows pods of every namespace with one watch. A namespace whose watch keeps failing past the
bound is stale, and its endpoints are withheld from actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests import waiting
from tests.fakes.kube import FakeKube
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.core.pod_targets import PodTarget
from tritonguard.core.rollout_changes import RolloutChange
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.pod_discovery import PodDiscovery
from tritonguard.settings import DiscoverySettings, Settings, TargetSettings

NS = "ml"
KUBECTL = "kubectl"


class Seen:
    """What discovery told its callbacks."""

    def __init__(self) -> None:
        self.targets: list[PodTarget] = []
        self.rollouts: dict[tuple[str, str], RolloutChange] = {}

    def on_change(self, targets: list[PodTarget]) -> None:
        """Keep the current targets."""
        self.targets = targets

    def on_rollout(self, namespace: str, pod: str, rollout: RolloutChange) -> None:
        """Keep each pod's rollout."""
        self.rollouts[(namespace, pod)] = rollout


@contextlib.asynccontextmanager
async def following(
    fake: FakeKube, namespaces: list[str], **kw: Any
) -> AsyncIterator[tuple[PodDiscovery, Seen]]:
    """Run discovery over ``namespaces`` with numbered ports (pods of the fake declare none)."""
    kube = KubernetesClient.for_host(fake.url, timeout_s=2.0)
    seen = Seen()
    settings = DiscoverySettings(
        namespaces=namespaces, label_selector="app=triton", metrics_port="8002", http_port="8000"
    )
    discovery = PodDiscovery(
        kube,
        settings,
        on_change=seen.on_change,
        on_rollout=seen.on_rollout,
        max_backoff_s=0.2,
        **kw,
    )
    task = asyncio.create_task(discovery.run())
    try:
        yield discovery, seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        kube.close()


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """Run Debian's kubectl against the fake (served by this event loop); return its output."""
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_patched_deployment_is_a_new_revision_named_for_its_new_pod(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """A kubectl patch of image and env: the new pod runs revision 2, diffed against 1."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace=NS))
    fake_kube.add_deployment(NS, "triton-a", replicas=1, labels={"app": "triton"})
    async with following(fake_kube, [NS]) as (_, seen):
        await waiting.wait_for(lambda: len(seen.rollouts) == 1, 5.0)
        [(first_pod, first)] = [(k[1], r) for k, r in seen.rollouts.items()]
        assert (first.revision, first.previous, first.workload) == (1, None, "triton-a")
        patch = [
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "t:2"},
            {"op": "add", "path": "/spec/template/spec/containers/0/env", "value": []},
            {
                "op": "add",
                "path": "/spec/template/spec/containers/0/env/-",
                "value": {"name": "TRITON_LOG_VERBOSE", "value": "1"},
            },
        ]
        await kubectl(
            kubeconfig,
            "patch",
            "deployment",
            "triton-a",
            "--type=json",
            "-p",
            json.dumps(patch),
        )
        await waiting.wait_for(lambda: len(seen.rollouts) == 2, 5.0)
        [(pod, rollout)] = [(k[1], r) for k, r in seen.rollouts.items() if k[1] != first_pod]
        assert [t.pod for t in seen.targets] == [pod]
        assert (rollout.kind, rollout.revision, rollout.previous) == ("Deployment", 2, 1)
        assert {c.path: (c.old, c.new) for c in rollout.changes} == {
            "containers[main].image": (first_image(fake_kube), "t:2"),
            "containers[main].env.TRITON_LOG_VERBOSE": (None, "1"),
        }
        rs = await kubectl(kubeconfig, "get", "rs", "-o", "json")
        revisions = sorted(
            i["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            for i in json.loads(rs)["items"]
        )
        assert revisions == ["1", "2"]


def first_image(fake: FakeKube) -> str:
    """Return the image of revision 1's template, as the fake's controller wrote it."""
    [rs] = [
        r
        for r in fake.list_objects("ReplicaSet", NS)
        if r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    ]
    return str(rs["spec"]["template"]["spec"]["containers"][0]["image"])


def _pod_template(image: str, args: list[str]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "triton", "image": image, "args": args}]}}


async def test_a_statefulset_pod_names_its_controller_revision_and_all_namespaces_are_followed(
    fake_kube: FakeKube,
) -> None:
    """``namespaces: ["*"]``: pods of two namespaces; the StatefulSet pod's revision is diffed."""
    fake_kube.add_controller_revision(
        "ml", "triton-b-6c5d", "triton-b", 3, _pod_template("t:1", ["--poll"])
    )
    fake_kube.add_controller_revision(
        "ml", "triton-b-7f8e", "triton-b", 4, _pod_template("t:1", ["--explicit"])
    )
    fake_kube.add_pod(
        "ml",
        "triton-b-0",
        labels={"app": "triton", "controller-revision-hash": "triton-b-7f8e"},
        ip="10.0.0.5",
        owner=("StatefulSet", "triton-b"),
    )
    fake_kube.add_pod("search", "ranker-0", labels={"app": "triton"}, ip="10.0.0.6")
    async with following(fake_kube, ["*"]) as (discovery, seen):
        await waiting.wait_for(lambda: len(seen.targets) == 2 and bool(seen.rollouts), 5.0)
        assert [t.name for t in seen.targets] == ["ml/triton-b-0", "search/ranker-0"]
        rollout = seen.rollouts[("ml", "triton-b-0")]
        assert (rollout.kind, rollout.revision, rollout.previous) == ("StatefulSet", 4, 3)
        assert rollout.diff_text() == "containers[triton].args: --poll → --explicit"
        assert discovery.ready() and discovery.status()["namespaces"]["*"]["targets"] == 2
        fake_kube.delete_pod("search", "ranker-0")
        await waiting.wait_for(lambda: [t.name for t in seen.targets] == ["ml/triton-b-0"], 5.0)


async def test_a_watch_failing_past_the_bound_withholds_its_endpoints_from_actions(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """While the API fails past ``stale_after_s`` actions get no endpoint there, and say why.

    The scrape keeps its targets (their series go stale by themselves); the endpoints actions
    would use are withheld until the watch is current again, and discovery tells why.
    """
    fake_kube.add_pod("ml", "triton-0", labels={"app": "triton"}, ip="127.0.0.1")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace=NS))
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    settings = Settings(
        listen="127.0.0.1:0",
        scrape_interval_s=0.5,
        scrape_timeout_s=0.5,
        kube={"kubeconfig": kubeconfig},
        discovery={
            "namespaces": [NS],
            "metrics_port": "8002",
            "http_port": "8000",
            "stale_after_s": 0.5,
            "watch_timeout_s": 5,
            "triton_access_token_file": token,
        },
    )
    handed: list[list[TargetSettings]] = []
    app = DaemonApp(settings, on_targets=handed.append)
    assert app.discovery is not None
    task = asyncio.create_task(app.discovery.run())
    try:
        await waiting.wait_for(lambda: bool(handed and handed[-1]), 5.0)
        [target] = handed[-1]
        assert target.access_token is not None
        assert target.access_token.get_secret_value() == "s3cret"
        await fake_kube.stop()  # the API server goes away, and with it the watch
        await waiting.wait_for(lambda: app.discovery is not None and not app.discovery.ready(), 5.0)
        await waiting.wait_for(lambda: handed[-1] == [], 5.0)
        why = app.discovery.stale(NS)
        assert why is not None and "has been failing for" in why and "unreachable" in why
        assert [t.name for t in app.known_targets()] == ["ml/triton-0"]  # still scraped
        await fake_kube.start()  # back on the same port
        # The watch comes back on discovery's next retry, which backs off (doubling, up to
        # 30 s) while the API is away: wait out the longest backoff, not a guess at it.
        await waiting.wait_for(lambda: bool(handed[-1]), timeout_s=40.0)
        assert app.discovery.stale(NS) is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await app._close_clients()
