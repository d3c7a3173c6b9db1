"""Incidents from the rules' alerts, judged on the TSDB's recorded features.

In the ``features`` Prometheus mode the TSDB evaluates the exported rules for the whole
fleet. Which of their alerts (``Tritonguard<Cause>``, labelled namespace, pod, model and
cause) fire, each read of the features says too (``FeatureSnapshot.alerts``, from
``ALERTS`` at the same instant), and Alertmanager delivers them to the daemon's webhook,
whose news :class:`CauseAlerts` keeps. :func:`firing_at_read` combines the two: the read is
the truth at its instant, the webhook only adds what started firing after it; a webhook
alert that no read ever lists (a read path hiding ``ALERTS``) opens nothing, and
``core.hidden_alerts`` tells it apart for the daemon to warn of.
:class:`RecordedIncidents` turns each evaluation's firing causes and recorded features into
findings and feeds them to the engine's own incident book, so the
incidents, their fleet groups, the playbooks' view of features (``Engine.feature_value``,
``is_fresh``, ``recovered``) and every guard stay what they are when the engine computes
features itself. Nothing here does I/O.

The alert rules already held each cause for the engine's hold (``for:``) and keep it firing
for its resolve time (``keep_firing_for:``), so the book opens on the first evaluation that
sees an alert and a fresh subject. A subject whose features are missing, stale or from a
failed read is missing data: nothing opens, updates or resolves on it, and the engine reports
it not fresh, so no playbook acts on it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tritonguard.core.derive import subject_of
from tritonguard.core.engine import Diagnosis, Engine
from tritonguard.core.feature_rows import CAUSE_OF_ALERT, FeatureSnapshot
from tritonguard.core.features import FeatureSet, SubjectKey
from tritonguard.core.findings import CAUSES, Evidence, Finding, Fix, IncidentEvent, Subject
from tritonguard.core.humanize import label as evidence_label
from tritonguard.core.humanize import value as evidence_value
from tritonguard.core.rules_export import CAUSE_TEXT
from tritonguard.core.symptoms import is_shedding

# What each cause's incident shows of the recorded features, the deciding ones first: the
# features its signature gates on (weight 1), then the ones that corroborate it.
CAUSE_EVIDENCE: dict[str, tuple[tuple[str, float], ...]] = {
    "batching_delay": (
        ("queue_share", 1.0),
        ("busy_instances", 1.0),
        ("mean_queue_us", 0.2),
        ("avg_batch", 0.1),
        ("client_batch", 0.05),
    ),
    "too_few_instances": (
        ("busy_instances", 1.0),
        ("queue_share", 1.0),
        ("pending", 0.1),
        ("gpu_util", 0.1),
    ),
    "too_many_instances": (
        ("busy_instances", 1.0),
        ("compute_per_inference_us", 1.0),
        ("gpu_util", 0.15),
    ),
    "cold_start": (
        ("compute_per_exec_us", 1.0),
        ("mean_queue_us", 0.2),
        ("load_duration_s", 0.1),
    ),
    "cpu_bottleneck": (
        ("container_cpu_saturation", 1.0),
        ("throttled_ratio", 0.3),
        ("cpu_host_util", 0.3),
        ("gpu_util", 0.1),
    ),
    "memory_copy": (
        ("input_share", 1.0),
        ("output_share", 1.0),
        ("pcie_rx_bps", 0.1),
        ("pcie_tx_bps", 0.1),
    ),
    "model_reload": (
        ("p99_us", 1.0),
        ("load_duration_s", 0.3),
    ),
    "node_contention": (
        ("compute_per_inference_us", 1.0),
        ("node_cpu_busy", 0.35),
        ("cpu_waiting_share", 0.35),
        ("throttled_ratio", 0.1),
    ),
    "retry_storm": (
        ("failure_canceled", 1.0),
        ("pending", 1.0),
        ("ingress_timeout_rate", 0.3),
        ("failure_rate", 0.2),
    ),
}
# Shown with every cause, as context: how slow, and at what load.
CONTEXT_EVIDENCE: tuple[str, ...] = ("mean_latency_us", "p99_us", "request_rate")
# Annotations kept of an alert (and how much of each): what a finding reads, nothing more.
KEPT_ANNOTATIONS: tuple[str, ...] = ("summary", "confidence")
MAX_ANNOTATION_CHARS = 500


def unit_of(feature: str) -> str:
    """Return the unit a recorded feature is in, as evidence names units."""
    if feature.endswith("_us"):
        return "us"
    if feature.endswith("_bps"):
        return "B/s"
    if feature.endswith("_s"):
        return "s"
    if feature == "busy_instances":
        return "instances"
    if feature.endswith("_cores"):
        return "cores"
    if feature.endswith("_rate") or feature.startswith("failure_"):
        return "req/s"
    if feature in ("pending", "avg_batch", "client_batch", "pending_change"):
        return "count"
    return "ratio"


class AlertLike(Protocol):
    """An Alertmanager alert as the webhook parsed it (``runtime.alertmanager_webhook.Alert``)."""

    @property
    def status(self) -> str:
        """Return ``firing`` or ``resolved``."""
        ...

    @property
    def labels(self) -> Mapping[str, str]:
        """Return the alert's labels."""
        ...

    @property
    def annotations(self) -> Mapping[str, str]:
        """Return the alert's annotations."""
        ...

    @property
    def fingerprint(self) -> str:
        """Return Alertmanager's fingerprint ("" when it gave none)."""
        ...

    @property
    def starts_at(self) -> str:
        """Return when the alert started firing, as RFC 3339 ("" when not given)."""
        ...


