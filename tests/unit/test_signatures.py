"""Each cause signature fires on its mechanism and stays quiet on look-alikes."""

from __future__ import annotations

import pytest

from tests.unit.synthetic import (
    START,
    Phase,
    gauge,
    notation,
    opened,
    run_engine,
    samples_of,
    triton_model,
)
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.replay import drive

IV = 5.0
BASE_N = 24  # two minutes of healthy history before every onset
ONSET = BASE_N * IV


def causes(events: list) -> set[str]:  # type: ignore[type-arg]
    """Causes of every opened incident."""
    return {c for c, _, _ in opened(events)}


def assert_detected(events: list, cause: str, model: str = "resnet") -> None:  # type: ignore[type-arg]
    """Fail unless the cause opened for the model within 60 s of onset."""
    hits = [(c, m, t) for c, m, t in opened(events) if c == cause and m == model]
    assert hits, f"{cause} not opened; opened={opened(events)}"
    assert hits[0][2] - ONSET <= 60, f"{cause} opened {hits[0][2] - ONSET:.0f}s after onset"


def test_literal_notation_healthy_model_opens_nothing() -> None:
    """Steady traffic written literally in promtool notation opens no incident."""
    sel = 'model="m",version="1",namespace="prod",pod="p"'
    series = {
        f"nv_inference_request_success{{{sel}}}": "0+100x60",
        f"nv_inference_count{{{sel}}}": "0+100x60",
        f"nv_inference_exec_count{{{sel}}}": "0+100x60",
        f"nv_inference_request_duration_us{{{sel}}}": "0+1200000x60",
        f"nv_inference_queue_duration_us{{{sel}}}": "0+100000x60",
        f"nv_inference_compute_input_duration_us{{{sel}}}": "0+10000x60",
        f"nv_inference_compute_infer_duration_us{{{sel}}}": "0+1080000x60",
        f"nv_inference_compute_output_duration_us{{{sel}}}": "0+10000x60",
        f"nv_inference_pending_request_count{{{sel}}}": "0x60",
    }
    assert run_engine(series, interval=IV) == []


def test_batching_delay_fires_when_queue_waits_on_idle_instances() -> None:
    """A large max_queue_delay at low traffic: queue ≈ the delay, instances idle → batching_delay."""
    series = triton_model(
        [Phase(BASE_N, rps=5, queue_ms=0.5), Phase(24, rps=5, queue_ms=80, batch=1.6)], interval=IV
    )
    cfg = {
        "max_batch_size": 8,
        "dynamic_batching": {"max_queue_delay_microseconds": "100000"},
        "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
    }
    events = run_engine(series, interval=IV, configs={"resnet": cfg})
    assert_detected(events, "batching_delay")
    first = next(e for e in events if e.event == "opened")
    assert "max_queue_delay_microseconds" in first.fix.config_snippet
    assert first.evidence["queue_vs_max_delay"].value is not None


def test_batching_delay_quiet_when_requests_wait_far_past_the_batchers_delay() -> None:
    """A 500 us delay cannot hold requests 35 ms: the wait is for capacity, not the timer.

    The batcher holds a request at most its delay, then the batch waits at most the 10 ms
    execution in flight on an idle instance: past twice the delay plus that (11 ms), most of
    the 35 ms is not the batcher's, once the config read is the one in force (read since the
    shift began, as the daemon's re-reads give). The same trace with a 40 ms delay is the
    batcher waiting; so is the 500 us read taken before the shift, which a deploy raising
    the delay may have made stale.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=5, queue_ms=0.5, infer_ms=10),
            Phase(24, rps=5, queue_ms=35, infer_ms=10, batch=1.6),
        ],
        interval=IV,
    )
    subject = Subject("prod", "resnet", "triton-0")

    def run(delay_us: int, *, reread: bool) -> list[IncidentEvent]:
        cfg = {
            "max_batch_size": 8,
            "dynamic_batching": {"max_queue_delay_microseconds": str(delay_us)},
            "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
        }
        engine = Engine()
        engine.note_model_config(subject, cfg, at=START)
        events: list[IncidentEvent] = []
        for t, evs in drive(engine, samples_of(series, interval=IV), eval_interval_s=IV):
            events.extend(evs)
            if reread:
                engine.note_model_config(subject, cfg, at=t)
        return events

    assert "batching_delay" not in causes(run(500, reread=True))
    assert_detected(run(40_000, reread=True), "batching_delay")
    assert_detected(run(500, reread=False), "batching_delay")


def test_batching_delay_with_bigger_batches_that_take_longer_to_execute() -> None:
    """A waiting batcher forms batches of 4 that run 2.5x longer: no execution is slower.

    Compute per execution rises with the batch, compute per inference falls: it is the
    batcher's wait, not requests queued behind slower executions.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, queue_ms=0.2, infer_ms=1.0),
            Phase(24, rps=20, queue_ms=30, infer_ms=2.5, batch=4),
        ],
        interval=IV,
    )
    cfg = {
        "max_batch_size": 64,
        "dynamic_batching": {"max_queue_delay_microseconds": "40000"},
        "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
    }
    assert_detected(run_engine(series, interval=IV, configs={"resnet": cfg}), "batching_delay")


