"""Flight recorder at fleet scale: pre-onset history kept when one scrape outgrows the old ring."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from benchmarks.fleet_gen import Fleet, FleetSpec
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.samples import label
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.targets import target_of
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.sources.replay import load_trace

# The ring the recorder used to keep: 96 MiB at 600 bytes a sample.
OLD_RING_SAMPLES = 96 * 1024 * 1024 // 600
PRE_S = 60.0


def test_pre_onset_history_is_kept_for_a_fleet_larger_than_the_old_ring(tmp_path: Path) -> None:
    """200 pods x 20 models scrape more samples than the old ring held; the capture keeps all.

    The scrapes go straight into the store (no samples reach the recorder, as on the fast
    ingest path), and the incident's trace still holds its subject's every series from
    ``PRE_S`` before onset; the recorder holds only that capture, not the fleet.
    """
    fleet = Fleet(FleetSpec(pods=200, models=20, interval_s=10.0))
    store = SeriesStore()
    ingests = {
        t.name: TargetIngest(store, extra_labels=t.labels, honor_labels=t.honor_labels)
        for t in fleet.targets
    }
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=PRE_S)
    ns, pod = fleet.pods[0]
    model = f"{fleet.deployments[0]}-m00"
    subject = Subject(ns, model, pod)
    onset = fleet.timestamp(8)
    opened = IncidentEvent(
        event="opened",
        incident_id="big",
        cause="retry_storm",
        subject=subject,
        at=onset,
        confidence=0.9,
        summary="",
        evidence={"x": Evidence(1.0, "ratio", 30, "x")},
        fix=Fix(""),
        opened_at=onset,
    )
    largest = 0
    for t, texts in fleet.scrape_many(11):
        largest = max(largest, sum(text.count("\n") for text in texts.values()))
        for name, text in texts.items():
            ingests[name].ingest(text, t)
        recorder.observe([], t)
        if t == onset:
            recorder.on_event(opened)
    assert largest > OLD_RING_SAMPLES
    path = recorder.on_event(replace(opened, event="resolved", at=fleet.timestamp(10)))
    assert path is not None
    by_series: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
    for s in load_trace(path):
        assert s.timestamp is not None
        by_series.setdefault((s.name, s.labels), []).append(s.timestamp)
    own = [k for k in by_series if k[0].startswith("nv_") and label(k[1], "model") == model]
    assert own and all(target_of(k[1]) == (ns, pod) for k in own)
    # Every series of the subject's model, from PRE_S before onset to the resolution.
    want = [onset - PRE_S + 10.0 * k for k in range(int(PRE_S / 10.0) + 3)]
    assert all(by_series[k] == want for k in own)
    assert any(k[0] == "node_cpu_seconds_total" for k in by_series)
    assert recorder.held() == 0