@dataclass(frozen=True, slots=True)
class FiringCause:
    """One rule alert firing for one subject: its cause and the annotations a finding reads.

    ``seen`` is when the daemon heard of it (the webhook's arrival, or the read's instant);
    ``started`` when the ruler says it started firing (Alertmanager's ``startsAt``), None
    when not known.
    """

    cause: str
    annotations: Mapping[str, str]
    seen: float
    started: float | None = None


def started_at(text: str) -> float | None:
    """Return an alert's RFC 3339 ``startsAt`` as epoch seconds; None if absent or unset.

    Alertmanager writes the zero time (year 1) for a time it does not know.
    """
    try:
        at = datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError):
        return None
    return at if at > 0 else None


class CauseAlerts:
    """Which cause alerts fire for which subject, as Alertmanager's notifications said.

    Only the rules' nine cause alerts with a namespace and a model are kept (other alerts
    stay the alert book's, for ``when.alerts``); at most ``max_alerts`` of them, the ones
    heard of least recently dropped first, and none longer than ``ttl_s`` without being
    heard of again (a lost resolution cannot keep an incident open for ever).
    """

    def __init__(self, *, ttl_s: float, max_alerts: int) -> None:
        self.ttl_s = ttl_s
        self.max_alerts = max_alerts
        self.dropped = 0
        self._firing: OrderedDict[str, tuple[SubjectKey, FiringCause]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._firing)

    def update(self, alerts: Iterable[AlertLike], now: float) -> None:
        """Apply one notification: firing cause alerts are kept, resolved ones forgotten."""
        for alert in alerts:
            cause = CAUSE_OF_ALERT.get(alert.labels.get("alertname", ""))
            if cause is None or alert.labels.get("cause", cause) != cause:
                continue
            ns, model = alert.labels.get("namespace", ""), alert.labels.get("model", "")
            if not ns or not model:
                continue
            key = (ns, alert.labels.get("pod", ""), model)
            name = alert.fingerprint or f"{cause}|{key}"
            self._firing.pop(name, None)
            if alert.status != "firing":
                continue
            notes = {
                k: alert.annotations[k][:MAX_ANNOTATION_CHARS]
                for k in KEPT_ANNOTATIONS
                if k in alert.annotations
            }
            started = started_at(alert.starts_at)
            self._firing[name] = (key, FiringCause(cause, notes, now, started))
            while len(self._firing) > self.max_alerts:
                self._firing.popitem(last=False)
                self.dropped += 1

    def firing(self, now: float) -> dict[SubjectKey, dict[str, FiringCause]]:
        """Return the causes firing now by subject (expired alerts are forgotten first)."""
        while self._firing:
            name, (_, oldest) = next(iter(self._firing.items()))
            if now - oldest.seen <= self.ttl_s:
                break
            del self._firing[name]
        out: dict[SubjectKey, dict[str, FiringCause]] = {}
        for key, firing in self._firing.values():
            out.setdefault(key, {})[firing.cause] = firing
        return out