def test_batching_delay_quiet_when_instances_are_busy() -> None:
    """Queue time with fully busy instances is a capacity problem, not the batcher waiting."""
    series = triton_model(
        [
            Phase(BASE_N, rps=5, queue_ms=0.5, infer_ms=150),
            Phase(24, rps=5, queue_ms=120, infer_ms=199, pending=6),
        ],
        interval=IV,
    )
    assert "batching_delay" not in causes(run_engine(series, interval=IV))


def test_too_few_instances_fires_when_all_instances_are_busy_and_queue_grows() -> None:
    """Load rises until the single instance is always busy; queue and pending grow."""
    series = triton_model(
        [
            Phase(BASE_N, rps=30, infer_ms=20),
            Phase(24, rps=49, infer_ms=20, queue_ms=300, pending=12),
        ],
        interval=IV,
    )
    assert_detected(run_engine(series, interval=IV), "too_few_instances")


def test_too_few_instances_quiet_when_compute_itself_inflated() -> None:
    """Saturation caused by each inference getting slower is not missing capacity."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=20, infer_ms=49, queue_ms=300, pending=12),
        ],
        interval=IV,
    )
    assert "too_few_instances" not in causes(run_engine(series, interval=IV))


def test_too_many_instances_fires_on_concurrency_without_throughput() -> None:
    """A deploy raises instances to 4: executions overlap, each 4x slower, throughput flat."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=80, queue_ms=5)],
        interval=IV,
    )
    cfg = {"max_batch_size": 8, "instance_group": [{"count": 4, "kind": "KIND_GPU"}]}
    events = run_engine(series, interval=IV, configs={"resnet": cfg})
    assert_detected(events, "too_many_instances")


def test_too_many_instances_quiet_when_requests_wait_longer_for_the_same_instances() -> None:
    """Slower work with a growing queue share is not contention between instances.

    Four instances configured, executions overlapping and each 4x slower at flat throughput,
    as in the case above, but requests now wait 60 ms in the queue (share 0.05 -> 0.43): the
    instances are busy longer under the same arrivals. More instances than the device can run
    take requests as they come, so they drain the queue rather than grow it.
    """
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=80, queue_ms=60)],
        interval=IV,
    )
    cfg = {"max_batch_size": 8, "instance_group": [{"count": 4, "kind": "KIND_GPU"}]}
    assert "too_many_instances" not in causes(
        run_engine(series, interval=IV, configs={"resnet": cfg})
    )


def test_too_many_instances_quiet_when_the_load_grew() -> None:
    """Four times the traffic on four instances: more executions in flight is the load.

    Each inference slower and concurrency up, but arrivals explain the overlap; blaming the
    instance count would cut capacity under a load rise.
    """
    series = triton_model(
        [Phase(BASE_N, rps=10, infer_ms=20), Phase(24, rps=40, infer_ms=45, queue_ms=30)],
        interval=IV,
    )
    cfg = {"max_batch_size": 8, "instance_group": [{"count": 4, "kind": "KIND_GPU"}]}
    assert "too_many_instances" not in causes(
        run_engine(series, interval=IV, configs={"resnet": cfg})
    )


def test_too_many_instances_quiet_with_one_instance_and_no_overlap() -> None:
    """Slower compute on one instance with no overlap is not instance contention."""
    series = triton_model(
        [Phase(BASE_N, rps=10, infer_ms=20), Phase(24, rps=10, infer_ms=60, queue_ms=5)],
        interval=IV,
    )
    cfg = {"max_batch_size": 8, "instance_group": [{"count": 1, "kind": "KIND_GPU"}]}
    assert "too_many_instances" not in causes(
        run_engine(series, interval=IV, configs={"resnet": cfg})
    )


def _new_model(first_infer_ms: float, first_queue_ms: float) -> dict[str, str]:
    base = triton_model([Phase(BASE_N + 24, rps=10)], interval=IV, model="resnet")
    late = triton_model(
        [
            Phase(2, rps=4, infer_ms=first_infer_ms, queue_ms=first_queue_ms),
            Phase(22, rps=10, infer_ms=8),
        ],
        interval=IV,
        model="bert",
    )
    # The new model's series are missing until it is deployed at the onset.
    base.update({k: f"_x{BASE_N - 1} {v}" for k, v in late.items()})
    return base


def test_cold_start_fires_for_model_serving_cold_after_deploy() -> None:
    """A model appears mid-trace and its first requests queue behind slow first executions."""
    events = run_engine(_new_model(first_infer_ms=1500, first_queue_ms=900), interval=IV)
    assert_detected(events, "cold_start", model="bert")


def test_cold_start_quiet_when_slow_executions_had_no_waiting_requests() -> None:
    """model_warmup: slow first executions with no queueing are a healthy deploy."""
    events = run_engine(_new_model(first_infer_ms=1500, first_queue_ms=0.2), interval=IV)
    assert "cold_start" not in causes(events)


