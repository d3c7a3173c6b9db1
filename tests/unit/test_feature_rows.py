"""Recorded features read back from a TSDB: mapped to subjects, and incidents judged on them."""

from __future__ import annotations

import math

from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.feature_rows import (
    CONFIDENCE,
    Row,
    SnapshotBuilder,
    failed_snapshot,
    feature_query,
    subject_key,
)
from tritonguard.core.findings import Subject
from tritonguard.core.recorded_incidents import CauseAlerts, FiringCause, RecordedIncidents
from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.alertmanager_webhook import Alert

T = Thresholds()
SUBJECT = Subject("prod", "resnet", "triton-0")
KEY = ("prod", "triton-0", "resnet")


def _row(value: float, **labels: str) -> Row:
    base = {"namespace": "prod", "pod": "triton-0", "model": "resnet"}
    return Row({**base, **labels}, value)


def _snapshot(at: float = 1000.0, **features: float) -> SnapshotBuilder:
    b = SnapshotBuilder(T, 15.0, at)
    for name, value in features.items():
        b.add(name, [_row(value)])
    return b


def test_query_is_one_instant_vector_per_feature_bounded_by_staleness() -> None:
    """The query reads the recorded series for the whole fleet, only within the bound."""
    assert feature_query("queue_share", 45.0) == "last_over_time(tritonguard:queue_share[45s])"
    assert feature_query("p99_us", 0.2) == "last_over_time(tritonguard:p99_us[1s])"


def test_rows_land_on_their_subjects_and_only_a_served_subject_is_fresh() -> None:
    """Each row goes to its (namespace, pod, model); without request_rate nothing is fresh."""
    b = SnapshotBuilder(T, 15.0, 1000.0)
    b.add("request_rate", [_row(40.0), _row(3.0, pod="triton-1")])
    b.add("queue_share", [_row(0.9), _row(0.1, pod="triton-1"), _row(0.5, pod="triton-2")])
    b.add("symptom", [_row(1.0)])
    snap = b.build()
    assert snap.ok
    mine = snap.features[KEY]
    assert mine.fresh and mine.request_rate == 40.0 and mine.queue_share == 0.9
    assert snap.features[("prod", "triton-1", "resnet")].queue_share == 0.1
    # A subject known only by a feature other than the request rate: missing data.
    lone = ("prod", "triton-2", "resnet")
    assert not snap.features[lone].fresh and snap.fresh(lone) is None
    # A recorded feature FeatureSet has no field for is kept beside it.
    assert snap.extra[KEY] == {"symptom": 1.0}
    assert not snap.recovered(KEY)
    assert snap.recovered(("prod", "triton-1", "resnet"))
    assert mine.window_s == max(T.rate_window_s, T.min_scrapes_per_window * 15.0)


def test_nan_unlabelled_and_duplicate_series_are_left_out_and_counted() -> None:
    """NaN or Inf is unknown; a series with no model is no subject; a duplicate is unknown."""
    b = SnapshotBuilder(T, 15.0, 1000.0)
    b.add("request_rate", [_row(40.0)])
    b.add("queue_share", [_row(math.nan)])
    b.add("p99_us", [_row(math.inf)])
    b.add("busy_instances", [Row({"namespace": "prod", "model": ""}, 1.0)])
    # A pod's own feature is no problem: it is kept by pod.
    b.add("pod_seen", [Row({"namespace": "prod", "pod": "triton-0"}, 1.0)])
    # Two answers for one subject (an HA pair without deduplication): neither is believed,
    # whatever order they came in and however often.
    b.add("mean_queue_us", [_row(100.0, replica="a"), _row(100.0, replica="b"), _row(7.0)])
    snap = b.build()
    f = snap.features[KEY]
    assert f.queue_share is None and f.p99_us is None and f.mean_queue_us is None
    assert f.busy_instances is None and f.fresh
    assert snap.problems() == {"unlabelled": 1, "not_finite": 2, "conflicts": 1}
    assert snap.pods == {("prod", "triton-0"): {"pod_seen": 1.0}}
    assert subject_key({"namespace": "prod", "model": ""}) is None


def test_cause_confidences_are_kept_by_cause() -> None:
    """The cause_confidence answer keeps its cause label, per subject."""
    b = _snapshot(request_rate=1.0)
    b.add(CONFIDENCE, [_row(0.8, cause="batching_delay"), _row(0.2, cause="retry_storm")])
    assert b.build().confidences[KEY] == {"batching_delay": 0.8, "retry_storm": 0.2}


