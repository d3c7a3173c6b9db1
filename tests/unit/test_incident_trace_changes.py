"""An incident's own trace (the flight recorder's) carries the change it named, for replay."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.unit.test_rollout_changes import ROLLOUT, incident
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Subject
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_store import SeriesStore
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.sources.replay import load_trace

SUBJECT = Subject("ml", "ranker", "triton-a-7-x")
BEFORE = {"dynamic_batching": {"max_queue_delay_microseconds": 500}}
AFTER = {"dynamic_batching": {"max_queue_delay_microseconds": 150000}}


def _named_change() -> Engine:
    """Return an engine that saw the rollout and the config change the incident follows."""
    engine = Engine()
    engine.note_rollout("ml", SUBJECT.pod, ROLLOUT)
    engine.note_model_config(SUBJECT, BEFORE, at=990.0)
    engine.note_model_config(SUBJECT, AFTER, at=1010.0)
    return engine


def test_the_recorded_trace_replays_to_the_change_the_incident_named(tmp_path: Path) -> None:
    """Config reads and the rollout go into the trace; replayed, the engine names them again.

    They survive the memory bound trimming the capture's oldest samples.
    """
    change = _named_change().change_before(SUBJECT, 1040.0)
    assert change is not None
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=60.0, max_bytes=1)
    opened = incident(change)
    recorder.on_event(opened)
    labels = make_labels({"model": "ranker", "namespace": "ml", "pod": SUBJECT.pod})
    for t in range(1040, 1040 + 1200):
        store.add(Sample("nv_inference_request_success", labels, t, float(t)), t)
        recorder.observe([], t)
    assert recorder.dropped > 0
    path = recorder.on_event(replace(opened, event="resolved", at=2240.0))
    assert path is not None
    engine = Engine()
    for _ in drive(engine, load_trace(path), eval_interval_s=60.0):
        pass
    replayed = engine.change_before(SUBJECT, 1040.0)
    assert replayed is not None
    assert replayed.summary() == change.summary()
    assert replayed.rollout == ROLLOUT


def test_a_change_named_only_by_an_update_is_recorded_too(tmp_path: Path) -> None:
    """An incident opened before its config read names the change in an update; kept as well."""
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=60.0)
    opened = incident(None)
    recorder.on_event(opened)
    labels = make_labels({"model": "ranker", "namespace": "ml", "pod": SUBJECT.pod})
    store.add(Sample("nv_inference_request_success", labels, 1.0, 1041.0), 1041.0)
    recorder.observe([], 1041.0)
    change = _named_change().change_before(SUBJECT, 1040.0)
    recorder.on_event(replace(opened, event="updated", at=1045.0, change=change))
    path = recorder.on_event(replace(opened, event="resolved", at=1100.0, change=change))
    assert path is not None
    names = [s.name for s in load_trace(path)]
    assert names.count("tritonguard_model_config_info") == 2
    assert names.count("tritonguard_rollout_info") == 1