def _coarse_deploy(cold_p99_ms: float) -> dict[str, str]:
    """Return a 30 s scrape where bert's first scrape holds a few cold executions among warm ones."""
    iv, base_n = 30.0, 4
    base = triton_model([Phase(base_n + 8, rps=10)], interval=iv, model="resnet")
    late = triton_model(
        # 3 s of cold executions spread over 300 requests: only 2.25x the steady 8 ms each.
        [Phase(1, rps=10, infer_ms=18, queue_ms=60), Phase(7, rps=10, infer_ms=8, queue_ms=0.5)],
        interval=iv,
        model="bert",
    )
    sel = 'model="bert",version="1",namespace="prod",pod="triton-0"'
    summary = "nv_inference_compute_infer_summary_us"
    # Triton's summaries cover about a minute: the cold executions stay in p99 for two scrapes.
    late[f'{summary}{{{sel},quantile="0.5"}}'] = "8000x7"
    late[f'{summary}{{{sel},quantile="0.99"}}'] = f"{cold_p99_ms * 1000:.0f}x1 9000x5"
    base.update({k: f"_x{base_n - 1} {v}" for k, v in late.items()})
    return base


def test_cold_start_at_a_30s_scrape_is_seen_in_the_compute_summary() -> None:
    """Diluted in a 30 s scrape's mean, cold executions still show in per-request compute p99."""
    events = run_engine(_coarse_deploy(cold_p99_ms=1500), interval=30.0)
    first = [(c, m) for c, m, _ in opened(events) if m == "bert"]
    assert first and first[0] == ("cold_start", "bert"), opened(events)
    e = next(e for e in events if e.event == "opened" and e.cause == "cold_start")
    tail = e.evidence["early_compute_p99_over_p50"].value
    assert tail is not None and tail >= 100


def test_cold_start_quiet_when_the_compute_tail_is_batch_size_spread() -> None:
    """A p99 3x the p50 after a deploy is batch sizes varying, not a cold model."""
    events = run_engine(_coarse_deploy(cold_p99_ms=24), interval=30.0)
    assert "cold_start" not in causes(events)


def _cpu(
    series: dict[str, str], usage: list[tuple[float, int]], throttled: list[tuple[float, int]]
) -> None:
    sel = 'namespace="prod",pod="triton-0",container="triton"'
    series[f"container_cpu_usage_seconds_total{{{sel}}}"] = notation(
        [(u * IV, n) for u, n in usage]
    )
    series[f"container_spec_cpu_quota{{{sel}}}"] = gauge([(200000, sum(n for _, n in usage))])
    series[f"container_cpu_cfs_periods_total{{{sel}}}"] = notation([(IV * 10, n) for _, n in usage])
    series[f"container_cpu_cfs_throttled_periods_total{{{sel}}}"] = notation(
        [(r * IV * 10, n) for r, n in throttled]
    )


def _node(series: dict[str, str], busy: list[tuple[float, int]]) -> None:
    # Four CPUs; idle seconds per scrape shrink when the node is busy.
    series['node_cpu_seconds_total{instance="node-1:9100",cpu="0",mode="idle"}'] = notation(
        [((1 - b) * 4 * IV, n) for b, n in busy]
    )
    series['node_cpu_seconds_total{instance="node-1:9100",cpu="0",mode="user"}'] = notation(
        [(b * 4 * IV, n) for b, n in busy]
    )


def test_cpu_bottleneck_fires_when_triton_cpu_saturates_with_load() -> None:
    """Load grows, Triton's container hits its CPU quota and is throttled; compute slows."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=30, infer_ms=30, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.97, 24)], [(0.0, BASE_N), (0.45, 24)])
    assert_detected(run_engine(series, interval=IV), "cpu_bottleneck")


def test_cpu_bottleneck_quiet_when_a_neighbour_takes_the_cpu() -> None:
    """Busy node with Triton's own CPU down at steady load is contention, not Triton's CPU work."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (0.6, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.3, BASE_N), (0.97, 24)])
    events = run_engine(series, interval=IV)
    assert "cpu_bottleneck" not in causes(events)
    assert_detected(events, "node_contention")


