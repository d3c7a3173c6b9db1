"""Features: queue/compute split, busy instances, exporter joins, and unknown-not-zero."""

from __future__ import annotations

from tests.unit.synthetic import START, Phase, gauge, notation, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.features import FeatureReader, FeatureSet
from tritonguard.core.findings import Subject

IV = 5.0
SUBJECT = Subject("prod", "resnet", "triton-0")


def features(series: dict[str, str], n: int = 12) -> FeatureSet:
    """Features of the test subject at the last sample."""
    engine = Engine()
    engine.ingest(samples_of(series, interval=IV), START)
    f = engine.features(SUBJECT, START + n * IV)
    assert f is not None
    return f


def test_queue_and_compute_split_and_busy_instances() -> None:
    """20 req/s, 5 ms queue, 20 ms compute in batches of 2: shares, batch and busy ratio."""
    f = features(triton_model([Phase(12, rps=20, queue_ms=5, infer_ms=19.8, batch=2)], interval=IV))
    assert f.request_rate == 20
    assert f.mean_latency_us is not None and abs(f.mean_latency_us - 25_000) < 1
    assert f.queue_share is not None and abs(f.queue_share - 0.2) < 1e-9
    assert f.avg_batch == 2
    # 10 executions/s of 20 ms each keep 0.2 instances busy.
    assert f.busy_instances is not None and abs(f.busy_instances - 0.2) < 1e-9


def test_missing_exporters_are_unknown_not_zero() -> None:
    """Without DCGM, cAdvisor or node-exporter the signals are None, never 0."""
    f = features(triton_model([Phase(12, rps=5)], interval=IV))
    assert f.gpu_util is None and f.container_cpu_cores is None and f.node_cpu_busy is None
    assert f.throttled_ratio is None and f.pcie_rx_bps is None


def test_dcgm_joins_on_exported_pod() -> None:
    """DCGM's pod mapping relabelled by Prometheus (exported_pod) joins with Triton's pod."""
    series = triton_model([Phase(12, rps=5)], interval=IV)
    series[
        'DCGM_FI_DEV_GPU_UTIL{namespace="gpu-operator",pod="dcgm-x",'
        'exported_namespace="prod",exported_pod="triton-0",gpu="0"}'
    ] = gauge([(87, 13)])
    assert features(series).gpu_util == 0.87


def test_dcgm_without_pod_mapping_joins_the_triton_on_its_host() -> None:
    """Outside Kubernetes DCGM labels only its host: its GPUs belong to the Triton on that host."""
    engine = Engine()
    sel = 'model="resnet",version="1",instance="10.0.0.7:8002"'
    series = {
        k.replace('namespace="prod",pod="triton-0"', sel.split(",", 2)[2]): v
        for k, v in triton_model([Phase(12, rps=5)], interval=IV).items()
    }
    series['DCGM_FI_DEV_GPU_UTIL{instance="10.0.0.7:9400",Hostname="gpu-1",gpu="0"}'] = gauge(
        [(64, 13)]
    )
    series['DCGM_FI_DEV_GPU_UTIL{instance="10.0.0.8:9400",Hostname="gpu-2",gpu="0"}'] = gauge(
        [(5, 13)]
    )
    series['DCGM_FI_PROF_PCIE_RX_BYTES{instance="10.0.0.7:9400",Hostname="gpu-1",gpu="0"}'] = gauge(
        [(2_000_000, 13)]
    )
    engine.ingest(samples_of(series, interval=IV), START)
    f = engine.features(Subject("", "resnet", "10.0.0.7:8002"), START + 12 * IV)
    assert f is not None
    assert f.gpu_util == 0.64 and f.pcie_rx_bps == 2_000_000


