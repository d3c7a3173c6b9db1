"""The diagnosis engine: samples in, incident transitions out; the same for live and replay."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from tritonguard.core.features import FeatureReader, FeatureSet, SubjectKey
from tritonguard.core.findings import Finding, IncidentEvent, Subject
from tritonguard.core.incidents import IncidentBook
from tritonguard.core.model_config import ModelConfig, parse_model_config
from tritonguard.core.recurrence import find_spikes, per_scrape_ratio
from tritonguard.core.samples import Sample, label
from tritonguard.core.series_store import Series, SeriesStore
from tritonguard.core.signatures import SIGNATURES
from tritonguard.core.signatures.context import Baseline, Birth, Context, symptom_of
from tritonguard.core.thresholds import Thresholds

# Features the baseline keeps: each is compared against the model's own healthy history.
BASELINE_FEATURES: tuple[str, ...] = (
    "mean_latency_us",
    "mean_queue_us",
    "p99_us",
    "queue_share",
    "compute_per_inference_us",
    "compute_per_exec_us",
    "request_rate",
    "inference_rate",
    "busy_instances",
    "pending",
    "container_cpu_cores",
    "input_share",
    "output_share",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "ingress_rate",
    "node_cpu_busy",
    "cpu_host_util",
)

_COMPUTE = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Engine settings: thresholds, and whether to keep per-subject diagnostics."""

    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass(slots=True)
class _Snapshot:
    t: float
    values: dict[str, float]
    healthy: bool


@dataclass(slots=True)
class Diagnosis:
    """One subject's current state: features, baseline and every finding (for `diagnose`)."""

    subject: Subject
    features: FeatureSet
    baseline: Baseline | None
    findings: list[Finding]
    symptom_reasons: tuple[str, ...]


def subject_of(key: SubjectKey) -> Subject:
    """Subject for a (namespace, pod, model) key."""
    return Subject(namespace=key[0], model=key[2], pod=key[1])


