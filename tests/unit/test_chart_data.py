"""The incident chart's numbers (core/chart_data.py), from a series store fed Triton-shaped scrapes.

The store gets what a scrape of Triton's /metrics gives (cumulative counters, the pending
gauge, ingress-nginx's request counters): the chart must read each scrape's own increase back,
leave unknown points unknown, and pick the signal the finding was decided by.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from tests.unit.synthetic import START, Phase, samples_of, triton_model
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.baselines import Baseline
from tritonguard.core.chart_data import (
    SIGNALS,
    chart_data,
    deciding_signal,
    marks_of,
    newest_time,
)
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.samples import Sample
from tritonguard.core.series_notation import parse_series_selector
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.thresholds import Thresholds

INTERVAL = 5.0
SUBJECT = Subject("prod", "resnet", "triton-0")
T = Thresholds()
HEALTHY = Phase(n=24, rps=20.0, queue_ms=1.0, input_ms=0.2, infer_ms=10.0, output_ms=0.3)
# A deploy raises max_queue_delay: requests wait 100 ms, compute stays the same.
FAULTY = Phase(n=12, rps=20.0, queue_ms=100.0, input_ms=0.2, infer_ms=10.0, output_ms=0.3)
ONSET = START + HEALTHY.n * INTERVAL


def store_of(samples: Iterable[Sample]) -> SeriesStore:
    """Return a store holding the samples, as the engine ingests scrapes."""
    store = SeriesStore(retention_s=T.retention_s)
    ordered = sorted(samples, key=lambda s: s.timestamp or 0.0)
    for s in ordered:
        store.add(s, s.timestamp or 0.0)
    return store


def scrapes(*phases: Phase, drop: range = range(0)) -> list[Sample]:
    """Return the model's samples, without the scrapes numbered in ``drop`` (lost scrapes)."""
    samples = samples_of(triton_model(list(phases), interval=INTERVAL), interval=INTERVAL)
    lost = {START + i * INTERVAL for i in drop}
    return [s for s in samples if s.timestamp not in lost]


def incident(evidence: dict[str, Evidence] | None = None, **kw: Any) -> IncidentEvent:
    """Return a batching-delay incident on the model, opened at the onset."""
    base: dict[str, Any] = dict(
        event="opened",
        incident_id="inc-chart",
        cause="batching_delay",
        subject=SUBJECT,
        at=ONSET + 20,
        confidence=0.8,
        summary="Requests wait out max_queue_delay.",
        evidence=evidence
        if evidence is not None
        else {
            "queue_share": Evidence(0.9, "ratio", 30, "queue share", 1.0),
            "busy_instances": Evidence(0.2, "instances", 30, "busy", 1.0),
            "instance_count": Evidence(1.0, "instances", 0, "model config instance_group", 0.9),
            "baseline_mean_latency_ms": Evidence(11.5, "ms", 600, "healthy", 0.0),
        },
        fix=Fix("Lower max_queue_delay_microseconds."),
        opened_at=ONSET + 20,
    )
    base.update(kw)
    return IncidentEvent(**base)


def record(action: str, status: str, at: float, **kw: Any) -> ActionRecord:
    """Return an audit record of the incident's playbook."""
    base: dict[str, Any] = dict(
        at=at,
        incident_id="inc-chart",
        event="opened",
        playbook="batching-delay",
        subject=SUBJECT.key(),
        action=action,
        params={},
        dry_run=status == "planned",
        status=status,
    )
    base.update(kw)
    return ActionRecord(**base)


def last_scrape(*phases: Phase) -> float:
    """Return the time of the last scrape of the phases (the first scrape only starts them)."""
    return START + sum(p.n for p in phases) * INTERVAL


def test_each_point_is_one_scrape_split_into_queue_and_compute() -> None:
    """Per scrape: Δqueue / Δsuccess, and latency less queue; the split steps up at the onset."""
    store = store_of(scrapes(HEALTHY, FAULTY))
    end = last_scrape(HEALTHY, FAULTY)
    data = chart_data(store, T, incident(), now=end, minutes=10)
    n = HEALTHY.n + FAULTY.n
    assert len(data.times) == n, "every scrape after the first, which only anchors"
    assert data.times == [START + i * INTERVAL for i in range(1, n + 1)]
    assert data.starts == [START + i * INTERVAL for i in range(n)]
    assert data.start == START and data.end == end, "the chart starts with the data"
    before = [q for t, q in zip(data.times, data.queue_ms, strict=True) if t < ONSET]
    after = [q for t, q in zip(data.times, data.queue_ms, strict=True) if t > ONSET]
    assert before == pytest.approx([1.0] * len(before))
    assert after == pytest.approx([100.0] * len(after))
    assert data.compute_ms == pytest.approx([10.5] * len(data.times))
    assert data.baseline_ms == 11.5 and data.onset == ONSET + 20 and data.has_data()