def test_dcgm_that_maps_pods_gives_a_pod_without_a_gpu_none() -> None:
    """When DCGM maps GPUs to pods and none is this pod's, GPU signals stay unknown."""
    series = triton_model([Phase(12, rps=5)], interval=IV)
    series['DCGM_FI_DEV_GPU_UTIL{namespace="prod",pod="other-0",gpu="0"}'] = gauge([(90, 13)])
    series['DCGM_FI_DEV_GPU_UTIL{namespace="",pod="",gpu="1"}'] = gauge([(70, 13)])
    assert features(series).gpu_util is None


def _on_a_busy_node() -> dict[str, str]:
    """Return the test subject's series on node gpu-1 (10.0.0.7), whose one CPU is 80 % busy."""
    series = triton_model([Phase(12, rps=5)], interval=IV)
    series['kube_pod_info{namespace="prod",pod="triton-0",node="gpu-1",host_ip="10.0.0.7"}'] = (
        gauge([(1, 13)])
    )
    series['node_cpu_seconds_total{instance="10.0.0.7:9100",cpu="0",mode="idle"}'] = notation(
        [(1.0, 12)]
    )
    series['node_cpu_seconds_total{instance="10.0.0.7:9100",cpu="0",mode="user"}'] = notation(
        [(4.0, 12)]
    )
    return series


def test_node_cpu_joins_through_kube_pod_info_host_ip() -> None:
    """node-exporter's instance (IP:port) is matched to the pod's node by host_ip."""
    series = _on_a_busy_node()
    series['node_cpu_seconds_total{instance="10.0.0.8:9100",cpu="0",mode="idle"}'] = notation(
        [(5.0, 12)]
    )
    f = features(series)
    assert f.node_cpu_busy is not None and abs(f.node_cpu_busy - 0.8) < 1e-9


def test_the_node_index_lasts_while_node_exporters_series_stay_the_same() -> None:
    """Readers of later evaluations share node-exporter's index until a series joins.

    A daemon evaluates many times an interval; the index by node is built once while the
    family is unchanged, and built again (with the new node's CPUs) when a series joins.
    """
    engine = Engine()
    engine.ingest(samples_of(_on_a_busy_node(), interval=IV), START)
    key = ("prod", "triton-0", "resnet")
    now = START + 12 * IV
    first = FeatureReader(engine.store, engine.t, now).compute(key).node_cpu_busy
    index = engine.store.index("node_cpu_seconds_total")
    held = index.derived
    assert held is not None and first is not None and abs(first - 0.8) < 1e-9
    FeatureReader(engine.store, engine.t, now).compute(key)
    assert index.derived is held
    joined = {
        'node_cpu_seconds_total{instance="10.0.0.7:9100",cpu="1",mode="idle"}': notation(
            [(5.0, 12)]
        )
    }
    engine.ingest(samples_of(joined, interval=IV), START)
    again = FeatureReader(engine.store, engine.t, now).compute(key).node_cpu_busy
    assert index.derived is not held and index.derived is not None
    assert again is not None and abs(again - 0.4) < 1e-9


def test_cadvisor_throttling_and_quota() -> None:
    """CPU use against the quota and the throttled share of CFS periods."""
    series = triton_model([Phase(12, rps=5)], interval=IV)
    sel = 'namespace="prod",pod="triton-0",container="triton"'
    series[f"container_cpu_usage_seconds_total{{{sel}}}"] = notation([(1.5 * IV, 12)])
    series['container_cpu_usage_seconds_total{namespace="prod",pod="triton-0",container=""}'] = (
        notation([(9 * IV, 12)])
    )
    series[f"container_spec_cpu_quota{{{sel}}}"] = gauge([(200_000, 13)])
    series[f"container_cpu_cfs_periods_total{{{sel}}}"] = notation([(50, 12)])
    series[f"container_cpu_cfs_throttled_periods_total{{{sel}}}"] = notation([(10, 12)])
    f = features(series)
    assert (
        f.container_cpu_cores == 1.5
    )  # the pod-level aggregate (container="") is not double counted
    assert f.cpu_quota_cores == 2.0 and f.container_cpu_saturation == 0.75
    assert f.throttled_ratio == 0.2


