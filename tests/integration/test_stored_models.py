"""The daemon learns served models from series its scrapes read straight into the store.

Those scrapes hand on no samples, so the daemon reads the store's request counters instead,
and only when that could name a model it has not noted: after series came or went, or after
discovery changed the targets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from tests.fakes.kube import FakeKube
from tests.fixtures_prometheus import MetricsServer
from tritonguard.core.pod_targets import PodTarget
from tritonguard.core.series_index import FamilyIndex
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import DiscoverySettings, KubeSettings, Settings, TargetSettings


def _exposition(models: list[str]) -> str:
    lines = ["# TYPE nv_inference_request_success counter"]
    lines += [f'nv_inference_request_success{{model="{m}",version="1"}} 10' for m in models]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _scans(app: DaemonApp) -> Iterator[list[str]]:
    """Record which families the store is asked to index while the context is open."""
    asked: list[str] = []
    real = app.engine.store.index

    def index(name: str) -> FamilyIndex:
        asked.append(name)
        return real(name)

    with mock.patch.object(app.engine.store, "index", side_effect=index):
        yield asked


async def test_a_model_served_later_is_noted_and_steady_polls_skip_the_scan() -> None:
    """A new model's series makes the next poll read the store; unchanged series do not.

    The first poll stores resnet's counter and notes resnet; a second poll of the same
    exposition creates no series and leaves the store unread; a poll that brings bert's
    counter reads it and notes bert beside resnet.
    """
    served = ["resnet"]
    server = await MetricsServer(render=lambda: _exposition(served)).start()
    target = TargetSettings(name="a", metrics_url=server.url, triton_url="http://127.0.0.1:9")
    app = DaemonApp(Settings(targets=[target], listen="127.0.0.1:0"))
    [source] = app.sources
    try:
        assert (await app.poll(source)).stored > 0
        assert app._models == {"a": {"resnet"}}
        with _scans(app) as asked:
            assert (await app.poll(source)).stored > 0
            assert "nv_inference_request_success" not in asked
            served.append("bert")
            await app.poll(source)
            assert "nv_inference_request_success" in asked
        assert app._models == {"a": {"resnet", "bert"}}
    finally:
        await app._close_clients()
        await server.stop()


async def test_a_target_discovered_again_gets_its_models_back_from_series_already_stored(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """A pod dropped and found again between two polls has its models noted anew.

    Dropping the target forgets its models; its series stay in the store, so no series is
    created when it comes back, and the next poll must read the store all the same.
    """
    server = await MetricsServer(render=lambda: _exposition(["resnet"])).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace="prod"))
    settings = Settings(
        discovery=DiscoverySettings(namespaces=["prod"]),
        kube=KubeSettings(kubeconfig=kubeconfig),
        listen="127.0.0.1:0",
    )
    app = DaemonApp(settings)
    pod = PodTarget("prod", "triton-0", "uid-0", "node-0", server.url, "http://127.0.0.1:9")
    [source] = app.sources
    try:
        app._use_discovered([pod])
        await app.poll(source)
        assert app._models == {"prod/triton-0": {"resnet"}}
        app._use_discovered([])
        app._use_discovered([pod])
        assert app._models == {}
        assert (await app.poll(source)).stored > 0
        assert app._models == {"prod/triton-0": {"resnet"}}
    finally:
        await app._close_clients()
        await server.stop()
