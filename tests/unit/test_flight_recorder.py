"""Flight recorder: captures read from the engine's store, bounded, and replayable as recorded."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_store import SeriesStore
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.sources.replay import load_trace

SUBJECT = Subject("prod", "m", "p")


def _opened(incident_id: str, subject: Subject = SUBJECT, at: float = 0.0) -> IncidentEvent:
    """Return an incident opening on the recorded subject."""
    return IncidentEvent(
        event="opened",
        incident_id=incident_id,
        cause="batching_delay",
        subject=subject,
        at=at,
        confidence=0.9,
        summary="",
        evidence={"x": Evidence(1.0, "ratio", 30, "x")},
        fix=Fix(""),
        opened_at=at,
    )


def test_open_captures_share_one_memory_bound(tmp_path: Path) -> None:
    """However long the incidents, the open captures hold at most the bound's worth."""
    store = SeriesStore()
    bound = 200_000
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=1e9, max_bytes=bound)
    labels = [
        make_labels({"model": "m", "namespace": "prod", "pod": "p", "version": str(i)})
        for i in range(50)
    ]
    recorder.on_event(_opened("a"))
    recorder.on_event(_opened("b"))
    for t in range(1, 400):
        store.add_many(
            [Sample("nv_inference_request_success", lab, float(t), None) for lab in labels],
            float(t),
        )
        recorder.observe([], float(t))
        assert recorder.held_bytes() <= bound
    assert recorder.dropped > 0
    assert recorder.held() > 0


def test_without_open_incidents_nothing_is_held(tmp_path: Path) -> None:
    """The recorder keeps no copy of the stream: memory follows open incidents, not the fleet."""
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store)
    for t in range(1, 100):
        samples = [
            Sample(
                "nv_inference_request_success",
                make_labels({"model": f"m{i}", "namespace": "prod", "pod": f"p{i}"}),
                float(t),
                None,
            )
            for i in range(100)
        ]
        store.add_many(samples, float(t))
        recorder.observe(samples, float(t))
    assert recorder.held() == 0 and recorder.held_bytes() == 0


def test_a_capture_keeps_the_subjects_series_and_its_pods_and_hosts(tmp_path: Path) -> None:
    """The subject's model, its pod's series without a model, its node, hosts and HPAs.

    Not other models or pods, nor nodes the pod does not run on (kube_pod_info places it).
    """
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=60.0)
    series = {
        "own": ("nv_inference_request_success", {"model": "m", "namespace": "prod", "pod": "p"}),
        "other_model": (
            "nv_inference_request_success",
            {"model": "x", "namespace": "prod", "pod": "p"},
        ),
        "other_pod": (
            "nv_inference_request_success",
            {"model": "m", "namespace": "prod", "pod": "q"},
        ),
        "pod_cpu": ("container_cpu_usage_seconds_total", {"namespace": "prod", "pod": "p"}),
        "gpu_mapped": (
            "DCGM_FI_DEV_GPU_UTIL",
            {
                "exported_pod": "p",
                "exported_namespace": "prod",
                "pod": "dcgm-1",
                "namespace": "gpu",
            },
        ),
        "gpu_elsewhere": (
            "DCGM_FI_DEV_GPU_UTIL",
            {
                "exported_pod": "q",
                "exported_namespace": "prod",
                "pod": "dcgm-1",
                "namespace": "gpu",
            },
        ),
        "placement": (
            "kube_pod_info",
            {"namespace": "prod", "pod": "p", "node": "n1", "host_ip": "10.0.0.1"},
        ),
        "node": (
            "node_cpu_seconds_total",
            {"instance": "10.0.0.1:9100", "cpu": "0", "mode": "idle"},
        ),
        "other_node": (
            "node_cpu_seconds_total",
            {"instance": "10.0.0.2:9100", "cpu": "0", "mode": "idle"},
        ),
        "hpa": (
            "kube_horizontalpodautoscaler_status_desired_replicas",
            {"namespace": "prod", "horizontalpodautoscaler": "p", "pod": "ksm-0"},
        ),
    }
    for t in (100.0, 110.0, 120.0):
        store.add_many([Sample(n, make_labels(lab), t, None) for n, lab in series.values()], t)
    recorder.on_event(_opened("i", at=120.0))
    path = recorder.on_event(replace(_opened("i", at=120.0), event="resolved", at=130.0))
    assert path is not None
    kept = {(s.name, s.labels) for s in load_trace(path)}
    want = {k for k, (n, lab) in series.items() if (n, make_labels(lab)) in kept}
    assert want == {"own", "pod_cpu", "gpu_mapped", "placement", "node", "hpa"}