def test_node_contention_quiet_when_the_node_was_saturated_all_along() -> None:
    """A node at 97 % before and after: nothing new runs beside Triton, whatever else slowed it."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.0, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.97, BASE_N), (0.97, 24)])
    assert "node_contention" not in causes(run_engine(series, interval=IV))


def _waiting(series: dict[str, str], share: list[tuple[float, int]]) -> None:
    # cgroup CPU pressure: seconds a scrape in which a Triton thread waited for a CPU.
    sel = 'namespace="prod",pod="triton-0",container="triton"'
    series[f"container_pressure_cpu_waiting_seconds_total{{{sel}}}"] = notation(
        [(w * IV, n) for w, n in share]
    )


@pytest.mark.parametrize(
    ("waiting_after", "own_after", "opens"),
    [(0.55, 1.0, True), (0.25, 1.0, False), (0.55, 2.4, False)],
)
def test_node_contention_on_a_full_node_shows_in_tritons_cpu_pressure(
    waiting_after: float, own_after: float, opens: bool
) -> None:
    """On a node at 97 % before and after, Triton's threads waiting for a CPU name the neighbour.

    The node's busy share has no room to rise, so it says nothing; the time Triton's threads
    wait for a CPU does. Up from 0.2 to 0.55 of the time at steady load and Triton CPU it opens
    node_contention; up only to 0.25 (under the rise bar) it does not, and nor does a rise
    that comes with Triton's own CPU up 2.4x (its own work waits on itself).
    """
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (own_after, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.97, BASE_N), (0.97, 24)])
    _waiting(series, [(0.2, BASE_N), (waiting_after, 24)])
    events = run_engine(series, interval=IV)
    if opens:
        assert_detected(events, "node_contention")
    else:
        assert "node_contention" not in causes(events)


@pytest.mark.parametrize(("waiting_after", "opens"), [(0.55, True), (0.2, False)])
def test_node_contention_with_the_load_fallen_needs_the_threads_seen_waiting(
    waiting_after: float, opens: bool
) -> None:
    """Traffic down to half while each execution got 2.2x slower: contention only with waiting.

    A neighbour starves the clients on its node too, so contention's traffic often falls.
    A fall has causes of its own (shrinking batches, traffic moving to a new pod), so it
    passes only with Triton's threads seen waiting for a CPU more, and the summary says the
    load fell instead of calling it unchanged.
    """
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=10, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (0.6, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.97, BASE_N), (0.97, 24)])
    _waiting(series, [(0.2, BASE_N), (waiting_after, 24)])
    events = run_engine(series, interval=IV)
    if not opens:
        assert "node_contention" not in causes(events)
        return
    assert_detected(events, "node_contention")
    [opened] = [e for e in events if e.cause == "node_contention" and e.event == "opened"]
    assert "of its baseline load" in opened.summary
    assert "unchanged load" not in opened.summary


def test_node_contention_reads_cpu_pressure_without_node_exporter() -> None:
    """Without node-exporter, Triton's CPU pressure rising at steady load and CPU is the evidence."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.0, 24)], [(0.0, BASE_N), (0.0, 24)])
    _waiting(series, [(0.05, BASE_N), (0.5, 24)])
    assert_detected(run_engine(series, interval=IV), "node_contention")


@pytest.mark.parametrize(("own_after", "opens"), [(0.5, True), (1.2, False)])
def test_node_contention_credits_a_busier_node_only_when_the_work_is_not_tritons(
    own_after: float, opens: bool
) -> None:
    """A node that got busier with Triton's own CPU up 2.4x is Triton's work, not other work.

    A model loading (a backend's stub starting) raises Triton's CPU and the node's busy share
    at once, while its first executions inflate compute at steady load: contention's shape
    in every other respect. Contended threads wait uncounted, so other work leaves Triton's
    CPU where the load puts it; with it steady the same node reading names node_contention.
    """
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(0.5, BASE_N), (own_after, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.3, BASE_N), (0.75, 24)])
    events = run_engine(series, interval=IV)
    if opens:
        assert_detected(events, "node_contention")
    else:
        assert "node_contention" not in causes(events)


def test_node_contention_quiet_when_requests_wait_less_than_before() -> None:
    """Compute inflating while the queue shortens is more instances serving, not a busier node.

    The node got busier at the same time (other work of its own), but slower executions on
    the same instances would leave requests waiting longer; here they wait a third as long.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20, queue_ms=9),
            Phase(24, rps=20, infer_ms=45, queue_ms=3),
        ],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.0, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.3, BASE_N), (0.97, 24)])
    assert "node_contention" not in causes(run_engine(series, interval=IV))


def test_node_contention_quiet_when_the_node_saturated_before_the_shift() -> None:
    """A node saturated for a while before compute inflated explains nothing that changed.

    The baseline's median still sees the node at 30 %, but for the six scrapes before the
    shift it was at 97 % while the model served at its healthy compute.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(6, rps=20, infer_ms=20),
            Phase(24, rps=20, infer_ms=45, queue_ms=60),
        ],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.0, 30)], [(0.0, BASE_N), (0.0, 30)])
    _node(series, [(0.3, BASE_N), (0.97, 30)])
    assert "node_contention" not in causes(run_engine(series, interval=IV))


def test_cpu_bottleneck_quiet_when_the_host_was_saturated_before_the_load_grew() -> None:
    """A host already at 100 % in the healthy baseline links nothing to a later load rise.

    Traffic outgrows one instance (too_few_instances) on a node whose CPU other work kept
    saturated all along; Triton's host-wide CPU gauge reads 1.0 before and after, compute per
    inference is unchanged. Blaming the CPU would cure nothing.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=30, infer_ms=20),
            # The ramp: queueing before the instance reads as fully busy.
            Phase(8, rps=40, infer_ms=20, queue_ms=120, pending=4),
            Phase(16, rps=49, infer_ms=20, queue_ms=300, pending=12),
        ],
        interval=IV,
    )
    series['nv_cpu_utilization{namespace="prod",pod="triton-0"}'] = gauge([(1.0, BASE_N + 24)])
    events = run_engine(series, interval=IV)
    assert "cpu_bottleneck" not in causes(events)
    assert_detected(events, "too_few_instances")


def test_cpu_bottleneck_when_latency_follows_the_load_up_on_a_host_saturated_all_along() -> None:
    """A host pinned before the load grew: compute per inference inflating with it is CPU-bound.

    Triton's host-wide gauge reads 1.0 before and after, so the host's saturation alone links
    nothing to the load; but each inference taking 1.8x longer as the load grows 1.5x is
    executions sharing cores that have nothing to spare.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=30, infer_ms=36, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    series['nv_cpu_utilization{namespace="prod",pod="triton-0"}'] = gauge([(1.0, BASE_N + 24)])
    assert_detected(run_engine(series, interval=IV), "cpu_bottleneck")