def test_a_failed_read_has_nothing_fresh() -> None:
    """A snapshot whose queries did not all answer is not acted on."""
    snap = failed_snapshot(1000.0, 15.0, 60.0, "connection failed")
    assert not snap.ok and snap.fresh(KEY) is None and not snap.recovered(KEY)


def _alert(status: str = "firing", cause: str = "batching_delay", **labels: str) -> Alert:
    name = "Tritonguard" + "".join(p.capitalize() for p in cause.split("_"))
    subject = {"namespace": "prod", "pod": "triton-0", "model": "resnet"}
    return Alert(
        status=status,
        labels={"alertname": name, "cause": cause, **subject, **labels},
        annotations={"summary": "resnet on prod/triton-0: batcher", "confidence": "0.7"},
        fingerprint=f"fp-{cause}-{labels.get('pod', 'triton-0')}",
    )


def test_cause_alerts_keep_only_the_rules_alerts_bounded_and_expiring() -> None:
    """Other alerts are not causes; resolved ones go; the cap drops the oldest; TTL expires."""
    book = CauseAlerts(ttl_s=100.0, max_alerts=2)
    other = Alert(status="firing", labels={"alertname": "TritonSLOBurn", "namespace": "prod"})
    book.update([other, _alert(), _alert(cause="retry_storm")], 0.0)
    assert set(book.firing(0.0)[KEY]) == {"batching_delay", "retry_storm"}
    book.update([_alert(cause="retry_storm", status="resolved")], 1.0)
    assert set(book.firing(1.0)[KEY]) == {"batching_delay"}
    book.update([_alert(pod="triton-1"), _alert(pod="triton-2")], 2.0)
    assert len(book) == 2 and book.dropped == 1 and KEY not in book.firing(2.0)
    assert book.firing(200.0) == {}


def _engine() -> tuple[Engine, RecordedIncidents]:
    engine = Engine(EngineConfig(thresholds=T))
    return engine, RecordedIncidents(engine, max_age_s=30.0)


def _firing(cause: str = "batching_delay") -> dict[tuple[str, str, str], dict[str, FiringCause]]:
    return {KEY: {cause: FiringCause(cause, {"confidence": "0.7"}, 0.0)}}


def test_a_firing_alert_on_fresh_features_opens_at_once_with_recorded_evidence() -> None:
    """The alert held already: the first evaluation opens, told with the recorded numbers.

    The engine's feature view (what guards and verify steps read) answers from the snapshot.
    """
    engine, rec = _engine()
    b = _snapshot(request_rate=40.0, queue_share=0.92, busy_instances=0.05, symptom=1.0)
    b.add(CONFIDENCE, [_row(0.81, cause="batching_delay")])
    events = rec.evaluate(b.build(), _firing(), 1000.0)
    assert [(e.event, e.cause, e.subject) for e in events] == [
        ("opened", "batching_delay", SUBJECT)
    ]
    opened = events[0]
    assert opened.confidence == 0.81
    assert opened.evidence["queue_share"].value == 0.92
    assert opened.evidence["queue_share"].what == "recorded tritonguard:queue_share"
    assert "Queue share of latency 92" in opened.summary
    assert "max_queue_delay_microseconds" in opened.fix.text
    assert engine.is_fresh(SUBJECT, 1001.0)
    assert engine.feature_value(SUBJECT, "queue_share", 1001.0) == 0.92
    assert not engine.recovered(SUBJECT, 1001.0)


def test_stale_missing_or_failed_features_open_nothing_and_read_unknown() -> None:
    """A snapshot too old, a failed read or a subject without features: missing data."""
    engine, rec = _engine()
    fresh = _snapshot(request_rate=40.0, queue_share=0.92).build()
    # Read 31 s before it is used: older than max_age_s.
    assert rec.evaluate(fresh, _firing(), fresh.at + 31.0) == []
    assert not engine.is_fresh(SUBJECT, fresh.at + 31.0)
    assert engine.feature_value(SUBJECT, "queue_share", fresh.at + 31.0) is None
    assert rec.unjudged == [(KEY, "batching_delay")]
    failed = failed_snapshot(1000.0, 15.0, 60.0, "timed out")
    assert rec.evaluate(failed, _firing(), 1000.0) == []
    no_rate = _snapshot(queue_share=0.92).build()
    assert rec.evaluate(no_rate, _firing(), 1000.0) == []
    assert not engine.book.is_open(SUBJECT)


