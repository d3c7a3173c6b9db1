"""The exported rules' recorded features, read back from a TSDB, as one FeatureSet a subject.

``tritonguard rules export`` records every feature as ``tritonguard:<feature>`` labelled by
namespace, pod and model. A daemon in the ``features`` Prometheus mode reads each one with
one instant query for the whole fleet (:func:`feature_query`), and which of the rules' nine
cause alerts fire with one more (:func:`alerts_query`); this module turns the answers into
the engine's ``FeatureSet`` per subject and the causes firing for it, without any I/O.

What the answers may hold that the daemon must not act on, and what becomes of it:

- a series of a pod rather than a model (``pod_seen``): kept by pod, beside the subjects;
- a series without ``namespace``, or without both ``model`` and ``pod``: not a subject,
  dropped and counted;
- a value that is not a finite number (NaN, ±Inf; the features source keeps Prometheus' NaN
  for this): unknown, never zero, and counted;
- two series of one feature for one subject (an HA pair read through a querier without
  deduplication, a clash across clusters): the feature is unknown for that subject, since
  which one holds cannot be told, and a clashed ``symptom`` or ``request_rate`` never reads
  as recovered;
- a subject without a fresh ``request_rate``: its FeatureSet is not fresh, so no guard,
  verify step or incident acts on it;
- an evaluation whose queries did not all succeed: the snapshot is not ``ok`` and no subject
  of it counts as fresh;
- an alert that is not one of the rules' cause alerts, or not firing (``pending``): not a
  firing cause, left out silently; a cause alert without namespace and model, or whose
  ``cause`` label is not its alert's cause: dropped and counted; one alert answered twice
  (an HA pair's two rulers): one firing cause, since both say the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

from tritonguard.core.features import FeatureSet, SubjectKey
from tritonguard.core.findings import CAUSES
from tritonguard.core.rules_export import PREFIX, Windows, alert_name
from tritonguard.core.thresholds import Thresholds

# The recorded series holding each cause's confidence, labelled ``cause``: read once per
# evaluation beside the features, so an incident's confidence is the TSDB's current one.
CONFIDENCE = "cause_confidence"
# The feature every served subject has: without a fresh one the subject is missing data.
PRESENCE = "request_rate"
# The recorded feature present while the subject shows the symptom, absent once it does not.
SYMPTOM = "symptom"
# FeatureSet's fields that are not features but describe the reading.
_META = frozenset({"window_s", "interval_s", "fresh"})
FEATURE_FIELDS: frozenset[str] = frozenset(f.name for f in fields(FeatureSet)) - _META
# The rules' nine cause alerts (``TritonguardBatchingDelay``, ...) and the cause of each.
CAUSE_OF_ALERT: dict[str, str] = {alert_name(c): c for c in CAUSES}


def read_features(recorded: Iterable[str]) -> list[str]:
    """Return the recorded features an evaluation reads: FeatureSet's fields and the symptom.

    The rules record more (their intermediate steps, ``pod_seen``, ``in_birth``, ...), which
    nothing in the daemon reads, so querying them would only cost Prometheus and the daemon.
    """
    return [name for name in recorded if name in FEATURE_FIELDS or name == SYMPTOM]


def feature_query(name: str, window_s: float) -> str:
    """Return the one instant query reading ``tritonguard:<name>`` for the whole fleet.

    ``last_over_time`` over the staleness bound returns a series only while the rules wrote
    it within that bound, so a ruler that stopped evaluating leaves the subject missing
    rather than frozen at its last value for Prometheus' five-minute lookback.
    """
    return f"last_over_time({PREFIX}:{name}[{max(1, math.ceil(window_s))}s])"


def alerts_query() -> str:
    """Return the one instant query reading which of the rules' cause alerts fire, fleet-wide.

    A plain selector rather than ``last_over_time``: the ruler writes a stale marker on the
    evaluation an alert stops firing, so a resolved alert leaves the answer at once instead
    of lingering for the staleness bound. A ruler that stopped altogether leaves its last
    alerts for Prometheus' lookback, but then the features it recorded go stale first and
    their subjects are missing data, on which nothing is acted.
    """
    names = "|".join(sorted(CAUSE_OF_ALERT))
    return f'ALERTS{{alertstate="firing", alertname=~"{names}", cause!=""}}'


def subject_key(labels: Mapping[str, str]) -> SubjectKey | None:
    """Return the (namespace, pod, model) a recorded series is about, or None for none."""
    namespace, model = labels.get("namespace", ""), labels.get("model", "")
    if not namespace or not model:
        return None
    return (namespace, labels.get("pod", ""), model)


@dataclass(frozen=True, slots=True)
class Row:
    """One series of one query's answer: its labels and its value."""

    labels: Mapping[str, str]
    value: float