def test_cpu_bottleneck_on_a_pinned_host_needs_tritons_cpu_to_grow_with_its_load() -> None:
    """The same slowdown while Triton's own CPU stayed flat: the added work does not cost CPU."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=30, infer_ms=36, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    series['nv_cpu_utilization{namespace="prod",pod="triton-0"}'] = gauge([(1.0, BASE_N + 24)])
    _cpu(series, [(0.5, BASE_N), (0.5, 24)], [(0.0, BASE_N), (0.0, 24)])
    assert "cpu_bottleneck" not in causes(run_engine(series, interval=IV))


def test_cpu_bottleneck_from_tritons_host_gauge_when_saturation_comes_with_the_load() -> None:
    """Without cAdvisor: the host saturating as Triton's load grows, compute slowing, is Triton's CPU."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=30, infer_ms=30, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    series['nv_cpu_utilization{namespace="prod",pod="triton-0"}'] = gauge(
        [(0.3, BASE_N), (0.97, 24)]
    )
    assert_detected(run_engine(series, interval=IV), "cpu_bottleneck")


def _shared_cpu_pod() -> dict[str, str]:
    """Two models on one throttled pod: resnet's load grows, bert's stays and only slows."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=30, infer_ms=30, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    series.update(
        triton_model(
            [
                Phase(BASE_N, rps=20, infer_ms=20),
                Phase(24, rps=20, infer_ms=30, queue_ms=60, pending=2),
            ],
            interval=IV,
            model="bert",
        )
    )
    _cpu(series, [(1.0, BASE_N), (1.97, 24)], [(0.0, BASE_N), (0.45, 24)])
    return series


def test_cpu_bottleneck_names_the_model_whose_work_grew_not_its_pods_bystander() -> None:
    """A CPU-bound pod slows every model on it; only the one whose load grew is the cause."""
    events = run_engine(_shared_cpu_pod(), interval=IV)
    assert_detected(events, "cpu_bottleneck", model="resnet")
    assert ("bert", "cpu_bottleneck") not in {(e.subject.model, e.cause) for e in events}


def test_cpu_bottleneck_evidence_gives_the_culprits_share_of_the_added_work() -> None:
    """The culprit's finding says how much of the pod's added work is its own, naming the rest."""
    events = run_engine(_shared_cpu_pod(), interval=IV)
    first = next(e for e in events if e.event == "opened" and e.subject.model == "resnet")
    share = first.evidence["pod_work_share"]
    # resnet added 10/s x its healthy 20 ms; bert, at a steady 20/s, added none (it only slowed).
    assert share.value == 1.0
    assert "bert: 1.0x load" in share.what
    assert "resnet added 100% of the work" in first.summary


def test_a_shared_gpu_saturated_by_one_models_load_is_not_the_others_instances() -> None:
    """On one GPU, bert's executions slow because resnet's load grew, not because of its count.

    bert runs four instances at a steady load and its compute inflates as the device fills
    with resnet's added work: the look of too_many_instances, whose cause is resnet's.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20, queue_ms=5),
            Phase(24, rps=40, infer_ms=30, queue_ms=60, pending=4),
        ],
        interval=IV,
    )
    series.update(
        triton_model(
            [
                Phase(BASE_N, rps=20, infer_ms=20, queue_ms=5),
                Phase(24, rps=20, infer_ms=80, queue_ms=5),
            ],
            interval=IV,
            model="bert",
        )
    )
    series['DCGM_FI_DEV_GPU_UTIL{namespace="prod",pod="triton-0",gpu="0"}'] = gauge(
        [(60, BASE_N), (98, 24)]
    )
    cfg = {"max_batch_size": 8, "instance_group": [{"count": 4, "kind": "KIND_GPU"}]}
    events = run_engine(series, interval=IV, configs={"bert": cfg})
    assert ("bert", "too_many_instances") not in {(e.subject.model, e.cause) for e in events}