def test_features_going_missing_leave_the_incident_open_and_unknown() -> None:
    """Once open, a read that fails neither resolves nor answers with the old numbers."""
    engine, rec = _engine()
    rec.evaluate(_snapshot(request_rate=40.0, queue_share=0.9).build(), _firing(), 1000.0)
    assert engine.book.is_open(SUBJECT)
    events = rec.evaluate(failed_snapshot(1015.0, 15.0, 60.0, "down"), {}, 1015.0)
    assert events == [] and engine.book.is_open(SUBJECT)
    assert engine.feature_value(SUBJECT, "queue_share", 1015.0) is None
    # Unseen for longer than the retention: closed without recovery evidence.
    late = 1000.0 + T.retention_s + 1.0
    (closed,) = rec.evaluate(failed_snapshot(late, 15.0, 60.0, "down"), {}, late)
    assert closed.event == "resolved" and not closed.recovered


def test_a_resolved_alert_resolves_only_once_the_features_show_recovery() -> None:
    """Without the alert the incident still waits for recorded features without a symptom."""
    engine, rec = _engine()
    rec.evaluate(_snapshot(request_rate=40.0).build(), _firing(), 1000.0)
    later = 1000.0 + T.resolve_after_s + 1.0
    sick = _snapshot(at=later, request_rate=40.0, symptom=1.0).build()
    assert rec.evaluate(sick, {}, later) == []
    well = _snapshot(at=later + 1.0, request_rate=40.0).build()
    (resolved,) = rec.evaluate(well, {}, later + 1.0)
    assert resolved.event == "resolved" and resolved.recovered
    assert engine.recovered(SUBJECT, later + 1.5)


def test_a_fleet_group_counts_the_pods_the_recorded_features_show() -> None:
    """The group opened on recorded features says how many pods serve the model.

    Three pods report resnet; one of them fires: its group is 1 of 3, as the engine's own
    evaluation would count it, not "of 0" (unknown).
    """
    engine, rec = _engine()
    b = SnapshotBuilder(T, 15.0, 1000.0)
    for name, value in (("request_rate", 40.0), ("queue_share", 0.92), ("busy_instances", 0.05)):
        b.add(name, [_row(value, pod=pod) for pod in ("triton-0", "triton-1", "triton-2")])
    events = rec.evaluate(b.build(), _firing(), 1000.0)
    opened = [e for e in events if e.event == "opened"]
    assert len(opened) == 1 and opened[0].group is not None
    assert opened[0].group.of == 3
    assert engine.evaluations == 1 and engine.last_evaluated == 1000.0


def test_a_clashed_symptom_or_request_rate_never_reads_as_recovered() -> None:
    """A symptom or request rate read twice is unknown: the subject is not shown recovered.

    Deleting the clashed symptom must not read as its absence, which would resolve an open
    incident with recovered=True on data that cannot be told apart.
    """
    b = _snapshot(request_rate=40.0)
    b.add("symptom", [_row(1.0), _row(0.0)])
    assert not b.build().recovered(KEY)
    c = _snapshot(request_rate=40.0)
    c.add("request_rate", [_row(40.0)])
    assert not c.build().recovered(KEY)
    assert _snapshot(request_rate=40.0).build().recovered(KEY)


def test_a_clashed_symptom_leaves_the_incident_open() -> None:
    """With its alert resolved, an incident stays open while the symptom series clash."""
    engine, rec = _engine()
    rec.evaluate(_snapshot(request_rate=40.0).build(), _firing(), 1000.0)
    later = 1000.0 + T.resolve_after_s + 1.0
    clash = _snapshot(at=later, request_rate=40.0)
    clash.add("symptom", [_row(1.0), _row(1.0)])
    assert rec.evaluate(clash.build(), {}, later) == []
    assert engine.book.is_open(SUBJECT) and not engine.recovered(SUBJECT, later + 0.5)


def test_shedding_is_not_recovery_even_without_a_symptom() -> None:
    """Rejecting 75 % of requests keeps the incident open, as the engine's own recovery does."""
    engine, rec = _engine()
    rec.evaluate(_snapshot(request_rate=40.0).build(), _firing(), 1000.0)
    later = 1000.0 + T.resolve_after_s + 1.0
    shedding = _snapshot(at=later, request_rate=10.0, failure_rejected=30.0).build()
    assert rec.evaluate(shedding, {}, later) == []
    assert engine.book.is_open(SUBJECT) and not engine.recovered(SUBJECT, later + 0.5)
    served = _snapshot(at=later + 1.0, request_rate=40.0, failure_rejected=0.0).build()
    (resolved,) = rec.evaluate(served, {}, later + 1.0)
    assert resolved.event == "resolved" and resolved.recovered