def test_counters_are_written_as_scraped_and_replay_to_the_same_resets_and_increases(
    tmp_path: Path,
) -> None:
    """A counter reset inside the capture is written as the drop the scrape showed.

    The store keeps counters reset-adjusted; the trace holds the raw values, so a replay's
    store has the same reset times (restarts are evidence) and the same adjusted increases.
    """
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=1000.0)
    labels = make_labels({"model": "m", "namespace": "prod", "pod": "p"})
    raw = [100.0, 130.0, 5.0, 40.0, 90.0, 3.0, 20.0, 60.0]
    for k, value in enumerate(raw[:4]):
        store.add(Sample("nv_inference_request_success", labels, value, None), 10.0 * (k + 1))
    recorder.on_event(_opened("i", at=40.0))
    for k, value in enumerate(raw[4:], start=4):
        store.add(Sample("nv_inference_request_success", labels, value, None), 10.0 * (k + 1))
        recorder.observe([], 10.0 * (k + 1))
    path = recorder.on_event(replace(_opened("i", at=40.0), event="resolved", at=80.0))
    assert path is not None
    written = [s.value for s in load_trace(path) if s.name == "nv_inference_request_success"]
    assert written == raw
    replayed = SeriesStore()
    replayed.add_many(load_trace(path), 0.0)
    live = store.stored("nv_inference_request_success", labels)
    again = replayed.stored("nv_inference_request_success", labels)
    assert live is not None and again is not None
    assert again.resets == live.resets == [30.0, 60.0]
    assert list(again.values) == list(live.values)


def test_a_recorded_trace_replays_to_the_same_incident(tmp_path: Path) -> None:
    """The trace the recorder writes from the store, replayed, opens the same incident.

    The recorder is fed no samples at all (as for targets the scrape writes straight into
    the store): everything it writes comes from the engine's store.
    """
    series = triton_model(
        [
            Phase(24, rps=20, infer_ms=20),
            Phase(24, rps=48, infer_ms=20, queue_ms=900, pending=90, canceled_rps=15),
            Phase(30, rps=20, infer_ms=20),
        ],
        interval=5.0,
    )
    engine = Engine()
    recorder = FlightRecorder(tmp_path, AuditStore(), engine.store, pre_s=120.0)
    live: list[IncidentEvent] = []
    paths: dict[str, Path] = {}
    for t, events in drive(engine, samples_of(series, interval=5.0), eval_interval_s=5.0):
        recorder.observe([], t)
        for ev in events:
            path = recorder.on_event(ev)
            live.append(ev)
            if path is not None:
                paths[ev.incident_id] = path
    storm = next(e for e in live if e.event == "opened" and e.cause == "retry_storm")
    assert storm.incident_id in paths, "the incident did not resolve into a trace"
    replayed = Engine()
    again = [
        e
        for _, events in drive(replayed, load_trace(paths[storm.incident_id]), eval_interval_s=5.0)
        for e in events
        if e.event == "opened"
    ]
    assert [(e.cause, e.subject, e.opened_at) for e in again] == [
        (storm.cause, storm.subject, storm.opened_at)
    ]
