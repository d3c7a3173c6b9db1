"""The diagnosis engine: samples in, incident transitions out; the same for live and replay."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tritonguard.core.baselines import PREPARE_CHUNK, Baseline, BaselineHistory
from tritonguard.core.config_changes import ChangeTimeline, ConfigChange
from tritonguard.core.config_map_changes import ConfigMapChange, ConfigMapTimeline
from tritonguard.core.derive import derive, points_reach_s, subject_of
from tritonguard.core.features import FeatureReader, FeatureSet, SubjectKey
from tritonguard.core.findings import CAUSES, Finding, IncidentEvent, Subject
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.incidents import IncidentBook
from tritonguard.core.model_config import ModelConfig, parse_model_config
from tritonguard.core.reload_signs import RESTARTS, restarts_reach_s
from tritonguard.core.rollout_changes import MAX_PODS, RolloutChange, RolloutTimeline
from tritonguard.core.samples import Sample
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.shift_reads import MAX_PER_EVALUATION, ShiftReads
from tritonguard.core.signatures import SIGNATURES
from tritonguard.core.signatures.cold_start import CAUSE as COLD_START
from tritonguard.core.thresholds import Thresholds
from tritonguard.core.unexplained import NamelessRuns, Unexplained

# The counter whose newest point is a subject's newest Triton scrape.
SUCCESS = "nv_inference_request_success"
# How long a subject's judgment waits for the config read it asked for when its latency
# began to shift, at most. The repository API answers in milliseconds; one that does not
# answer within a second (an overloaded server, the case being diagnosed) is judged without.
CONFIG_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Engine settings: the thresholds every signature and the incident book use.

    ``memory_budget_bytes`` bounds what the engine holds (None: unbounded, for replay and
    tests): four fifths for the series store, one fifth for the subjects' baseline history.
    ``history_s`` is how far back readers other than the diagnosis read the store's points
    (the incident charts): the store keeps at least that much, and no more than the
    diagnosis reads otherwise (:func:`reach_of`).
    """

    thresholds: Thresholds = field(default_factory=Thresholds)
    memory_budget_bytes: int | None = None
    history_s: float = 0.0

    def series_bytes(self) -> int | None:
        """Return the series store's part of the budget."""
        b = self.memory_budget_bytes
        return None if b is None else b * 4 // 5

    def baseline_bytes(self) -> int | None:
        """Return the baseline history's part of the budget."""
        b = self.memory_budget_bytes
        return None if b is None else b // 5


@dataclass(slots=True)
class Diagnosis:
    """One subject's current state: features, baseline and every finding (for `diagnose`)."""

    subject: Subject
    features: FeatureSet
    baseline: Baseline | None
    findings: list[Finding]
    symptom_reasons: tuple[str, ...]
    recovered: bool = False
    # Set while latency stays up with no cause held, so abstaining is said rather than silent.
    unexplained: Unexplained | None = None


def reach_of(t: Thresholds, history_s: float = 0.0) -> Callable[[float], float]:
    """Return how far back the engine's readers read points scraped every so often.

    The diagnosis' reach (:func:`derive.points_reach_s`: the period lookback and the window
    before a shift that began there), or ``history_s`` for the charts if longer. The flight
    recorder takes its capture's pre-onset span (5 min) when an incident opens, within it.
    Older points are never read, so keeping them would only cost memory: at a 10 s scrape,
    90 points a series for the 15-minute retention against about 54 for the reach.
    """

    def reach(interval: float) -> float:
        return max(points_reach_s(t, interval), history_s)

    return reach