def test_node_contention_needs_node_evidence_to_open() -> None:
    """Inflated compute at steady load without node metrics stays below the open threshold."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    assert "node_contention" not in causes(run_engine(series, interval=IV))


def test_memory_copy_fires_when_input_copies_dominate_compute() -> None:
    """Inputs grow: compute_input becomes most of compute while the CPU has headroom."""
    series = triton_model(
        [
            Phase(BASE_N, rps=10, input_ms=0.5, infer_ms=10),
            Phase(24, rps=10, input_ms=25, infer_ms=12, queue_ms=20),
        ],
        interval=IV,
    )
    _cpu(series, [(0.6, BASE_N), (0.8, 24)], [(0.0, BASE_N), (0.0, 24)])
    assert_detected(run_engine(series, interval=IV), "memory_copy")


def test_memory_copy_quiet_when_copy_share_was_always_high() -> None:
    """A model that always spent most compute copying did not explode because of copies."""
    series = triton_model(
        [
            Phase(BASE_N, rps=10, input_ms=20, infer_ms=10),
            Phase(24, rps=10, input_ms=20, infer_ms=10, queue_ms=60),
        ],
        interval=IV,
    )
    assert "memory_copy" not in causes(run_engine(series, interval=IV))


def _reloading(cycles: int, period_scrapes: int = 3) -> dict[str, str]:
    phases = [Phase(BASE_N, rps=20, infer_ms=10)]
    for _ in range(cycles):
        phases.append(Phase(period_scrapes - 1, rps=20, infer_ms=10))
        phases.append(Phase(1, rps=20, infer_ms=40, queue_ms=300))
    return triton_model(phases, interval=IV)


def test_model_reload_fires_on_periodic_spikes_at_steady_traffic() -> None:
    """Repository polling reloads the model every 15 s: per-scrape latency spikes recur."""
    assert_detected(run_engine(_reloading(cycles=10), interval=IV), "model_reload")


def test_model_reload_quiet_on_a_single_spike() -> None:
    """One spike (a single deploy) is not a reload loop."""
    assert "model_reload" not in causes(run_engine(_reloading(cycles=1), interval=IV))


def test_periodic_spikes_on_a_slow_floor_are_not_reload_churn() -> None:
    """A slowdown's worst scrapes recurring on a slow floor are not reloads.

    Reload spikes stand on a warm floor (the model at its healthy latency between them);
    contention slows every scrape and its worst ones recur.
    """
    phases = [Phase(BASE_N, rps=20, infer_ms=10)]
    for _ in range(10):
        phases.append(Phase(2, rps=20, infer_ms=20, queue_ms=2))
        phases.append(Phase(1, rps=20, infer_ms=80, queue_ms=60))
    series = triton_model(phases, interval=IV)
    assert "model_reload" not in causes(run_engine(series, interval=IV))


def test_capacity_waits_while_arrivals_outrun_service_with_a_young_backlog() -> None:
    """Without client-side counts a surge and a storm look alike until the backlog ages.

    All instances busy, arrivals twice what is served and five times the baseline, the
    backlog still shorter than any client's patience (5 to 25 s): too_few_instances does
    not open on what may be retries; the backlog tells them apart once it outlasts 30 s.
    """
    healthy = Phase(BASE_N, rps=20, infer_ms=20, queue_ms=1)
    surge = [Phase(1, rps=50, infer_ms=20, queue_ms=900, pending=250.0 * k) for k in range(1, 6)]
    series = triton_model([healthy, *surge], interval=IV)
    assert "too_few_instances" not in causes(run_engine(series, interval=IV))


def test_retry_storm_is_primary_over_capacity_when_timeouts_rise() -> None:
    """Arrivals, latency, cancellations and pending rise together: retries amplify overload."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=48, infer_ms=20, queue_ms=900, pending=90, canceled_rps=15),
        ],
        interval=IV,
    )
    events = run_engine(series, interval=IV)
    assert_detected(events, "retry_storm")
    first = next(e for e in events if e.event == "opened")
    assert first.cause == "retry_storm"
    assert any("too_few_instances" in e.secondary for e in events if e.cause == "retry_storm")
    assert not any(e.cause == "too_few_instances" for e in events)


def test_overload_without_timeouts_is_not_a_retry_storm() -> None:
    """A genuine load rise without timeouts or cancellations is capacity, not a storm."""
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(24, rps=49, infer_ms=20, queue_ms=900, pending=90),
        ],
        interval=IV,
    )
    found = causes(run_engine(series, interval=IV))
    assert "retry_storm" not in found
    assert "too_few_instances" in found


def _overload(extra_arrivals_rps: float) -> dict[str, str]:
    """One instance saturated at 50/s after 20/s; pending grows by the arrivals beyond it."""
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=50, infer_ms=20, queue_ms=20_000)],
        interval=IV,
    )
    sel = 'model="resnet",version="1",namespace="prod",pod="triton-0"'
    growth = [(0.0, BASE_N)] + [(extra_arrivals_rps * IV * (i + 1), 1) for i in range(24)]
    series[f"nv_inference_pending_request_count{{{sel}}}"] = gauge(growth)
    return series


def test_retry_storm_without_timeout_counts_is_read_from_amplified_arrivals() -> None:
    """No ingress, no CANCELED: arrivals 3x service and a backlog of minutes mean re-sends."""
    events = run_engine(_overload(extra_arrivals_rps=120), interval=IV)
    assert_detected(events, "retry_storm")
    first = next(e for e in events if e.event == "opened")
    assert first.cause == "retry_storm"
    arrivals = first.evidence["arrivals_vs_served"].value
    assert arrivals is not None and arrivals >= 3
    assert "no timeout counts in view" in first.summary


def test_a_moderate_overload_without_timeout_counts_stays_capacity() -> None:
    """Arrivals 1.2x service with a backlog of seconds: more instances, not a storm."""
    found = causes(run_engine(_overload(extra_arrivals_rps=10), interval=IV))
    assert "retry_storm" not in found and "too_few_instances" in found