def test_lost_scrapes_and_idle_scrapes_are_gaps_never_zeros() -> None:
    """A 30 s hole in the data and a scrape with no request completed are unknown, not 0."""
    idle = Phase(n=4, rps=0.0)
    store = store_of(scrapes(HEALTHY, idle, FAULTY, drop=range(10, 16)))
    data = chart_data(store, T, incident(), now=last_scrape(HEALTHY, idle, FAULTY), minutes=10)
    by_time = dict(zip(data.times, data.queue_ms, strict=True))
    hole_end = START + 16 * INTERVAL
    assert START + 12 * INTERVAL not in by_time, "no point inside the hole"
    assert by_time[hole_end] is None, "the increase across the hole is no scrape's reading"
    for i in range(HEALTHY.n + 1, HEALTHY.n + idle.n + 1):
        assert by_time[START + i * INTERVAL] is None, "nothing completed: latency unknown"
    assert 0.0 not in data.queue_ms and 0.0 not in data.compute_ms
    assert None not in data.queue_ms[-5:]


def test_the_deciding_signal_is_the_heaviest_evidence_the_split_does_not_show() -> None:
    """queue_share weighs as much, but the latency panel shows it: busy instances is followed."""
    ev = incident().evidence
    assert deciding_signal(ev) == "busy_instances"
    storm = {
        "mean_latency_ms": Evidence(1800.0, "ms", 30, "latency", 0.0),
        "pending": Evidence(4761.0, "requests", 30, "pending", 0.1),
        "ingress_timeouts_share": Evidence(0.98, "ratio", 30, "timed out", 1.0),
        "triton_canceled_share": Evidence(0.0, "ratio", 30, "cancelled", 0.0),
    }
    assert deciding_signal(storm) == "ingress_timeouts_share"
    # Ties keep the signature's order; configured values and ages cannot be followed.
    config_only = {
        "instance_count": Evidence(1.0, "instances", 0, "model config", 1.0),
        "age_s": Evidence(8.0, "s", 0, "age", 0.5),
        "reload_events": Evidence(3.0, "count", 60, "resets", 0.1),
    }
    assert deciding_signal(config_only) == "reload_events"
    assert deciding_signal({"queue_share": Evidence(0.9, "ratio", 30, "q", 1.0)}) is None


def test_the_signal_is_read_per_scrape_with_its_reference_line() -> None:
    """Busy instances per scrape against the configured count, labelled as the message says."""
    store = store_of(scrapes(HEALTHY, FAULTY))
    data = chart_data(store, T, incident(), now=last_scrape(HEALTHY, FAULTY))
    # 20 req/s × 10.5 ms of compute per execution (batch 1) = 0.21 busy instances.
    assert data.signal == "busy_instances"
    assert data.signal_values == pytest.approx([0.21] * len(data.times))
    assert data.signal_reference == 1.0 and data.signal_reference_label == "configured"
    assert data.signal_label == "Busy instances"
    assert data.signal_evidence == "Busy instances 0.2 of 1 (20 %)"


def test_a_ratio_against_the_baseline_is_drawn_as_the_feature_with_its_healthy_value() -> None:
    """compute_vs_baseline: compute per inference in ms, the healthy median as the line."""
    slow = Phase(n=12, rps=20.0, queue_ms=1.0, input_ms=0.2, infer_ms=30.0, output_ms=0.3)
    store = store_of(scrapes(HEALTHY, slow))
    ev = {"compute_vs_baseline": Evidence(2.9, "ratio", 30, "compute vs healthy", 1.0)}
    base = Baseline({"compute_per_inference_us": 10_500.0}, span_s=600, snapshots=100)
    data = chart_data(
        store,
        T,
        incident(ev, cause="too_many_instances"),
        now=last_scrape(HEALTHY, slow),
        baseline=base,
    )
    assert data.signal_label == "Compute per inference (ms)" and data.signal_unit == "ms"
    assert data.signal_reference == pytest.approx(10.5)
    assert data.signal_values[0] == pytest.approx(10.5)
    assert data.signal_values[-1] == pytest.approx(30.5)


def test_shares_are_percent_and_a_timeout_status_not_yet_exported_reads_zero() -> None:
    """ingress-nginx adds the 499 series at its first timeout: before it, 0 %, after, the share."""
    samples = scrapes(HEALTHY, FAULTY)
    ingress = 'nginx_ingress_controller_requests{namespace="prod",ingress="resnet",status="%s"}'
    ok_series, timeouts = ingress % "200", ingress % "499"
    n = HEALTHY.n + FAULTY.n
    for i in range(n + 1):
        t = START + i * INTERVAL
        name, labels = parse_series_selector(ok_series)
        samples.append(Sample(name, labels, 100.0 * i, t))
        if i >= HEALTHY.n:
            name, labels = parse_series_selector(timeouts)
            samples.append(Sample(name, labels, 300.0 * (i - HEALTHY.n + 1), t))
    store = store_of(samples)
    ev = {"ingress_timeouts_share": Evidence(3.0, "ratio", 30, "timed out", 1.0)}
    data = chart_data(store, T, incident(ev, cause="retry_storm"), now=last_scrape(HEALTHY, FAULTY))
    assert data.signal_unit == "%"
    by_time = dict(zip(data.times, data.signal_values, strict=True))
    assert by_time[START + INTERVAL] == 0.0, "no timeout series yet: none timed out"
    assert by_time[ONSET - INTERVAL] == 0.0
    # 60 timeouts/s of 80 requests/s at the ingress, from the scrape the 499s appeared in.
    assert by_time[ONSET] == pytest.approx(75.0)
    assert by_time[last_scrape(HEALTHY, FAULTY)] == pytest.approx(75.0)