class Engine:
    """Pure evaluator: feed samples with `ingest`, call `evaluate` on a clock of your choice."""

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.t = self.config.thresholds
        self.store = SeriesStore(retention_s=self.t.retention_s)
        self.book = IncidentBook(self.t)
        self._configs: dict[tuple[str, str, str], ModelConfig] = {}
        self._history: dict[SubjectKey, deque[_Snapshot]] = {}
        self._known: set[SubjectKey] = set()
        self.last_evaluated: float | None = None
        self.evaluations = 0
        self.last_diagnoses: dict[SubjectKey, Diagnosis] = {}

    # ---- inputs -------------------------------------------------------------------------
    def ingest(self, samples: Iterable[Sample], now: float) -> None:
        """Add samples (a scrape, a PromQL result, a replay step); untimed ones are at ``now``."""
        self.store.add_many(samples, now)

    def note_model_config(self, subject: Subject, config: Mapping[str, Any]) -> None:
        """Remember a model's config (JSON from GET /v2/models/{m}/config)."""
        parsed = parse_model_config(config)
        self._configs[(subject.namespace, subject.pod, subject.model)] = parsed
        self._configs[(subject.namespace, "", subject.model)] = parsed

    def model_config(self, key: SubjectKey) -> ModelConfig | None:
        """Return the most specific known config for a subject."""
        ns, pod, model = key
        for k in ((ns, pod, model), (ns, "", model), ("", "", model)):
            if k in self._configs:
                return self._configs[k]
        return None

    # ---- queries ------------------------------------------------------------------------
    def open_incidents(self) -> list[IncidentEvent]:
        """Incidents open now, with their current finding."""
        return self.book.open_incidents()

    def announced_incidents(self) -> list[IncidentEvent]:
        """Incidents open now, as their last transition announced them (what playbooks act on)."""
        return self.book.announced()

    def _key(self, subject: Subject) -> SubjectKey:
        return (subject.namespace, subject.pod, subject.model)

    def features(self, subject: Subject, now: float) -> FeatureSet | None:
        """Return a subject's current features (pod "" = the model across pods); None if unknown."""
        reader = FeatureReader(self.store, self.t, now)
        key = self._key(subject)
        if key not in reader.subjects() and key not in reader.model_subjects():
            return None
        return reader.compute(key)

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """One current feature value; None when unknown or stale (never act on stale data)."""
        f = self.features(subject, now)
        if f is None or not f.fresh:
            return None
        value = f.as_dict().get(name)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Whether the subject's newest data is recent enough to act on."""
        f = self.features(subject, now)
        return f is not None and f.fresh

    # ---- evaluation ---------------------------------------------------------------------
    def evaluate(self, now: float) -> list[IncidentEvent]:
        """Evaluate every subject at ``now``; return incident transitions."""
        self.evaluations += 1
        self.last_evaluated = now
        events: list[IncidentEvent] = []
        self.store.expire(now)
        reader = FeatureReader(self.store, self.t, now)
        keys = reader.subjects()
        for key in keys:
            events.extend(self._evaluate_subject(reader, key, now))
        for gone in self._known - set(keys):
            self._history.pop(gone, None)
            self.last_diagnoses.pop(gone, None)
            events.extend(self.book.forget(subject_of(gone), now))
        self._known = set(keys)
        return events

    def _evaluate_subject(
        self, reader: FeatureReader, key: SubjectKey, now: float
    ) -> list[IncidentEvent]:
        f = reader.compute(key)
        subject = subject_of(key)
        if not f.fresh:
            # Missing data is unknown: no finding opens, and no open incident resolves on it.
            self.last_diagnoses.pop(key, None)
            return []
        birth = self._birth(reader, key, f, now)
        base = self._baseline(key, now, f.window_s, f.interval_s)
        per_scrape = per_scrape_ratio(
            reader.series("nv_inference_request_duration_us", key),
            reader.series("nv_inference_request_success", key),
            now - self.t.period_lookback_s,
            now,
        )
        recent = [v for at, v in per_scrape if at > now - f.window_s + 0.1 * f.interval_s]
        symptom = symptom_of(f, base, self.t, recent)
        events_seen = self._reload_events(reader, key, now)
        spikes = find_spikes(
            per_scrape, self.t.spike_factor, merge_s=max(self.t.burst_merge_s, 1.5 * f.interval_s)
        )
        ctx = Context(
            subject=subject,
            now=now,
            features=f,
            baseline=base,
            config=self.model_config(key),
            thresholds=self.t,
            symptom=symptom,
            birth=birth,
            latency_spikes=spikes,
            reload_events=events_seen,
        )
        findings = [res for sig in SIGNATURES.values() if (res := sig(ctx)) is not None]
        self.last_diagnoses[key] = Diagnosis(subject, f, base, findings, symptom.reasons)
        strong = any(x.confidence >= self.t.close_confidence for x in findings)
        in_birth = birth is not None and now - birth.born_at <= self._early_span(f)
        healthy = (
            not symptom.up
            and not strong
            and not self.book.is_open(subject)
            and not in_birth
            and (f.request_rate or 0) > 0
        )
        self._remember(key, now, f, healthy)
        # A server still turning work away (queue policy REJECT) has not recovered, however
        # good the latency of what it serves: resolving now would lift the shedding into the
        # overload that caused it.
        served = f.request_rate or 0.0
        rejected = f.failure_rejected or 0.0
        shedding = rejected > 0 and rejected / (served + rejected) >= self.t.timeout_failure_share
        recovered = not symptom.up and not shedding
        return self.book.observe(subject, findings, now, f.interval_s, recovered=recovered)

    def _early_span(self, f: FeatureSet) -> float:
        return max(30.0, 3 * f.interval_s)

    def _remember(self, key: SubjectKey, now: float, f: FeatureSet, healthy: bool) -> None:
        hist = self._history.setdefault(key, deque())
        values = {n: v for n in BASELINE_FEATURES if isinstance(v := getattr(f, n), float)}
        hist.append(_Snapshot(now, values, healthy))
        horizon = now - self.t.baseline_lookback_s
        while hist and hist[0].t < horizon:
            hist.popleft()

    def _baseline(
        self, key: SubjectKey, now: float, window: float, interval: float
    ) -> Baseline | None:
        hist = self._history.get(key)
        if not hist:
            return None
        # Exclude the recent past: an onset inside the current window must not become "normal".
        cutoff = now - self.t.baseline_gap_windows * window
        snaps = [s for s in hist if s.healthy and s.t <= cutoff]
        if not snaps:
            return None
        # The history the snapshots really cover: a window reaching before the first sample
        # holds less data than its nominal length.
        started = self.store.started_at if self.store.started_at is not None else snaps[0].t
        span = snaps[-1].t - max(snaps[0].t - window, started)
        if span < max(self.t.baseline_min_span_s, interval):
            return None
        values: dict[str, float] = {}
        for name in BASELINE_FEATURES:
            vals = [s.values[name] for s in snaps if name in s.values]
            if vals:
                values[name] = median(vals)
        return Baseline(values, span, len(snaps))

    def _birth(
        self, reader: FeatureReader, key: SubjectKey, f: FeatureSet, now: float
    ) -> Birth | None:
        succ = reader.series("nv_inference_request_success", key)
        starts = [s.born for s in succ if s.born is not None]
        starts += [r for s in succ for r in s.resets]
        starts = [b for b in starts if now - b <= self.t.cold_age_s]
        if not starts:
            return None
        born = max(starts)
        span = self._early_span(f)
        end = min(now, born + span)
        if end <= born:
            return None
        early = reader.compute(key, end=end, window=end - born)
        comp = [s for name in _COMPUTE for s in reader.series(name, key)]
        per_exec = per_scrape_ratio(comp, succ, born, now)
        early_pts = [v for t, v in per_exec if t <= born + span]
        if not early_pts:
            return None
        latest = per_exec[-1][1]
        tail = _compute_tail(reader.series("nv_inference_compute_infer_summary_us", key), born, end)
        return Birth(born, early, max(early_pts), latest, *(tail or (None, None)))

    def _reload_events(
        self, reader: FeatureReader, key: SubjectKey, now: float
    ) -> list[tuple[float, str]]:
        horizon = now - self.t.period_lookback_s
        out: set[tuple[float, str]] = set()
        succ = reader.series("nv_inference_request_success", key)
        for s in succ:
            out.update((r, "counter reset") for r in s.resets if r >= horizon)
        versions = {label(s.labels, "version") for s in succ}
        if len(versions) > 1:
            out.update(
                (s.born, "new version") for s in succ if s.born is not None and s.born >= horizon
            )
        for s in reader.series("nv_model_load_duration_secs", key):
            for k in range(1, len(s.times)):
                if s.times[k] >= horizon and s.values[k] != s.values[k - 1]:
                    out.add((s.times[k], "model load"))
        return sorted(out)


def _compute_tail(series: list[Series], start: float, end: float) -> tuple[float, float] | None:
    """Return (p99, p50) of per-request compute at the scrape in [start, end] where they differ most.

    Triton's summaries cover roughly the last minute whatever the scrape interval, so a few
    executions that took seconds stand out in p99 even when a 30 s scrape dilutes them in the
    mean. Absent when the server runs without summary latencies.
    """
    by_q: dict[str, dict[tuple[tuple[str, str], ...], Series]] = {}
    for s in series:
        rest = tuple(kv for kv in s.labels if kv[0] != "quantile")
        by_q.setdefault(label(s.labels, "quantile"), {})[rest] = s
    best: tuple[float, float] | None = None
    for rest, hi in by_q.get("0.99", {}).items():
        lo = by_q.get("0.5", {}).get(rest)
        if lo is None:
            continue
        p50_at = dict(zip(lo.times, lo.values, strict=True))
        for t, p99 in zip(hi.times, hi.values, strict=True):
            p50 = p50_at.get(t)
            if (
                start <= t <= end
                and p50 is not None
                and p50 > 0
                and (best is None or p99 / p50 > best[0] / best[1])
            ):
                best = (p99, p50)
    return best