def test_ingress_without_timeouts_vetoes_an_inferred_storm() -> None:
    """With the model's ingress in view and no 499/504 there, amplified arrivals are a surge."""
    series = _overload(extra_arrivals_rps=120)
    ingress = 'namespace="prod",ingress="resnet",service="resnet",status="200"'
    series[f"nginx_ingress_controller_requests{{{ingress}}}"] = notation(
        [(20 * IV, BASE_N), (170 * IV, 24)]
    )
    assert "retry_storm" not in causes(run_engine(series, interval=IV))


def test_ramp_within_capacity_opens_nothing() -> None:
    """Traffic tripling with flat latency is healthy."""
    series = triton_model(
        [
            Phase(BASE_N, rps=10, infer_ms=10),
            Phase(12, rps=20, infer_ms=10),
            Phase(12, rps=30, infer_ms=10),
        ],
        interval=IV,
    )
    assert run_engine(series, interval=IV) == []


def test_slow_scrape_interval_still_detects_within_a_minute() -> None:
    """At a 30 s scrape interval the same overload is found within 60 s of onset."""
    series = triton_model(
        [Phase(8, rps=30, infer_ms=20), Phase(6, rps=49, infer_ms=20, queue_ms=300, pending=12)],
        interval=30.0,
    )
    events = run_engine(series, interval=30.0)
    hits = [t for c, _, t in opened(events) if c == "too_few_instances"]
    assert hits and hits[0] - 8 * 30.0 <= 60


def test_model_reload_double_loads_count_as_one_burst() -> None:
    """A repository rewritten file by file loads twice per change; the period is still found."""
    phases = [Phase(BASE_N, rps=20, infer_ms=10)]
    for _ in range(6):
        phases += [
            Phase(1, rps=20, infer_ms=40, queue_ms=300),
            Phase(1, rps=20, infer_ms=10),
            Phase(1, rps=20, infer_ms=40, queue_ms=300),
            Phase(3, rps=20, infer_ms=10),
        ]
    events = run_engine(triton_model(phases, interval=2.5), interval=2.5)
    assert "model_reload" in causes(events)


def test_memory_copy_fires_when_bytes_per_inference_multiply() -> None:
    """Conversions inside the model show as infer time; PCIe bytes per inference give it away."""
    series = triton_model(
        [
            Phase(BASE_N, rps=15, input_ms=0.06, infer_ms=5.4, output_ms=0.2),
            Phase(24, rps=15, input_ms=0.7, infer_ms=11.8, output_ms=0.2, queue_ms=2),
        ],
        interval=IV,
    )
    series['DCGM_FI_PROF_PCIE_RX_BYTES{namespace="prod",pod="triton-0",gpu="0"}'] = gauge(
        [(4.5e6, BASE_N + 1), (1.1e8, 24)]
    )
    assert_detected(run_engine(series, interval=IV), "memory_copy")


def test_memory_copy_quiet_when_bytes_did_not_grow() -> None:
    """The same compute inflation at unchanged bytes per inference is not a copy problem."""
    series = triton_model(
        [
            Phase(BASE_N, rps=15, input_ms=0.06, infer_ms=5.4, output_ms=0.2),
            Phase(24, rps=15, input_ms=0.07, infer_ms=11.8, output_ms=0.2, queue_ms=2),
        ],
        interval=IV,
    )
    series['DCGM_FI_PROF_PCIE_RX_BYTES{namespace="prod",pod="triton-0",gpu="0"}'] = gauge(
        [(4.5e6, BASE_N + 1), (4.6e6, 24)]
    )
    assert "memory_copy" not in causes(run_engine(series, interval=IV))


def test_spikes_in_every_other_scrape_are_not_sustained() -> None:
    """Reloads every 10 s at 5 s scrapes lift the mean but are reload churn, not a lasting cause."""
    phases = [Phase(BASE_N, rps=15, infer_ms=10)]
    for _ in range(10):
        phases += [Phase(1, rps=15, infer_ms=30, queue_ms=40), Phase(1, rps=15, infer_ms=10)]
    found = causes(run_engine(triton_model(phases, interval=IV), interval=IV))
    assert "model_reload" in found
    assert found <= {"model_reload"}


def test_incident_stays_open_while_the_server_sheds_load() -> None:
    """Latency recovers because excess is rejected: not resolved until rejections stop."""
    storm = Phase(12, rps=48, infer_ms=20, queue_ms=900, pending=90, canceled_rps=15)
    shedding = Phase(24, rps=30, infer_ms=20, queue_ms=2, rejected_rps=15)
    calm = Phase(24, rps=20, infer_ms=20)
    events = run_engine(
        triton_model([Phase(BASE_N, rps=20, infer_ms=20), storm, shedding, calm], interval=IV),
        interval=IV,
    )
    resolved = [
        e.at - START - ONSET for e in events if e.event == "resolved" and e.cause == "retry_storm"
    ]
    assert resolved, [(e.event, e.cause) for e in events]
    # Shedding ends 36 scrapes (180 s) after onset; only then may the incident resolve.
    assert 36 * IV < resolved[0] < 60 * IV


def test_one_deploy_is_one_reload_however_many_signs_it_leaves() -> None:
    """Signs a scrape apart (new version, reset) are one reload; reloads a minute apart are two."""
    from tritonguard.core.signatures.model_reload import occurrences

    assert occurrences([100.0, 102.0, 104.5], merge_s=6.0) == 1
    assert occurrences([100.0, 160.0], merge_s=6.0) == 2
    assert occurrences([], merge_s=6.0) == 0