def test_actions_are_marked_notifications_and_guards_are_not() -> None:
    """Steps that ran, would run, failed or were rolled back, and verification, in time order."""
    recs = [
        record("slack.post", "ran", ONSET + 21),
        record("*", "skipped", ONSET + 22, guard="cooldown"),
        record("triton.update_config", "planned", ONSET + 25),
        record("verify", "ran", ONSET + 85),
        record("triton.update_config", "ran", ONSET + 30),
        record("kubernetes.scale", "failed", ONSET + 40),
        record("triton.update_config", "rolled_back", ONSET + 90, phase="rollback"),
        record("triton.load", "ran", START - 3600),
    ]
    marks = marks_of(recs, START, ONSET + 100)
    assert [(m.at - ONSET, m.text, m.kind) for m in marks] == [
        (25, "triton.update_config (would run)", "planned"),
        (30, "triton.update_config", "ran"),
        (40, "kubernetes.scale (failed)", "failed"),
        (85, "verified", "verify"),
        (90, "triton.update_config (rolled back)", "rolled_back"),
    ]
    store = store_of(scrapes(HEALTHY, FAULTY))
    data = chart_data(store, T, incident(), recs, now=last_scrape(HEALTHY, FAULTY))
    assert [m.text for m in data.marks][:2] == [
        "triton.update_config (would run)",
        "triton.update_config",
    ]


def test_the_window_is_the_last_minutes_and_reaches_back_to_the_onset() -> None:
    """Two minutes asked for, but the incident opened five minutes ago: the onset stays in view."""
    long = Phase(n=60, rps=20.0, queue_ms=100.0, input_ms=0.2, infer_ms=10.0, output_ms=0.3)
    store = store_of(scrapes(HEALTHY, long))
    end = last_scrape(HEALTHY, long)
    recent = chart_data(store, T, incident(), now=end, minutes=2, resolved_at=end)
    assert recent.start == pytest.approx(ONSET + 20 - 60)
    assert recent.resolved_at == end
    late = incident(opened_at=end - 60, at=end - 60)
    short = chart_data(store, T, late, now=end, minutes=2)
    assert short.start == end - 120 and short.times[0] == end - 115


def test_many_scrapes_merge_into_at_most_max_points_that_still_tile() -> None:
    """Merged points cover consecutive spans: each increase counts once."""
    store = store_of(scrapes(HEALTHY, FAULTY))
    data = chart_data(store, T, incident(), now=last_scrape(HEALTHY, FAULTY), max_points=10)
    assert len(data.times) <= 10
    assert data.starts[1:] == data.times[:-1]
    assert data.times[-1] == last_scrape(HEALTHY, FAULTY)
    assert data.compute_ms == pytest.approx([10.5] * len(data.times))


def test_an_unknown_subject_has_nothing_to_draw() -> None:
    """No series for the subject: no points, and has_data says so."""
    store = store_of(scrapes(HEALTHY))
    other = incident(subject=Subject("prod", "bert", "triton-1"))
    data = chart_data(store, T, other, now=last_scrape(HEALTHY))
    assert data.times == [] and not data.has_data()
    assert newest_time(store, other.subject) is None
    assert newest_time(store, SUBJECT) == last_scrape(HEALTHY)


def test_every_signal_has_a_label_and_a_known_unit() -> None:
    """The table the docstring describes: labels for people, units the renderer knows."""
    for name, sig in SIGNALS.items():
        assert sig.label, name
        assert sig.unit in ("", "%", "ms", "req/s", "s", "MB/s"), name


def test_a_model_across_pods_is_one_point_per_round_of_scrapes() -> None:
    """Two pods scraped a second apart: the model-wide chart steps once per interval."""
    pod_a = samples_of(triton_model([HEALTHY, FAULTY], interval=INTERVAL), interval=INTERVAL)
    pod_b = samples_of(
        triton_model([HEALTHY, FAULTY], interval=INTERVAL, pod="triton-1"),
        interval=INTERVAL,
        start=START + 1.0,
    )
    store = store_of([*pod_a, *pod_b])
    model_wide = incident(subject=Subject("prod", "resnet", ""))
    data = chart_data(store, T, model_wide, now=last_scrape(HEALTHY, FAULTY) + 1.0)
    spacing = {round(b - a, 6) for a, b in zip(data.starts, data.times, strict=True)}
    assert spacing == {INTERVAL}
    assert data.queue_ms[:5] == pytest.approx([1.0] * 5)
    assert data.queue_ms[-5:] == pytest.approx([100.0] * 5)
    assert data.compute_ms == pytest.approx([10.5] * len(data.times))
