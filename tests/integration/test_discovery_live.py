"""Discovery end to end: two real Tritons registered as pods in the fake API, and pod churn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests import waiting
from tests.fakes.kube import FakeKube
from tritonguard.core.findings import Subject
from tritonguard.core.samples import label
from tritonguard.lab.repository import ModelSpec, write_model
from tritonguard.lab.triton_server import TritonServer
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import TritonDirectory
from tritonguard.settings import Settings

NS = "ml"
MODEL = "disc_m"
INTERVAL_S = 1.0


def _pod_for(fake: FakeKube, name: str, triton: TritonServer, owner: tuple[str, str]) -> None:
    fake.add_pod(
        NS,
        name,
        labels={"app": "triton"},
        ip="127.0.0.1",
        ports={"http": triton.http_port, "metrics": triton.metrics_port},
        owner=owner,
        node="gpu-node-2",
    )


def _scraped_ok(app: DaemonApp, name: str) -> bool:
    target = app.readiness()[1]["targets"].get(f"scrape/{name}")
    return bool(target and target["ok"])


def _urls(app: DaemonApp) -> set[str]:
    source = app.scrape_source
    assert source is not None
    return {t.metrics_url for t in source.targets}


@pytest.mark.live
async def test_two_tritons_found_as_pods_scraped_reached_and_churn_followed(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """Two Triton pods are found, scraped with owner labels and reached; churn is followed.

    A Deployment's pod (through its ReplicaSet) and a StatefulSet's pod point at two real
    Tritons. Both are scraped with namespace, pod, node and owner labels, their model configs
    are read, and actions find their HTTP API. Then the StatefulSet pod is deleted and made
    again at another port (another Triton): the old endpoint leaves the scrape within one
    interval, the new one is scraped and is where actions go.
    """
    repo = tmp_path / "repo"
    write_model(repo, ModelSpec(name=MODEL))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace=NS))
    fake_kube.add_replicaset(NS, "triton-a-5f7c9", deployment="triton-a")
    settings = Settings(
        scrape_interval_s=INTERVAL_S,
        scrape_timeout_s=INTERVAL_S,
        scrape_jitter_s=0.0,
        evaluation_interval_s=1.0,
        listen="127.0.0.1:0",
        shutdown_grace_s=2.0,
        kube={"kubeconfig": kubeconfig},
        discovery={"namespaces": [NS], "label_selector": "app=triton"},
    )
    directory = TritonDirectory()
    app = DaemonApp(settings, on_targets=directory.use_targets)
    async with TritonServer(repo) as a, TritonServer(repo) as b, TritonServer(repo) as c:
        _pod_for(fake_kube, "triton-a-5f7c9-xk2p1", a, ("ReplicaSet", "triton-a-5f7c9"))
        _pod_for(fake_kube, "triton-b-0", b, ("StatefulSet", "triton-b"))
        task = asyncio.create_task(app.run(install_signals=False))
        try:
            await waiting.wait_for(
                lambda: (
                    _scraped_ok(app, "ml/triton-a-5f7c9-xk2p1")
                    and _scraped_ok(app, "ml/triton-b-0")
                ),
                20.0,
            )
            # The daemon's scrapes go straight into its store, labelled as samples would be.
            by_pod = {
                label(s.labels, "pod"): dict(s.labels)
                for s in app.engine.store.family("nv_inference_count")
            }
            assert (
                by_pod["triton-a-5f7c9-xk2p1"]
                | {
                    "namespace": NS,
                    "node": "gpu-node-2",
                    "replicaset": "triton-a-5f7c9",
                    "deployment": "triton-a",
                }
                == by_pod["triton-a-5f7c9-xk2p1"]
            )
            assert by_pod["triton-b-0"]["statefulset"] == "triton-b"
            assert "deployment" not in by_pod["triton-b-0"]

            # Model configs are read, and actions reach each pod, through discovered endpoints.
            await waiting.wait_for(
                lambda: app.engine.model_config((NS, "triton-b-0", MODEL)) is not None, 20.0
            )
            subject_b = Subject(namespace=NS, model=MODEL, pod="triton-b-0")
            client = directory.for_subject(subject_b)
            assert client is not None
            assert (await client.model_config(MODEL))["name"] == MODEL

            # Churn: the StatefulSet pod is deleted and comes back at another address.
            old_url = b.metrics_url
            fake_kube.delete_pod(NS, "triton-b-0")
            gone_after = await waiting.wait_for(lambda: old_url not in _urls(app), timeout_s=5.0)
            assert gone_after < INTERVAL_S
            _pod_for(fake_kube, "triton-b-0", c, ("StatefulSet", "triton-b"))
            await waiting.wait_for(lambda: c.metrics_url in _urls(app), timeout_s=INTERVAL_S)
            await waiting.wait_for(
                lambda: _scraped_ok(app, "ml/triton-b-0"), timeout_s=3 * INTERVAL_S
            )
            moved = directory.for_subject(subject_b)
            assert moved is not None and moved is not client
            assert (await moved.model_config(MODEL))["name"] == MODEL
            assert _urls(app) == {a.metrics_url, c.metrics_url}
        finally:
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=15)
            await directory.close()