def firing_at_read(
    snapshot: FeatureSnapshot | None,
    heard: Mapping[SubjectKey, Mapping[str, FiringCause]],
) -> dict[SubjectKey, dict[str, FiringCause]]:
    """Return the causes firing by subject: the read's alerts, plus the webhook's news since.

    A read that asked Prometheus for ``ALERTS`` is the truth at its instant: an alert in it
    fires (with the webhook's annotations when the webhook told of it too), one absent from
    it does not, whatever the webhook last said, so a lost resolution holds nothing and a
    restarted daemon needs no notification. Between reads the webhook only adds, and only
    an alert heard after the read's instant that also started firing after it: an alert the
    read saw absent and Alertmanager still reports as firing since earlier (a resolution it
    lost, a repeated notification) cannot reopen what the read resolved. A resolution heard
    between reads waits for the next read to confirm it, so the two sources never take
    turns on a finding. Without a usable read's alerts (none asked, or a failed read) the
    webhook alone says.
    """
    if snapshot is None or not snapshot.ok or snapshot.alerts is None:
        return {key: dict(causes) for key, causes in heard.items() if causes}
    at = snapshot.at
    out: dict[SubjectKey, dict[str, FiringCause]] = {}
    for key, causes in snapshot.alerts.items():
        told = heard.get(key, {})
        out[key] = {c: told.get(c) or FiringCause(c, {}, at) for c in causes}
    for key, news in heard.items():
        for cause, firing in news.items():
            if firing.seen > at and firing.started is not None and firing.started > at:
                out.setdefault(key, {}).setdefault(cause, firing)
    return {key: causes for key, causes in out.items() if causes}


def _confidence(recorded: float | None, alert: FiringCause, floor: float) -> float:
    """Return a firing cause's confidence: the TSDB's current one, never below ``floor``.

    The rules keep an alert firing for the resolve time after its confidence dropped, as the
    engine keeps an incident open: while it fires, its finding holds.
    """
    value = recorded
    if value is None:
        try:
            value = float(alert.annotations.get("confidence", ""))
        except ValueError:
            value = None
    if value is None or not math.isfinite(value):
        value = floor
    return min(1.0, max(floor, value))


def evidence_of(cause: str, features: FeatureSet) -> dict[str, Evidence]:
    """Return what a cause's incident shows of the subject's recorded features."""
    values = features.as_dict()
    out: dict[str, Evidence] = {}
    for name, weight in (*CAUSE_EVIDENCE[cause], *((n, 0.0) for n in CONTEXT_EVIDENCE)):
        if name in out:
            continue
        raw = values.get(name)
        if not isinstance(raw, float):
            continue
        out[name] = Evidence(
            value=raw,
            unit=unit_of(name),
            window_s=features.window_s,
            what=f"recorded tritonguard:{name}",
            weight=weight,
        )
    return out


def finding_of(
    subject: Subject,
    firing: FiringCause,
    features: FeatureSet,
    confidence: float | None,
    floor: float,
) -> Finding:
    """Return the finding a firing cause alert stands for, told with the recorded features."""
    cause = firing.cause
    text = CAUSE_TEXT[cause]
    evidence = evidence_of(cause, features)
    headline = firing.annotations.get("summary") or (
        f"{subject.model} on {subject.namespace}/{subject.pod or '*'}: {text.title}"
    )
    shown = [
        f"{evidence_label(name)} {evidence_value(name, ev, evidence)}"
        for name, ev in evidence.items()
        if ev.weight >= 1.0
    ]
    summary = f"{headline} ({'; '.join(shown)})" if shown else headline
    return Finding(
        cause=cause,
        subject=subject,
        confidence=_confidence(confidence, firing, floor),
        summary=summary,
        evidence=evidence,
        fix=Fix(text.fix, text.snippet, text.flags),
    )