def test_stale_subject_is_not_fresh() -> None:
    """Data older than the staleness limit makes the subject unusable for actions."""
    engine = Engine()
    engine.ingest(samples_of(triton_model([Phase(12, rps=5)], interval=IV), interval=IV), START)
    assert engine.is_fresh(SUBJECT, START + 12 * IV)
    assert not engine.is_fresh(SUBJECT, START + 12 * IV + 300)
    assert engine.feature_value(SUBJECT, "request_rate", START + 12 * IV + 300) is None


def _ingress(series: dict[str, str], ingress: str, status: str, per_scrape: float) -> None:
    """Add ingress-nginx request counters for one ingress and status."""
    sel = f'namespace="prod",ingress="{ingress}",service="{ingress}",status="{status}"'
    series[f"nginx_ingress_controller_requests{{{sel}}}"] = notation([(per_scrape, 12)])


def test_ingress_counters_join_the_model_they_serve_not_the_whole_namespace() -> None:
    """Another model's 504s in the same namespace are not this model's timeouts.

    resnet's ingress answers 200s only; bert's times out. Joined on the namespace, resnet
    used to get bert's 504s. An ingress naming no model of ours is no evidence at all.
    """
    series = triton_model([Phase(12, rps=5)], interval=IV)
    _ingress(series, "resnet", "200", 5 * IV)
    _ingress(series, "bert", "504", 30 * IV)
    f = features(series)
    assert f.ingress_rate == 5.0 and f.ingress_timeout_rate == 0.0
    unrelated = triton_model([Phase(12, rps=5)], interval=IV)
    _ingress(unrelated, "bert", "504", 30 * IV)
    g = features(unrelated)
    assert g.ingress_rate is None and g.ingress_timeout_rate is None


def test_a_grpc_ingress_without_timeouts_is_no_evidence() -> None:
    """GRPC errors travel in trailers: 200s at a gRPC ingress say nothing about timeouts."""
    series = triton_model([Phase(12, rps=5)], interval=IV)
    sel = 'namespace="prod",ingress="resnet",status="200",path="/inference.GRPCInferenceService"'
    series[f"nginx_ingress_controller_requests{{{sel}}}"] = notation([(5 * IV, 12)])
    f = features(series)
    assert f.ingress_rate == 5.0 and f.ingress_timeout_rate is None


def test_hpa_series_join_the_pods_workload() -> None:
    """An HPA is matched to the Deployment of the pod by name, not to every model around it."""
    from tritonguard.core.features import workload_of

    assert workload_of("triton-resnet-7d9c5b6f4-x2x9q") == "triton-resnet"
    assert workload_of("triton-resnet-0") == "triton-resnet"
    series = triton_model([Phase(12, rps=5)], interval=IV, pod="triton-resnet-0")
    hpa = "kube_horizontalpodautoscaler_status_desired_replicas"
    series[f'{hpa}{{namespace="prod",horizontalpodautoscaler="triton-resnet"}}'] = gauge([(4, 13)])
    series[f'{hpa}{{namespace="prod",horizontalpodautoscaler="triton-bert"}}'] = gauge([(9, 13)])
    engine = Engine()
    engine.ingest(samples_of(series, interval=IV), START)
    f = engine.features(Subject("prod", "resnet", "triton-resnet-0"), START + 12 * IV)
    assert f is not None and f.hpa_desired == 4


def test_failure_reasons_sum_to_the_failure_rate_and_an_absent_reason_is_zero() -> None:
    """Each reason's rate is its own series' increase; BACKEND and OTHER, not exported, are 0."""
    f = features(triton_model([Phase(12, rps=20, canceled_rps=3, rejected_rps=1.5)], interval=IV))
    assert f.failure_canceled == 3 and f.failure_rejected == 1.5
    assert f.failure_backend == 0.0 and f.failure_other == 0.0
    assert f.failure_rate == 4.5