class Engine:
    """Pure evaluator: feed samples with `ingest`, call `evaluate` on a clock of your choice."""

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.t = self.config.thresholds
        self.store = SeriesStore(
            retention_s=self.t.retention_s,
            max_bytes=self.config.series_bytes(),
            reach=reach_of(self.t, self.config.history_s),
            kept_longer={RESTARTS: restarts_reach_s(self.t)},
        )
        self.changes = ChangeTimeline()
        self.rollouts = RolloutTimeline()
        self.config_maps = ConfigMapTimeline()
        self.book = IncidentBook(self.t, change_of=self.change_before)
        # Pod incidents of one cause on one model (and workload) told as one story.
        self.groups = FleetGroups(workload_of=self.workload_of, pods_of=self._pods_of)
        self._workloads: dict[tuple[str, str], str] = {}
        # Pods reporting each (namespace, model), counted when a fleet group first asks.
        self._model_pods: Counter[tuple[str, str]] | None = None
        self._pod_keys: list[SubjectKey] = []
        self._configs: dict[tuple[str, str, str], ModelConfig] = {}
        self.history = BaselineHistory(self.t, max_bytes=self.config.baseline_bytes())
        self._known: set[SubjectKey] = set()
        # The newest Triton scrape each subject was judged on (see ``evaluate``).
        self._judged_at: dict[SubjectKey, float] = {}
        # Subjects whose judgment waits for the config read they asked for, since when.
        self._awaiting: dict[SubjectKey, float] = {}
        self.last_evaluated: float | None = None
        self.evaluations = 0
        self.last_diagnoses: dict[SubjectKey, Diagnosis] = {}
        self.nameless = NamelessRuns(self.t.hold_evaluations)
        # The subjects the last evaluation found newly unexplained (the daemon says so once).
        self.newly_unexplained: list[Diagnosis] = []
        # The subjects whose latency began to shift at the last evaluation, without a config
        # read since: the daemon reads their configs now (shift_reads.py).
        self.shift_reads = ShiftReads()
        self.configs_wanted: list[Subject] = []

    # ---- inputs -------------------------------------------------------------------------
    def ingest(self, samples: Iterable[Sample], now: float) -> None:
        """Add samples (a scrape, a PromQL result, a replay step); untimed ones are at ``now``."""
        self.store.add_many(samples, now)

    def note_model_config(
        self, subject: Subject, config: Mapping[str, Any], at: float | None = None
    ) -> ConfigChange | None:
        """Remember a model's config (JSON from GET /v2/models/{m}/config), read at ``at``.

        Return the change since the subject's previous read, if any: it is what an incident
        opening after it is said to follow. ``at`` defaults to the last evaluation's time.
        """
        key = self._key(subject)
        self._awaiting.pop(key, None)
        when = at if at is not None else (self.last_evaluated or 0.0)
        born = self.store.index("nv_inference_request_success").by_subject.get(key, ())
        change = self.changes.read(
            key,
            config,
            when,
            newborn=any(s.born is not None for s in born) or self._rolled_out(subject, when),
        )
        parsed = parse_model_config(config)
        self._configs[key] = parsed
        self._configs[(subject.namespace, "", subject.model)] = parsed
        if change is not None:
            self.book.config_read(subject)
        return change

    def config_unanswered(self, subject: Subject) -> None:
        """Note that an asked-for config read brought nothing: judge the subject without it."""
        self._awaiting.pop(self._key(subject), None)

    def note_rollout(self, namespace: str, pod: str, rollout: RolloutChange) -> bool:
        """Remember the workload revision a pod runs (discovery saw it); True when news.

        An incident already open on the pod is announced again: it now names the rollout.
        """
        news = self.rollouts.note(namespace, pod, rollout)
        self._workloads.pop((namespace, pod), None)
        if len(self._workloads) >= MAX_PODS:
            del self._workloads[next(iter(self._workloads))]
        self._workloads[(namespace, pod)] = f"{rollout.kind}/{rollout.workload}"
        if news:
            for ns, p, model in self._known:
                if (ns, p) == (namespace, pod):
                    self.book.config_read(Subject(namespace=ns, model=model, pod=p))
        return news

    def workload_of(self, namespace: str, pod: str) -> str:
        """Return the workload owning a pod (``Deployment/triton``), "" when not known."""
        return self._workloads.get((namespace, pod), "")

    def _pods_of(self, namespace: str, model: str) -> int:
        if self._model_pods is None:
            self._model_pods = Counter((ns, m) for ns, pod, m in self._pod_keys if pod)
        return self._model_pods[(namespace, model)]

    def note_config_map(self, namespace: str, pod: str, change: ConfigMapChange) -> bool:
        """Remember that a ConfigMap the pod mounts changed (discovery saw it); True when news.

        An incident already open on the pod is announced again: it now names the change.
        """
        news = self.config_maps.note(namespace, pod, change)
        if news:
            for ns, p, model in self._known:
                if (ns, p) == (namespace, pod):
                    self.book.config_read(Subject(namespace=ns, model=model, pod=p))
        return news

    def _rolled_out(self, subject: Subject, at: float) -> bool:
        """Whether the subject's pod is a recent rollout's, from an earlier revision.

        Its first config read is then compared with its peers', as a pod born under
        observation is: discovery says it is new even when its counters cannot (a Triton
        that served its warm-up or first requests before the first scrape).
        """
        if not subject.pod:
            return False
        rollout = self.rollouts.preceding(
            subject.namespace, subject.pod, at, self.t.baseline_lookback_s
        )
        return rollout is not None and rollout.previous_name is not None

    def change_before(self, subject: Subject, onset: float) -> ConfigChange | None:
        """Return the change an incident on ``subject`` opened at ``onset`` followed.

        The model-config change, with the rollout the pod came from and the change of a
        ConfigMap it mounts when those fell within the baseline's lookback too; a rollout or a
        ConfigMap change alone when the config did not change.
        """
        key = (subject.namespace, subject.pod, subject.model)
        lookback = self.t.baseline_lookback_s
        change = self.changes.preceding(key, onset, lookback)
        rollout, mounted = (
            (
                self.rollouts.preceding(subject.namespace, subject.pod, onset, lookback),
                self.config_maps.preceding(subject.namespace, subject.pod, onset, lookback),
            )
            if subject.pod
            else (None, None)
        )
        if rollout is not None:
            change = (
                ConfigChange.of_rollout(subject.model, rollout)
                if change is None
                else replace(change, rollout=rollout)
            )
        if mounted is not None:
            change = (
                ConfigChange.of_config_map(subject.model, mounted)
                if change is None
                else replace(change, config_map=mounted)
            )
        return change

    def model_config(self, key: SubjectKey) -> ModelConfig | None:
        """Return the most specific known config for a subject."""
        ns, pod, model = key
        for k in ((ns, pod, model), (ns, "", model), ("", "", model)):
            if k in self._configs:
                return self._configs[k]
        return None

    # ---- queries ------------------------------------------------------------------------
    def open_incidents(self) -> list[IncidentEvent]:
        """Incidents open now, with their current finding and fleet group."""
        return self.groups.annotate(self.book.open_incidents())

    def announced_incidents(self) -> list[IncidentEvent]:
        """Incidents open now, as their last transition announced them (what playbooks act on).

        Each carries its fleet group as it stands now: playbooks act once for the group.
        """
        return self.groups.annotate(self.book.announced())

    def _key(self, subject: Subject) -> SubjectKey:
        return (subject.namespace, subject.pod, subject.model)

    def features(self, subject: Subject, now: float) -> FeatureSet | None:
        """Return a subject's current features (pod "" = the model across pods); None if unknown.

        A subject the last evaluation saw fresh is answered from that evaluation while its data
        would still count as fresh, so guards and verify steps asking many times per
        evaluation cost nothing; anything else is computed from the series store.
        """
        key = self._key(subject)
        seen = self.last_diagnoses.get(key)
        last = self.last_evaluated
        if seen is not None and last is not None and 0.0 <= now - last <= seen.features.interval_s:
            return seen.features
        reader = FeatureReader(self.store, self.t, now)
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

    def recovered(self, subject: Subject, now: float) -> bool:
        """Whether the last evaluation saw the subject fresh, with no incident and no symptom."""
        seen = self.last_diagnoses.get(self._key(subject))
        last = self.last_evaluated
        return (
            seen is not None
            and last is not None
            and 0.0 <= now - last <= seen.features.interval_s
            and seen.recovered
            and not self.book.is_open(subject)
        )

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Whether the subject's newest data is recent enough to act on."""
        f = self.features(subject, now)
        return f is not None and f.fresh

    # ---- evaluation ---------------------------------------------------------------------
    def memory(self) -> dict[str, int]:
        """Return what the bounded parts hold and have shed (the daemon exports them)."""
        return {
            "series": len(self.store),
            "series_bytes": self.store.approx_bytes,
            "series_shed": self.store.series_shed,
            "points_shed": self.store.points_shed,
            "baseline_bytes": self.history.approx_bytes,
            "baseline_subjects_shed": self.history.subjects_shed,
        }

    def export_baselines(self, now: float) -> list[tuple[SubjectKey, float, Baseline]]:
        """Return each subject's baseline as it stands, to be saved across a restart."""
        return self.history.export(now, self.store.started_at)

    def carry_baselines(self, saved: Iterable[tuple[SubjectKey, float, Baseline]]) -> int:
        """Take baselines saved before a restart; return how many the memory bound let in."""
        return sum(self.history.carry(key, at, baseline) for key, at, baseline in saved)

    def note_evaluation(self, keys: list[SubjectKey], now: float) -> None:
        """Count an evaluation at ``now`` over ``keys``, the subjects in view.

        ``evaluate`` calls it; so does a caller judging subjects from features computed
        elsewhere (the exported rules' recorded features), so that the evaluation count,
        its time and the pods serving each model (fleet groups) are the engine's alike.
        """
        self.evaluations += 1
        self.last_evaluated = now
        self._pod_keys, self._model_pods = keys, None

    def evaluate(self, now: float) -> list[IncidentEvent]:
        """Evaluate at ``now`` every subject scraped since its last evaluation; return transitions.

        A subject is judged once per scrape of its Triton (its request counter's newest
        point): holds count consecutive evaluations, and two evaluations of one scrape
        would let a single scrape's reading pass for two, as a fleet's targets, scraped at
        different moments, each wake the evaluation. Between its scrapes a subject keeps its
        diagnosis until its data goes stale, when it is dropped as a stale one is.

        A subject listed in ``configs_wanted`` is judged on a later call, once its read is in
        (``note_model_config``) or known not to come (``config_unanswered``), or
        ``CONFIG_WAIT_S`` after it asked: the caller answers, then evaluates again.
        """
        events: list[IncidentEvent] = []
        self.store.expire(now)
        reader = FeatureReader(self.store, self.t, now)
        keys = reader.subjects()
        self.note_evaluation(keys, now)
        self.newly_unexplained = []
        self.configs_wanted = []
        judged = self._judged_at
        due: list[SubjectKey] = []
        for key in keys:
            newest = max((s.last_time for s in reader.series(SUCCESS, key)), default=None)
            if newest is not None and judged.get(key) == newest:
                seen = self.last_diagnoses.get(key)
                if seen is not None and now - newest > self.t.stale_after(seen.features.interval_s):
                    del self.last_diagnoses[key]
                    # Stale data says nothing of its latency now: no longer counted as up.
                    self.nameless.forget(key)
                continue
            asked = self._awaiting.get(key)
            if asked is not None:
                if 0.0 <= now - asked < CONFIG_WAIT_S:
                    continue
                del self._awaiting[key]
            if newest is not None:
                judged[key] = newest
            due.append(key)
        for start in range(0, len(due), PREPARE_CHUNK):
            chunk = due[start : start + PREPARE_CHUNK]
            # Each subject judged now asks for its baseline over its own window: worked out
            # for a chunk of them in one pass rather than one numpy pass a subject.
            self.history.prepare(
                ((key, reader.window(iv), iv) for key in chunk for iv in (reader.interval(key),)),
                now,
                self.store.started_at,
            )
            for key in chunk:
                events.extend(self._evaluate_subject(reader, key, now))
        for gone in self._known - set(keys):
            self.history.forget(gone)
            self.changes.forget(gone)
            self.last_diagnoses.pop(gone, None)
            self.nameless.forget(gone)
            self.shift_reads.forget(gone)
            judged.pop(gone, None)
            events.extend(self.book.forget(subject_of(gone), now))
        self._known = set(keys)
        return self.groups.observe(events)

    def _evaluate_subject(
        self, reader: FeatureReader, key: SubjectKey, now: float
    ) -> list[IncidentEvent]:
        derived = derive(reader, key, now, self.history, self.model_config(key), self.t)
        if derived is None:
            self.last_diagnoses.pop(key, None)
            self.nameless.forget(key)
            return []
        ctx = derived.ctx
        ctx.config_read_at = self.changes.read_at(key)
        if self.shift_reads.want(
            key,
            shifting=ctx.symptom.up or derived.fast is not None,
            read_at=ctx.config_read_at,
            now=now,
            window_s=ctx.features.window_s,
            room=len(self.configs_wanted) < MAX_PER_EVALUATION,
        ):
            self.configs_wanted.append(ctx.subject)
            # Judged once the read is in (this scrape stays due): against the config a deploy
            # replaced, the first reading of the shift would weigh the wrong delay or count.
            self._awaiting[key] = now
            self._judged_at.pop(key, None)
            return []
        if derived.fast is not None:
            derived.fast.config_read_at = ctx.config_read_at
        change = self.change_before(ctx.subject, now)
        if change is not None:
            before = parse_model_config(change.before).instance_count if change.before else None
            for c in (ctx, derived.fast):
                if c is not None:
                    c.changed_at, c.instances_before = change.at_earliest, before
        findings = [res for sig in SIGNATURES.values() if (res := sig(ctx)) is not None]
        if derived.fast is not None and not findings:
            # The newest scrapes show the shift before the full window does, and while the
            # full window still straddles the onset its per-window checks (steadiness, the
            # sustained tercile) mix healthy and faulty scrapes: read the causes on the short
            # window until the full one has a reading of its own, which then stands alone.
            fast = derived.fast
            findings = _strongest(
                findings, [res for sig in SIGNATURES.values() if (res := sig(fast)) is not None]
            )
        if derived.in_birth and ctx.baseline is None:
            # A newborn without any reference (no history, no peers, no previous version):
            # its first queue may be its cold start's, which only cold_start can judge in its
            # birth span. The other causes wait until it is over.
            findings = [x for x in findings if x.cause == COLD_START]
        subject, f = ctx.subject, ctx.features
        nameless = (
            ctx.symptom.sustained
            and ctx.baseline is not None
            and not any(x.confidence >= self.t.open_confidence for x in findings)
            and not self.book.is_open(subject)
        )
        unexplained, newly = self.nameless.observe(key, nameless, now, f)
        diagnosis = Diagnosis(
            subject, f, ctx.baseline, findings, ctx.symptom.reasons, derived.recovered, unexplained
        )
        self.last_diagnoses[key] = diagnosis
        if newly:
            self.newly_unexplained.append(diagnosis)
        strong = any(x.confidence >= self.t.close_confidence for x in findings)
        healthy = (
            not ctx.symptom.up
            and ctx.symptom.judged
            and not strong
            and not self.book.is_open(subject)
            and not derived.in_birth
            and not derived.shifting
            and (f.request_rate or 0) > 0
        )
        self.history.remember(key, now, f, healthy)
        return self.book.observe(subject, findings, now, f.interval_s, recovered=derived.recovered)


def _strongest(*groups: list[Finding]) -> list[Finding]:
    """Return one finding per cause, the most confident of the groups, in catalogue order."""
    best: dict[str, Finding] = {}
    for group in groups:
        for finding in group:
            held = best.get(finding.cause)
            if held is None or finding.confidence > held.confidence:
                best[finding.cause] = finding
    return sorted(best.values(), key=lambda x: CAUSES.index(x.cause))