class RecordedIncidents:
    """Feed the engine's incident book from rule alerts and recorded features.

    ``max_age_s`` is how long after it was read a snapshot may still be acted on; an older
    one (a read that hangs) counts as missing data. A subject not seen fresh for the
    engine's retention is forgotten as the engine forgets a subject that stopped reporting:
    its incident closes without recovery evidence.
    """

    def __init__(self, engine: Engine, *, max_age_s: float) -> None:
        self.engine = engine
        self.max_age_s = max_age_s
        self._seen: dict[SubjectKey, float] = {}
        # Cause alerts of the last evaluation whose subject had no fresh features: not acted on.
        self.unjudged: list[tuple[SubjectKey, str]] = []

    def evaluate(
        self,
        snapshot: FeatureSnapshot | None,
        firing: Mapping[SubjectKey, Mapping[str, FiringCause]],
        now: float,
    ) -> list[IncidentEvent]:
        """Evaluate at ``now``: one book observation per fresh subject; return transitions.

        ``firing`` is what the webhook told (``CauseAlerts.firing``); a usable snapshot's own
        alerts take precedence over it (:func:`firing_at_read`).
        """
        engine, t = self.engine, self.engine.t
        usable = snapshot is not None and snapshot.ok and 0.0 <= now - snapshot.at <= self.max_age_s
        firing = firing_at_read(snapshot if usable else None, firing)
        fresh = (
            [k for k, f in snapshot.features.items() if f.fresh]
            if snapshot is not None and usable
            else []
        )
        engine.note_evaluation(fresh, now)
        events: list[IncidentEvent] = []
        judged: set[SubjectKey] = set()
        if snapshot is not None and usable:
            for key, features in snapshot.features.items():
                if not features.fresh:
                    continue
                judged.add(key)
                self._seen[key] = now
                events.extend(self._observe(snapshot, key, features, firing.get(key, {}), now))
        for key in [k for k in engine.last_diagnoses if k not in judged]:
            # Missing or stale: the engine must not answer from an older reading.
            del engine.last_diagnoses[key]
        self.unjudged = sorted(
            (key, cause) for key, causes in firing.items() if key not in judged for cause in causes
        )
        horizon = now - t.retention_s
        for key in [k for k, at in self._seen.items() if at < horizon]:
            del self._seen[key]
            events.extend(engine.book.forget(subject_of(key), now))
        return engine.groups.observe(events)

    def _observe(
        self,
        snapshot: FeatureSnapshot,
        key: SubjectKey,
        features: FeatureSet,
        causes: Mapping[str, FiringCause],
        now: float,
    ) -> list[IncidentEvent]:
        engine = self.engine
        t = engine.t
        subject = subject_of(key)
        recorded = snapshot.confidences.get(key, {})
        findings = [
            finding_of(subject, causes[c], features, recorded.get(c), t.close_confidence)
            for c in CAUSES
            if c in causes
        ]
        # As the engine's own recovery: a server still turning a real share of requests away
        # has not recovered, however its served requests' latency looks.
        recovered = snapshot.recovered(key) and not causes and not is_shedding(features, t)
        reasons = ("recorded symptom",) if "symptom" in snapshot.extra.get(key, {}) else ()
        engine.last_diagnoses[key] = Diagnosis(
            subject, features, None, findings, reasons, recovered
        )
        # The alert's ``for:`` was the hold: an interval at the single-scrape bar opens at once.
        interval = max(features.interval_s, t.hold_single_scrape_s)
        return engine.book.observe(subject, findings, now, interval, recovered=recovered)
