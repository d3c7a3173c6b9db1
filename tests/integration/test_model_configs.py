"""Model configs read from each Triton are kept under the subjects that Triton's metrics make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.fixtures_prometheus import MetricsServer
from tritonguard.core.findings import Subject
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings

EXPOSITION = """# TYPE nv_inference_request_success counter
nv_inference_request_success{model="resnet",version="1"} 10
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="resnet",version="1"} 10
"""


async def test_two_tritons_outside_kubernetes_keep_their_own_model_configs() -> None:
    """Targets without pods are told apart by instance, for their configs as for their metrics.

    Both serve ``resnet``; one batches for 100 ms, the other does not batch. Keyed by pod
    alone (empty for both), the second config used to overwrite the first.
    """
    a = await MetricsServer(render=lambda: EXPOSITION).start()
    b = await MetricsServer(render=lambda: EXPOSITION).start()
    configs: dict[str, dict[str, Any]] = {
        "a": {"dynamic_batching": {"max_queue_delay_microseconds": "100000"}},
        "b": {"max_batch_size": 0},
    }

    async def fetch(target: TargetSettings, model: str) -> Mapping[str, Any] | None:
        return configs[target.name]

    try:
        settings = Settings(
            targets=[
                TargetSettings(name=n, metrics_url=s.url, triton_url="http://127.0.0.1:9")
                for n, s in (("a", a), ("b", b))
            ],
            listen="127.0.0.1:0",
        )
        app = DaemonApp(settings, config_fetcher=fetch)
        for source in app.sources:
            await app.poll(source)
        await app._refresh_configs()  # the config loop's body, once, without the loop
        seen_a = app.engine.model_config(("", a.host_port, "resnet"))
        seen_b = app.engine.model_config(("", b.host_port, "resnet"))
        assert seen_a is not None and seen_a.max_queue_delay_us == 100_000
        assert seen_b is not None and not seen_b.dynamic_batching
        assert app.engine.features(Subject("", "resnet", a.host_port), app.clock()) is not None
        await app.run_once()
    finally:
        await a.stop()
        await b.stop()