@dataclass(slots=True)
class FeatureSnapshot:
    """Every subject's recorded features as one evaluation read them at ``at``.

    ``features`` holds a FeatureSet per subject; ``extra`` the recorded features the
    FeatureSet has no field for (``symptom``, ``in_birth``, ...), ``pods`` the ones recorded
    per pod (namespace, pod), and ``confidences`` each cause's recorded confidence. ``alerts``
    holds the rules' cause alerts firing at ``at`` by subject, or None when the read did not
    ask for them (then only the webhook says which fire). ``ok`` is False when a query
    failed: nothing of such a snapshot is fresh. ``unlabelled``,
    ``not_finite`` and ``conflicts`` count the series left out and why.
    """

    at: float
    interval_s: float
    window_s: float
    ok: bool
    error: str | None = None
    features: dict[SubjectKey, FeatureSet] = field(default_factory=dict)
    extra: dict[SubjectKey, dict[str, float]] = field(default_factory=dict)
    confidences: dict[SubjectKey, dict[str, float]] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    alerts: dict[SubjectKey, frozenset[str]] | None = None
    unlabelled: int = 0
    not_finite: int = 0
    conflicts: int = 0
    # (subject, feature) read more than once: unknown there, and never read as absent.
    clashed: frozenset[tuple[SubjectKey, str]] = frozenset()

    def fresh(self, key: SubjectKey) -> FeatureSet | None:
        """Return a subject's features if this snapshot may be acted on, else None."""
        f = self.features.get(key)
        return f if self.ok and f is not None and f.fresh else None

    def recovered(self, key: SubjectKey) -> bool:
        """Whether fresh recorded features show the subject without a symptom.

        A symptom or request rate read twice (clashed) is unknown, not absent: the subject
        is not shown recovered, since one of the two series may well say it is still sick.
        """
        if (key, SYMPTOM) in self.clashed or (key, PRESENCE) in self.clashed:
            return False
        return self.fresh(key) is not None and SYMPTOM not in self.extra.get(key, {})

    def problems(self) -> dict[str, int]:
        """Return the series left out, by reason (only the reasons that occurred)."""
        counts = {
            "unlabelled": self.unlabelled,
            "not_finite": self.not_finite,
            "conflicts": self.conflicts,
        }
        return {k: v for k, v in counts.items() if v}


class SnapshotBuilder:
    """Collects each query's rows, then builds the snapshot of one evaluation."""

    def __init__(self, thresholds: Thresholds, interval_s: float, at: float) -> None:
        self.at = at
        self.interval_s = interval_s
        self.window_s = Windows(interval_s, thresholds).window_s
        self._values: dict[SubjectKey, dict[str, float]] = {}
        self._confidences: dict[SubjectKey, dict[str, float]] = {}
        self._pods: dict[tuple[str, str], dict[str, float]] = {}
        # None until the alerts query's answer is added: a read without it names no alert.
        self._alerts: dict[SubjectKey, set[str]] | None = None
        self._unlabelled = self._not_finite = 0
        # (subject, feature) read twice: the feature is unknown for that subject.
        self._clashed: set[tuple[SubjectKey, str]] = set()

    def add(self, feature: str, rows: Iterable[Row]) -> None:
        """Take one feature query's answer (``cause_confidence`` keeps the cause label)."""
        for row in rows:
            key = subject_key(row.labels)
            pod = (row.labels.get("namespace", ""), row.labels.get("pod", ""))
            if key is None and not (pod[0] and pod[1]):
                self._unlabelled += 1
                continue
            if not math.isfinite(row.value):
                self._not_finite += 1
                continue
            if key is None:
                self._keep(self._pods.setdefault(pod, {}), (("", *pod), feature), row.value)
                continue
            name, held = feature, self._values.setdefault(key, {})
            if feature == CONFIDENCE:
                name = row.labels.get("cause", "")
                if not name:
                    self._unlabelled += 1
                    continue
                held = self._confidences.setdefault(key, {})
            self._keep(held, (key, name), row.value)

    def add_alerts(self, rows: Iterable[Row]) -> None:
        """Take the alerts query's answer: which cause alerts fire for which subject.

        An alert is 1 while it fires, so its value says nothing more and is not read.
        """
        held = self._alerts if self._alerts is not None else {}
        self._alerts = held
        for row in rows:
            labels = row.labels
            cause = CAUSE_OF_ALERT.get(labels.get("alertname", ""))
            # Pending: its ``for:`` has not passed, the rules do not say the cause yet.
            if cause is None or labels.get("alertstate") != "firing":
                continue
            key = subject_key(labels)
            if key is None or labels.get("cause") != cause:
                self._unlabelled += 1
                continue
            held.setdefault(key, set()).add(cause)

    def _keep(self, held: dict[str, float], where: tuple[SubjectKey, str], value: float) -> None:
        """Keep one value; a second one for the same place makes it unknown there."""
        name = where[1]
        if where in self._clashed:
            return
        if name in held:
            del held[name]
            self._clashed.add(where)
            return
        held[name] = value

    def build(self) -> FeatureSnapshot:
        """Return the snapshot: a FeatureSet per subject, fresh when its presence is known."""
        snapshot = FeatureSnapshot(
            at=self.at,
            interval_s=self.interval_s,
            window_s=self.window_s,
            ok=True,
            confidences=self._confidences,
            pods=self._pods,
            unlabelled=self._unlabelled,
            not_finite=self._not_finite,
            conflicts=len(self._clashed),
            clashed=frozenset(self._clashed),
            alerts=(
                None
                if self._alerts is None
                else {key: frozenset(causes) for key, causes in self._alerts.items()}
            ),
        )
        for key, values in self._values.items():
            known = {k: v for k, v in values.items() if k in FEATURE_FIELDS}
            snapshot.features[key] = FeatureSet(
                window_s=self.window_s,
                interval_s=self.interval_s,
                fresh=PRESENCE in known,
                **known,
            )
            rest = {k: v for k, v in values.items() if k not in FEATURE_FIELDS}
            if rest:
                snapshot.extra[key] = rest
        return snapshot


def failed_snapshot(at: float, interval_s: float, window_s: float, error: str) -> FeatureSnapshot:
    """Return the snapshot of an evaluation whose queries did not all answer: nothing fresh."""
    return FeatureSnapshot(at=at, interval_s=interval_s, window_s=window_s, ok=False, error=error)