def test_node_contention_quiet_when_the_config_changed_since_the_baseline() -> None:
    """A busier node beside a config change is not "contention at constant config".

    The same inflation at steady load with the node going from 30 % to 97 % opens
    node_contention (the test above); read after a config change (here the instance count
    raised, a deploy), it does not: the change's own causes explain the inflation.
    """
    series = triton_model(
        [Phase(BASE_N, rps=20, infer_ms=20), Phase(24, rps=20, infer_ms=45, queue_ms=60)],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (0.6, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.3, BASE_N), (0.97, 24)])
    engine = Engine()
    subject = Subject("prod", "resnet", "triton-0")
    before = {"instance_group": [{"count": 1, "kind": "KIND_GPU"}]}
    after = {"instance_group": [{"count": 4, "kind": "KIND_GPU"}]}
    engine.note_model_config(subject, before, at=START)
    events = []
    for t, evs in drive(engine, samples_of(series, interval=IV), eval_interval_s=5.0):
        if t >= START + ONSET and len(engine.changes) and not engine.change_before(subject, t):
            engine.note_model_config(subject, after, at=t)
        events.extend(evs)
    assert engine.change_before(subject, START + ONSET + 60) is not None
    assert "node_contention" not in causes(events)


def test_node_contention_quiet_when_the_copies_share_multiplied() -> None:
    """A busier node while this model's copies grew 30x is the model's own copying.

    Contention slows every phase of a CPU model's compute alike, so the copies' share holds;
    here it goes from 1 % to 27 % of compute (bigger inputs), and with nothing showing
    Triton's own CPU the busier node may be those copies. The same inflation with the
    copies' share unmoved stays node_contention; so does the grown share once cAdvisor shows
    Triton's own CPU steady while the node got busier (a GPU model's CPU-side copies slowed
    by other work).
    """

    def trace(input_ms: float, infer_ms: float, *, own_cpu: bool) -> dict[str, str]:
        series = triton_model(
            [
                Phase(BASE_N, rps=20, input_ms=0.2, infer_ms=20),
                Phase(24, rps=20, input_ms=input_ms, infer_ms=infer_ms, queue_ms=60),
            ],
            interval=IV,
        )
        if own_cpu:
            _cpu(series, [(1.0, BASE_N), (1.0, 24)], [(0.0, BASE_N), (0.0, 24)])
        _node(series, [(0.3, BASE_N), (0.97, 24)])
        return series

    assert "node_contention" not in causes(run_engine(trace(12.0, 33, own_cpu=False), interval=IV))
    assert_detected(run_engine(trace(0.45, 45, own_cpu=False), interval=IV), "node_contention")
    assert_detected(run_engine(trace(12.0, 33, own_cpu=True), interval=IV), "node_contention")


def _new_version(first: Phase, then: Phase) -> dict[str, str]:
    """Version 1 serves at 20 ms; version 2 replaces it on the same pod at the onset."""
    old = triton_model([Phase(BASE_N, rps=20, infer_ms=20)], interval=IV)
    new = triton_model([first, then], interval=IV)
    series = dict(old)
    for k, v in new.items():
        series[k.replace('version="1"', 'version="2"')] = f"_x{BASE_N - 1} {v}"
    return series


def test_cold_start_without_summaries_needs_the_new_versions_own_decay() -> None:
    """A new version slower from its first scrape to its last is heavier code, not cold.

    Against its predecessor's 20 ms it runs 7.5x slower with requests queued, as a cold start
    would at first; with no compute summary to show a few cold executions among warm ones,
    only its own executions getting faster tell a warm-up, and here they never do. The same
    first scrape followed by executions back at 20 ms is a cold start.
    """
    heavier = _new_version(
        Phase(1, rps=20, infer_ms=150, queue_ms=400), Phase(24, rps=20, infer_ms=150, queue_ms=400)
    )
    assert "cold_start" not in causes(run_engine(heavier, interval=IV))
    cold = _new_version(
        Phase(1, rps=20, infer_ms=150, queue_ms=400), Phase(24, rps=20, infer_ms=20, queue_ms=1)
    )
    assert "cold_start" in causes(run_engine(cold, interval=IV))


def test_node_contention_is_not_vetoed_by_a_stall_on_its_saturated_node() -> None:
    """A cold-looking burst on the saturated node is contention's own stall, not a deploy.

    Other work takes the node from 30 % to 97 % busy and slows every execution 1.5x; one
    scrape stalls at 10x and the next is back at the contended level. On a node with no CPU
    to spare that burst is no reload sign, so "the config just changed" does not hold.
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=20, infer_ms=20),
            Phase(2, rps=20, infer_ms=30, queue_ms=5),
            Phase(1, rps=20, infer_ms=200, queue_ms=300),
            Phase(21, rps=20, infer_ms=30, queue_ms=5),
        ],
        interval=IV,
    )
    _cpu(series, [(1.0, BASE_N), (1.0, 24)], [(0.0, BASE_N), (0.0, 24)])
    _node(series, [(0.3, BASE_N), (0.97, 24)])
    assert_detected(run_engine(series, interval=IV), "node_contention")
