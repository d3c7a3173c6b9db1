"""The daemon: settings → sources → engine → evaluator → playbook stage → HTTP, supervised."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from tritonguard.clients.kubernetes_api import KubernetesClient, KubernetesError
from tritonguard.clients.metrics_scraper import MetricsScraper
from tritonguard.clients.prometheus_query import PrometheusQueryClient
from tritonguard.clients.triton_api import TritonClient, TritonError
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.config_map_changes import ConfigMapChange
from tritonguard.core.engine import Diagnosis, Engine
from tritonguard.core.feature_rows import CAUSE_OF_ALERT, FeatureSnapshot
from tritonguard.core.features import SubjectKey
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import GROUP_GUARDS, one_per_group, with_past_groups
from tritonguard.core.hidden_alerts import (
    SHOWN_SUBJECTS,
    HiddenAlerts,
    HiddenAlertWarnings,
    by_alert,
    hidden_after_s,
)
from tritonguard.core.metric_names import is_consumed
from tritonguard.core.pod_targets import PodTarget
from tritonguard.core.recorded_incidents import CauseAlerts, FiringCause, RecordedIncidents
from tritonguard.core.rollout_changes import RolloutChange
from tritonguard.core.rules_export import compile_rules, recorded_features
from tritonguard.core.samples import Sample, label
from tritonguard.core.shards import SeriesFilter, static_target_workload
from tritonguard.core.targets import target_of
from tritonguard.core.unexplained import missing_text
from tritonguard.core.urls import redact_text, redact_url
from tritonguard.logs import get_logger
from tritonguard.runtime.alert_book import DEFAULT_TTL_S, AlertBook
from tritonguard.runtime.alertmanager_webhook import WEBHOOK_PATH, Alert
from tritonguard.runtime.baseline_keeper import BaselineKeeper, baselines_path
from tritonguard.runtime.http_server import HttpServer
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.leader_forwarding import LeaderForwarder
from tritonguard.runtime.log_throttle import LogThrottle
from tritonguard.runtime.playbook_reloader import ReloadState
from tritonguard.runtime.pod_discovery import PodDiscovery, PodWatchApi
from tritonguard.runtime.self_metrics import SelfMetrics
from tritonguard.runtime.shard_metrics import ShardMetrics
from tritonguard.runtime.slack_outbox import DeliveryStats
from tritonguard.runtime.supervisor import Supervisor
from tritonguard.settings import Settings, TargetSettings, shard_lease_name, split_listen
from tritonguard.sources.prometheus import PrometheusSource
from tritonguard.sources.recorded_features import RecordedFeatureSource
from tritonguard.sources.scrape import ScrapeSource
from tritonguard.sources.source_status import PollResult, Source, SourceStatus

EventsObserver = Callable[[list[IncidentEvent]], Awaitable[None]]
AlertsCallback = Callable[[list[Alert]], Awaitable[None]]
ConfigFetcher = Callable[[TargetSettings, str], Awaitable[Mapping[str, Any] | None]]
TargetsObserver = Callable[[list[TargetSettings]], None]


# How long the evaluator waits for config reads as incidents open: a healthy repository API
# answers in milliseconds; past a second the config loop reads again on its own and the
# change comes with an update.
OPENING_READS_S = 1.0
# Config reads queued for subjects whose latency shifted, and how many run at once: a bad
# config rolled out to a fleet shifts every pod together, and the queue must not grow with it.
MAX_SHIFT_READS = 1024
SHIFT_READ_CONCURRENCY = 8


class PlaybookHooks(Protocol):
    """What the daemon needs from its playbook stage (``playbook_service.PlaybookService``)."""

    def observe(self, samples: list[Sample], now: float) -> None:
        """Be told after each poll fed the store; ``samples`` may be empty, as scrapes go there."""
        ...

    def after_evaluation(self, events: list[IncidentEvent], now: float) -> None:
        """Start the playbook work of one evaluation without waiting for it."""
        ...

    def subscribe(self, observer: Callable[[list[ActionRecord]], None]) -> None:
        """Be told about every decision the stage records (the daemon counts them)."""
        ...

    @property
    def alerts(self) -> AlertBook:
        """Return the firing Alertmanager alerts playbooks match on (bounded)."""
        ...

    def slack_delivery(self) -> DeliveryStats:
        """Return how the Slack outbox's delivery stands, for /metrics."""
        ...

    def recorder_memory(self) -> tuple[int, int]:
        """Return (bytes the flight recorder holds, samples it has let go in all)."""
        ...

    def reload(self) -> None:
        """Reload the playbook files now (SIGHUP)."""
        ...

    def playbook_state(self) -> ReloadState | None:
        """Return which playbooks are active and whether the newest set loaded."""
        ...

    async def on_alerts(self, alerts: list[Alert]) -> None:
        """Remember which Alertmanager alerts fire (playbooks match on them)."""
        ...

    async def drain(self) -> None:
        """Wait for in-flight actions (cancelled when the shutdown grace is over)."""
        ...

    async def close(self) -> None:
        """Release clients and the audit database."""
        ...

    def actions_for(self, incident_id: str) -> list[dict[str, Any]]:
        """Return the audit trail of one incident."""
        ...

    def incident_history(self, limit: int = 100) -> list[dict[str, Any]]:
        """Return the latest incidents of the audit trail, resolved ones too, newest first."""
        ...

    def leadership(self) -> dict[str, Any] | None:
        """Return the leader-election state, or None when replicas do not elect a leader."""
        ...

    @property
    def elector(self) -> LeaderElector | None:
        """Return the leader elector (it publishes this replica's address), or None."""
        ...

    def explain_withheld(self, why: Callable[[Subject], str | None]) -> None:
        """Let a step without a Triton endpoint say why discovery withholds it."""
        ...

    def background(self) -> Mapping[str, Callable[[], Awaitable[None]]]:
        """Return long-running tasks to supervise until the very end (leader election)."""
        ...


# Shutdown stages: stop reading first, then evaluating, then let in-flight actions finish,
# and keep answering health checks until the very end.
STAGE_SOURCES, STAGE_EVALUATOR, STAGE_PLAYBOOKS, STAGE_HTTP = 0, 1, 2, 3


@dataclass(slots=True)
class _TargetHealth:
    ok_at: float | None = None
    last: SourceStatus | None = None


class DaemonApp:
    """One daemon instance. ``run()`` serves until SIGTERM/SIGINT or ``request_stop()``.

    ``playbooks`` (the playbook stage) gets every evaluation's transitions straight from the
    evaluator and starts their work without holding it up; at shutdown it gets
    ``shutdown_grace_s`` to finish what is in flight, and it is closed last. It also sees every
    ingested sample (flight recorder). Without it the daemon only diagnoses. ``on_events``
    observes each non-empty batch of transitions (the lab and tests watch the daemon with it).
    With ``discovery`` settings the daemon follows Triton pods through the Kubernetes API (the
    client from ``kube`` settings, or ``kube``): it scrapes them and tells ``on_targets``
    about every target with a Triton API whenever they change (the playbook stage's actions
    reach them so).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        engine: Engine | None = None,
        on_events: EventsObserver | None = None,
        on_alerts: AlertsCallback | None = None,
        playbooks: PlaybookHooks | None = None,
        registry: CollectorRegistry | None = None,
        sources: Sequence[Source] | None = None,
        config_fetcher: ConfigFetcher | None = None,
        clock: Callable[[], float] = time.time,
        kube: PodWatchApi | None = None,
        on_targets: TargetsObserver | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine or Engine(settings.engine_config())
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.metrics = SelfMetrics(self.registry)
        # With several shards this daemon follows only its shard's workloads (docs/sharding.md).
        self.shard = settings.shard.shard
        self.shard_metrics = ShardMetrics(self.registry, self.shard)
        self._filters: dict[str, SeriesFilter] = {}
        self.static_targets = [t for t in settings.targets if self._owns_static(t)]
        self.clock = clock
        self.supervisor = Supervisor(
            on_crash=lambda name, _: self.metrics.task_restarts.labels(name).inc()
        )
        self.sources: list[Source] = list(sources) if sources is not None else self._sources()
        for given in self.sources:
            if isinstance(given, ScrapeSource) and given.store is None:
                # A scrape source the daemon polls feeds its engine: read straight into the
                # store rather than through samples (docs/ingest.md).
                given.use_store(self.engine.store)
        # prometheus_mode features: the TSDB's recorded features and its rules' alerts stand
        # in for the engine's own evaluation; incidents stay in the engine's book.
        self.features_source = next(
            (s for s in self.sources if isinstance(s, RecordedFeatureSource)), None
        )
        self.recorded = (
            RecordedIncidents(self.engine, max_age_s=self.features_source.max_age_s)
            if self.features_source is not None
            else None
        )
        self.cause_alerts = (
            CauseAlerts(ttl_s=DEFAULT_TTL_S, max_alerts=settings.api.alert_book_max_alerts)
            if self.features_source is not None
            else None
        )
        # Webhook alerts the reads of ALERTS never list: warned of and counted, not acted on.
        self.hidden_alerts = (
            HiddenAlerts(
                bound_s=hidden_after_s(
                    # The rules are compiled for, and evaluated at, the read interval.
                    self.features_source.interval_s,
                    self.features_source.interval_s,
                )
            )
            if self.features_source is not None
            else None
        )
        self._hidden_warnings = HiddenAlertWarnings()
        if self.features_source is not None:
            # At 0 from the start, so a rule on it works before anything was hidden.
            self.metrics.set_hidden_alerts(dict.fromkeys(CAUSE_OF_ALERT, 0))
        self._unjudged_log = LogThrottle(60.0)
        self._judged_snapshot: object = None
        self.http: HttpServer | None = None
        self._playbooks = playbooks
        self._on_events = on_events
        self._on_alerts = on_alerts or (playbooks.on_alerts if playbooks is not None else None)
        if playbooks is not None:
            playbooks.subscribe(self.metrics.observe_actions)
            self.metrics.watch_alert_book(playbooks.alerts)
            self.metrics.watch_slack_outbox(playbooks.slack_delivery)
        self._memory_log = LogThrottle(60.0)
        # Why the webhook is off although a token was configured (an unreadable token_file).
        self._webhook_problem: str | None = None
        self._health: dict[tuple[str, str], _TargetHealth] = {}
        self._tritons: dict[str, TritonClient] = {}
        self._config_fetcher = config_fetcher or self._fetch_config_from_triton
        self._models: dict[str, set[str]] = {}
        # The store's (series count, drop generation) at its last scan for served models.
        self._stored_shape: tuple[int, int] | None = None
        self._configs_known: set[tuple[str, str]] = set()
        self._config_wanted = asyncio.Event()
        # The configs of subjects whose latency shifted (Engine.configs_wanted), read apart
        # from the periodic refresh of every model.
        self._shift_reads: dict[tuple[str, str], TargetSettings] = {}
        self._shift_wanted = asyncio.Event()
        # Set by a source poll that brought samples: the evaluator runs on it.
        self._scraped = asyncio.Event()
        self._log = get_logger("tritonguard.daemon")
        self._on_targets = on_targets
        self._discovered: list[TargetSettings] = []
        self._kube_owned: KubernetesClient | None = None
        self._discovery_problem: str | None = None
        self._discovered_token: SecretStr | None = None
        self.discovery = self._discovery(kube)
        if playbooks is not None and self.discovery is not None:
            discovery = self.discovery
            playbooks.explain_withheld(lambda subject: discovery.stale(subject.namespace))
        self._observe_leadership()
        # Baselines are kept in the state volume beside the audit trail, which only a daemon
        # with playbooks has; without one, a restart learns them again.
        self.baselines = (
            BaselineKeeper(self.engine, baselines_path(settings.audit_db_path), clock=clock)
            if playbooks is not None
            else None
        )

    # ---- construction ---------------------------------------------------------------------
    def _discovery(self, kube: PodWatchApi | None) -> PodDiscovery | None:
        d = self.settings.discovery
        if not d.enabled:
            return None
        if kube is None:
            k = self.settings.kube
            try:
                self._kube_owned = KubernetesClient.from_environment(
                    kubeconfig=str(k.kubeconfig) if k.kubeconfig is not None else None
                )
            except KubernetesError as exc:
                # The daemon still serves; /readyz says discovery is off and why.
                self._discovery_problem = str(exc)
                return None
            self._kube_owned.on_malformed = lambda why: self._log.warning(
                "malformed pod skipped", detail=why
            )
            kube = self._kube_owned
        try:
            self._discovered_token = d.access_token()
        except ValueError as exc:
            self._discovery_problem = str(exc)
            return None
        return PodDiscovery(
            kube,
            d,
            on_change=self._use_discovered,
            on_rollout=self._note_rollout,
            on_config_map=self._note_config_map,
            metrics=self.metrics,
            wall_clock=self.clock,
            stale_after_s=d.stale_after_s,
            keep=self.shard.owns_pod if self.shard.sharded else None,
        )

    def _owns_static(self, target: TargetSettings) -> bool:
        """Whether this shard scrapes a configured target (a pod's or a Triton's: one shard)."""
        workload = static_target_workload(
            target.namespace,
            target.pod,
            target.instance,
            has_api=target.triton_url is not None,
            describes_others=target.honor_labels,
        )
        return (
            workload is None
            or not self.shard.sharded
            or self.shard.owns(target.namespace, workload)
        )

    def _filter_of(self, source: str) -> SeriesFilter | None:
        """Return a source's shard filter of series, or None when unsharded."""
        if not self.shard.sharded:
            return None
        self._filters[source] = SeriesFilter(self.shard)
        return self._filters[source]

    def _note_config_map(self, namespace: str, pod: str, change: ConfigMapChange) -> None:
        """Take a change of a ConfigMap a discovered pod mounts: its incidents name it."""
        self.engine.note_config_map(namespace, pod, change)

    def _note_rollout(self, namespace: str, pod: str, rollout: RolloutChange) -> None:
        """Take the workload revision a discovered pod runs: its incidents name the rollout."""
        if self.engine.note_rollout(namespace, pod, rollout):
            self._log.info(
                "pod runs a rollout",
                namespace=namespace,
                pod=pod,
                rollout=rollout.headline(),
                diff=rollout.diff_text(),
            )

    @property
    def scrape_source(self) -> ScrapeSource | None:
        """Return the direct scrape source, if the daemon scrapes."""
        return next((s for s in self.sources if isinstance(s, ScrapeSource)), None)

    def known_targets(self) -> list[TargetSettings]:
        """Return the configured targets of this shard, then the discovered ones."""
        return [*self.static_targets, *self._discovered]

    def _use_discovered(self, pods: list[PodTarget]) -> None:
        """Take discovery's current targets: scrape them and make their Triton API known."""
        static = {t.name for t in self.static_targets}
        targets: list[TargetSettings] = []
        labels: dict[str, tuple[tuple[str, str], ...]] = {}
        for pod in pods:
            if pod.name in static:
                continue  # a configured target of the same name wins
            try:
                target = TargetSettings(
                    name=pod.name,
                    metrics_url=pod.metrics_url,
                    triton_url=pod.triton_url,
                    namespace=pod.namespace,
                    pod=pod.pod,
                    access_token=self._discovered_token,
                )
            except ValueError as exc:
                self._log.warning("discovered pod skipped", target=pod.name, error=str(exc))
                continue
            targets.append(target)
            labels[pod.name] = pod.labels()
        before = {t.name for t in self._discovered}
        self._discovered = targets
        # Other targets (or a target's models forgotten below) make series already stored
        # name models anew: the next stored poll scans the store again.
        self._stored_shape = None
        source = self.scrape_source
        if source is not None and self.settings.discovery.scrape:
            source.replace_targets([*self.static_targets, *targets], labels)
        gone = before - {t.name for t in targets}
        for name in gone:
            self._health.pop(("scrape", name), None)
            self._models.pop(name, None)
        self.metrics.forget_targets("scrape", gone)
        if self._on_targets is not None:
            self._on_targets([t for t in self.known_targets() if t.triton_url and self._fresh(t)])

    def _fresh(self, target: TargetSettings) -> bool:
        """Whether actions may use a target's endpoint: not one of a long-failing watch's."""
        if self.discovery is None or target not in self._discovered:
            return True
        why = self.discovery.stale(target.namespace)
        if why is not None:
            self._log.warning(
                "discovered endpoint withheld from actions", target=target.name, reason=why
            )
        return why is None

    def _sources(self) -> list[Source]:
        s = self.settings
        if s.prometheus_url and s.prometheus_mode == "features":
            return [self._features_source(s.prometheus_url)]
        sources: list[Source] = []
        if s.targets or (s.discovery.enabled and s.discovery.scrape):
            scraper = MetricsScraper(
                timeout_s=s.scrape_timeout_s,
                jitter_s=s.scrape_jitter_s,
                max_concurrency=s.max_concurrent_scrapes,
            )
            sources.append(
                ScrapeSource(
                    self.static_targets,
                    scraper,
                    interval_s=s.scrape_interval_s,
                    keep=is_consumed,
                    shard_filter=self._filter_of(ScrapeSource.name),
                    store=self.engine.store,
                )
            )
        if s.prometheus_url:
            client = PrometheusQueryClient(s.prometheus_url, timeout_s=s.prometheus_timeout_s)
            sources.append(
                PrometheusSource(
                    client,
                    interval_s=s.prometheus_interval_s,
                    backfill_s=s.prometheus_backfill_s,
                    shard_filter=self._filter_of(PrometheusSource.name),
                )
            )
        return sources

    def _features_source(self, url: str) -> RecordedFeatureSource:
        """Return the source reading the exported rules' features (prometheus_mode features)."""
        s = self.settings
        client = PrometheusQueryClient(
            url,
            timeout_s=s.prometheus_timeout_s,
            max_response_bytes=int(s.prometheus_max_response_mb * 1024 * 1024),
        )
        rules = compile_rules(s.thresholds, s.prometheus_interval_s)
        return RecordedFeatureSource(
            client,
            features=recorded_features(rules),
            thresholds=s.thresholds,
            interval_s=s.prometheus_interval_s,
            deadline_s=max(s.prometheus_interval_s, s.prometheus_timeout_s),
            clock=self.clock,
            shard_filter=self._filter_of(RecordedFeatureSource.name),
        )

    # ---- one step of each loop (also used by --once and tests) ------------------------------
    async def poll(self, source: Source) -> PollResult:
        """Poll one source, feed the engine, record health and metrics."""
        result = await source.poll()
        now = self.clock()
        series_filter = self._filters.get(source.name)
        if series_filter is not None:
            self.shard_metrics.observe_pods(source.name, *series_filter.take_counts())
        if result.samples:
            self.engine.ingest(result.samples, now)
        if result.ingested:
            # Samples a source stored itself (result.stored) count too; the playbook stage
            # sees only those handed on as samples.
            self.metrics.samples_ingested.labels(source.name).inc(result.ingested)
            if self._playbooks is not None:
                self._playbooks.observe(result.samples, now)
        self.metrics.observe_statuses(result.statuses)
        for status in result.statuses:
            health = self._health.setdefault((status.source, status.target), _TargetHealth())
            health.last = status
            if status.ok:
                health.ok_at = now
            else:
                self._log.warning(
                    "source target failed",
                    source=status.source,
                    target=status.target,
                    error=_shown(status.error),
                )
        self._note_models(result)
        if result.stored:
            self._note_stored_models()
        return result

    def _note_stored_models(self) -> None:
        """Learn the models of targets read straight into the store, from the store itself.

        Those scrapes bring no samples to look at; every served model has a request counter.
        """
        store = self.engine.store
        # Only a series that came or went (or targets that changed, see _use_discovered) can
        # name a model the last scan did not note: a steady fleet's polls skip the scan.
        shape = (len(store), store.generation)
        if shape == self._stored_shape:
            return
        by_identity = self._tritons_by_identity()
        if not by_identity:
            return
        self._stored_shape = shape
        new = False
        for ns, pod, model in store.index("nv_inference_request_success").by_subject:
            new |= self._note_model(by_identity.get((ns, pod)), model)
        if new:
            self._want_configs()

    def evaluate(self) -> list[IncidentEvent]:
        """Evaluate the engine now; count and log the transitions."""
        started = time.monotonic()
        events = self._evaluate_now(self.clock())
        self.metrics.evaluation_duration.observe(time.monotonic() - started)
        self.metrics.evaluations.inc()
        self.metrics.observe_events(events)
        self.metrics.set_open_incidents(self.engine.open_incidents())
        self.metrics.unexplained.set(self.engine.nameless.unexplained)
        self.shard_metrics.observe_subjects(self.engine.last_diagnoses)
        self._observe_memory()
        for event in events:
            self._log.info(
                "incident " + event.event,
                cause=event.cause,
                namespace=event.subject.namespace,
                pod=event.subject.pod,
                model=event.subject.model,
                confidence=round(event.confidence, 3),
                summary=event.summary,
            )
        self._say_unexplained(self.engine.newly_unexplained)
        self._queue_config_reads(self.engine.configs_wanted)
        return events

    def _say_unexplained(self, newly: list[Diagnosis]) -> None:
        """Warn once per run of each subject whose latency is up with no cause named.

        The engine lists a subject only on the evaluation its run qualified. A bad model on a
        fleet of thousands would give a line per pod in one evaluation: the first few are
        told in full, the rest counted in one line.
        """
        for seen in newly[:SHOWN_SUBJECTS]:
            if seen.unexplained is None:
                continue
            self._log.warning(
                "latency up with no cause named",
                namespace=seen.subject.namespace,
                pod=seen.subject.pod,
                model=seen.subject.model,
                symptom=", ".join(seen.symptom_reasons),
                up_for_s=round(self.clock() - seen.unexplained.since),
                missing=missing_text(seen.features) or "none: every source was read",
                hint="no cause signature holds, so no playbook runs; `tritonguard diagnose` "
                "shows the features, and the missing sources are the evidence some causes need",
            )
        if len(newly) > SHOWN_SUBJECTS:
            self._log.warning(
                "latency up with no cause named on more subjects",
                more=len(newly) - SHOWN_SUBJECTS,
                models=sorted({f"{d.subject.namespace}/{d.subject.model}" for d in newly})[
                    :SHOWN_SUBJECTS
                ],
                hint="tritonguard_unexplained_subjects counts them all",
            )

    def _evaluate_now(self, now: float) -> list[IncidentEvent]:
        """Run the engine, or in the features mode judge the rules' alerts on the snapshot."""
        if self.recorded is None or self.features_source is None or self.cause_alerts is None:
            return self.engine.evaluate(now)
        latest = self.features_source.latest
        heard = self.cause_alerts.firing(now)
        events = self.recorded.evaluate(latest, heard, now)
        self._report_hidden(latest, heard, now)
        if latest is not None and latest is not self._judged_snapshot:
            # Once per read, not per evaluation: several evaluations may judge one read.
            self._judged_snapshot = latest
            problems = latest.problems()
            if problems and (count := self._unjudged_log.tally("left_out")):
                self._log.warning(
                    "recorded features left out of the read",
                    detail=problems,
                    reads_since_last_line=count,
                    hint="series without namespace and model or pod, not a number, or one "
                    "subject answered twice (deduplicate replicas in the querier)",
                )
        unjudged = self.recorded.unjudged
        if unjudged and (count := self._unjudged_log.tally("unjudged", len(unjudged))):
            self._log.warning(
                "rule alerts not acted on: no fresh recorded features for their subjects",
                alerts=[f"{'/'.join(key)} {cause}" for key, cause in unjudged[:10]],
                since_last_line=count,
                read_error=_shown(latest.error) if latest is not None else "nothing read yet",
            )
        return events

    def _report_hidden(
        self,
        latest: FeatureSnapshot | None,
        heard: Mapping[SubjectKey, Mapping[str, FiringCause]],
        now: float,
    ) -> None:
        """Count and warn of webhook alerts the reads of ALERTS do not list (docs/modes.md)."""
        if self.hidden_alerts is None or self.features_source is None:
            return
        hidden = self.hidden_alerts.judge(latest, heard)
        if hidden is None:
            # A failed read tells nothing of what ALERTS would list: the counts stand.
            return
        named = by_alert(hidden)
        self.metrics.set_hidden_alerts({name: len(alerts) for name, alerts in named.items()})
        source = self.features_source
        for name in self._hidden_warnings.due(named, now):
            alerts = named[name]
            self._log.warning(
                "rule alerts hidden: the webhook reports them firing, the read of ALERTS "
                "does not list them, so no incident opens on them",
                alertname=name,
                subjects=[a.subject for a in alerts[:SHOWN_SUBJECTS]],
                hidden=len(alerts),
                absent_for_s=round(max(a.absent_s for a in alerts), 1),
                query=source.alerts_query,
                prometheus_url=redact_url(source.url),
                hint="make ALERTS queryable through prometheus_url (a label-enforcing proxy "
                "or tenant must let the series through, a Thanos or Mimir querier must reach "
                "the ruler's alerts), or point prometheus_url at the Prometheus or ruler "
                "whose rules fire",
            )

    def _observe_memory(self) -> None:
        """Export the memory the bounded parts hold; say so when the budget sheds."""
        m = self.engine.memory()
        held = {"series": m["series_bytes"], "baselines": m["baseline_bytes"]}
        shed = {
            "series": m["series_shed"],
            "points": m["points_shed"],
            "baseline_subjects": m["baseline_subjects_shed"],
        }
        if self._playbooks is not None:
            held["flight_recorder"], shed["recorder_samples"] = self._playbooks.recorder_memory()
        self.metrics.series.set(m["series"])
        state = self._playbooks.playbook_state() if self._playbooks is not None else None
        if state is not None:
            self.metrics.observe_playbooks(state.playbooks, state.ok, state.failures)
        new = self.metrics.observe_memory(held, shed)
        if new and (count := self._memory_log.tally("shed", sum(new.values()))) is not None:
            self._log.warning(
                "memory budget reached: shedding",
                budget_mb=self.settings.memory_budget_mb,
                shed=new,
                since_last_line=count,
                hint="raise memory_budget_mb (and the pod's memory limit) or watch fewer series",
            )

    async def dispatch(self, events: list[IncidentEvent], now: float) -> None:
        """Start the playbook work for one evaluation, then tell ``on_events``; never fatal."""
        opened = [e for e in events if e.event == "opened"]
        if opened:
            await self._name_changes(opened)
        if self._playbooks is not None:
            try:
                self._playbooks.after_evaluation(events, now)
            except Exception as exc:
                self._log.error("playbook stage failed", events=len(events), exc_info=exc)
        if self._on_events is not None and events:
            try:
                await self._on_events(events)
            except Exception as exc:
                self._log.error("event observer failed", events=len(events), exc_info=exc)

    async def run_once(self) -> tuple[list[IncidentEvent], list[SourceStatus]]:
        """Poll every source once, evaluate, dispatch; return events and source statuses."""
        statuses: list[SourceStatus] = []
        for source in self.sources:
            statuses.extend((await self.poll(source)).statuses)
        events = self.evaluate()
        await self.dispatch(events, self.engine.last_evaluated or self.clock())
        await self._close_clients()
        return events, statuses

    # ---- root tasks -------------------------------------------------------------------------
    async def _source_loop(self, source: Source) -> None:
        previous: float | None = None
        while not self.supervisor.stopping.is_set():
            started = time.monotonic()
            result = await self.poll(source)
            # A tick is due one interval after the one before; lateness shows a tick longer
            # than its interval or an event loop too busy to wake this task on time.
            lag = None if previous is None else started - previous - source.interval_s
            self.metrics.observe_tick(
                source.name,
                lag_s=lag,
                duration_s=time.monotonic() - started,
                interval_s=source.interval_s,
            )
            previous = started
            # Counting what a scrape stored itself: the fused path hands on no samples, and
            # without it the evaluator woke only every evaluation_interval_s (5 s), judging
            # one scrape in two or three at a 2 s scrape.
            if result.ingested or (source is self.features_source and result.ok):
                self._scraped.set()
            await self._sleep(source.interval_s - (time.monotonic() - started))

    async def _evaluator_loop(self) -> None:
        # Evaluate when new samples arrive (the fast path needs every scrape), at most every
        # evaluation_min_gap_s with many targets, and at least every evaluation_interval_s so
        # staleness is noticed when nothing arrives.
        interval = self.settings.evaluation_interval_s
        gap = min(self.settings.evaluation_min_gap_s, interval)
        while not self.supervisor.stopping.is_set():
            started = time.monotonic()
            self._scraped.clear()
            events = self.evaluate()
            # The models an incident moved on are read again (a resolved one may have been
            # fixed by hand), not every model: on a fleet each event would start a refresh of
            # thousands. An opening's model is read as it is dispatched.
            self._queue_config_reads([e.subject for e in events if e.event != "opened"])
            self._observe_leadership()
            await self.dispatch(events, self.engine.last_evaluated or self.clock())
            await self._sleep(gap - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, interval - (time.monotonic() - started))):
                    await self._scraped.wait()

    def _observe_leadership(self) -> None:
        # Without a playbook stage nothing here acts, posts or writes Events: no replica of
        # such an installation needs to lead, and it never campaigns.
        if self._playbooks is None:
            self.metrics.observe_leadership(needed=False, leading=False)
            return
        leadership = self._playbooks.leadership()
        leading = leadership is None or bool(leadership["leader"])
        self.metrics.observe_leadership(needed=True, leading=leading)

    async def _playbooks_loop(self) -> None:
        # Runs until shutdown, then drains inside this task's grace: in-flight actions finish.
        await self.supervisor.stopping.wait()
        if self._playbooks is not None:
            await self._playbooks.drain()

    async def _model_config_loop(self) -> None:
        while not self.supervisor.stopping.is_set():
            self._config_wanted.clear()
            await self._refresh_configs()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.model_config_refresh_s):
                    await self._config_wanted.wait()

    async def _shift_reads_loop(self) -> None:
        # Apart from the refresh of every model, which on a fleet takes minutes and runs again
        # after incident events: a shift's read must not wait behind it.
        while not self.supervisor.stopping.is_set():
            await self._shift_wanted.wait()
            self._shift_wanted.clear()
            await self._read_shifted()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the daemon stops."""
        if seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.supervisor.stopping.wait()

    # ---- model configs ----------------------------------------------------------------------
    def _note_models(self, result: PollResult) -> None:
        # By the identity subjects carry, so series read from Prometheus find their pod too.
        by_identity = self._tritons_by_identity()
        if not by_identity:
            return
        new = False
        for sample in result.samples:
            if sample.name.startswith("nv_inference_"):
                target = by_identity.get(target_of(sample.labels))
                new |= self._note_model(target, label(sample.labels, "model"))
        if new:
            self._want_configs()

    def _note_model(self, target: TargetSettings | None, model: str) -> bool:
        """Note that ``target`` serves ``model``; return whether that was not known yet."""
        if target is None or not model:
            return False
        models = self._models.setdefault(target.name, set())
        if model in models:
            return False
        models.add(model)
        return True

    def _want_configs(self) -> None:
        self._config_wanted.set()

    def _tritons_by_identity(self) -> dict[tuple[str, str], TargetSettings]:
        """Return the targets with a repository API, by the identity their subjects carry."""
        return {t.identity: t for t in self.known_targets() if t.triton_url}

    def _queue_config_reads(self, subjects: list[Subject]) -> None:
        """Queue a config read for each subject (a loop of its own reads).

        A deploy through the repository API between periodic reads leaves the config in
        force unknown when the causes need it (shift_reads.py): a subject whose latency
        shifted waits for its read to be judged, so one that cannot be read (no repository
        API, or past the bounded queue) is told at once to go on without it.
        """
        if not subjects:
            return
        by_identity = self._tritons_by_identity()
        for subject in subjects:
            target = by_identity.get((subject.namespace, subject.pod))
            if target is not None and len(self._shift_reads) < MAX_SHIFT_READS:
                self._shift_reads[(target.name, subject.model)] = target
            else:
                self.engine.config_unanswered(subject)
        if self._shift_reads:
            self._shift_wanted.set()

    async def _read_shifted(self) -> None:
        """Read the queued configs, a few at a time (each bounded by ``triton_timeout_s``).

        Then evaluate at once: the subjects waiting for these reads are judged with them.
        """
        pending, self._shift_reads = self._shift_reads, {}
        gate = asyncio.Semaphore(SHIFT_READ_CONCURRENCY)

        async def read(target: TargetSettings, model: str) -> None:
            noted = False
            try:
                async with gate:
                    noted = await self._read_config(target, model)
            finally:
                if not noted:
                    ns, pod = target.identity
                    self.engine.config_unanswered(Subject(namespace=ns, model=model, pod=pod))

        results = await asyncio.gather(
            *(read(target, model) for (_, model), target in pending.items()),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            self._log.warning(
                "config reads on a latency shift failed",
                failed=len(failed),
                of=len(pending),
                error=str(failed[0]),
            )
        self._scraped.set()

    def refresh_model_configs(self, subject_key: str | None = None) -> None:
        """Re-read model configs soon: a playbook changed the subject's (every model's if None).

        ``subject_key`` is ``Subject.key()``; a fleet group's (pod ``*``) names every pod of
        its namespace serving the model.
        """
        changed = Subject.from_key(subject_key) if subject_key is not None else None
        if changed is None:
            self._want_configs()
            return
        self._queue_config_reads(
            [
                Subject(namespace=t_ns, model=changed.model, pod=t_pod)
                for target in self.known_targets()
                if changed.model in self._models.get(target.name, ())
                for t_ns, t_pod in (target.identity,)
                if t_ns == changed.namespace and changed.pod in ("", t_pod)
            ]
        )

    async def _refresh_configs(self) -> None:
        targets = {t.name: t for t in self.known_targets()}
        for target_name, models in list(self._models.items()):
            target = targets.get(target_name)
            if target is None:
                continue
            for model in sorted(models):
                await self._read_config(target, model)

    async def _read_config(self, target: TargetSettings, model: str) -> bool:
        """Read one model's config into the engine; return whether one came back."""
        # The read holds what the server had when it was asked: a periodic read and one at
        # an incident's opening may race, and the slower must not pass for the newer.
        asked = self.clock()
        config = await self._config_fetcher(target, model)
        if config is None:
            return False
        # Keyed like the target's subjects: a Triton outside Kubernetes is its instance.
        ns, pod = target.identity
        subject = Subject(namespace=ns, model=model, pod=pod)
        change = self.engine.note_model_config(subject, config, at=asked)
        if change is not None:
            self._log.info(
                "model config changed",
                target=target.name,
                model=model,
                change=change.summary(),
                since=change.at_earliest,
            )
        if (target.name, model) not in self._configs_known:
            self._configs_known.add((target.name, model))
            self._log.info("model config read", target=target.name, model=model)
        return True

    async def _name_changes(self, opened: list[IncidentEvent]) -> None:
        """Read the configs of newly opened incidents' models, so each names what changed.

        A deploy's config may have landed since the last periodic read, and the playbooks
        about to run (``triton.revert_config``) and the first Slack message need to know it.
        Bounded by ``OPENING_READS_S`` (or ``triton_timeout_s`` when shorter) for all of them
        together, since the evaluator waits: an overloaded Triton, the case being diagnosed,
        answers late. A read that does not come back in time leaves its incident without a
        change; the loop of shift reads then reads it again, and the change comes with an
        update.
        """
        by_identity = self._tritons_by_identity()
        wanted = {
            (target.name, e.subject.model): target
            for e in opened
            if (target := by_identity.get((e.subject.namespace, e.subject.pod))) is not None
        }
        if not wanted:
            return
        reads = [self._read_config(target, model) for (_, model), target in wanted.items()]
        try:
            async with asyncio.timeout(min(OPENING_READS_S, self.settings.triton_timeout_s)):
                await asyncio.gather(*reads, return_exceptions=True)
        except TimeoutError:
            self._log.warning("config reads at incident opening timed out", models=len(wanted))
            self._queue_config_reads([e.subject for e in opened])
        for e in opened:
            e.change = self.engine.change_before(e.subject, e.opened_at)

    async def _fetch_config_from_triton(
        self, target: TargetSettings, model: str
    ) -> Mapping[str, Any] | None:
        if not target.triton_url:
            return None
        client = self._tritons.get(target.name)
        if client is not None and client.base_url != target.triton_url.rstrip("/"):
            # The pod came back under the same name at another address.
            await client.close()
            client = None
        if client is None:
            token = target.access_token.get_secret_value() if target.access_token else None
            client = TritonClient(
                target.triton_url, access_token=token, timeout_s=self.settings.triton_timeout_s
            )
            self._tritons[target.name] = client
        try:
            return await client.model_config(model)
        except TritonError as exc:
            self._log.warning(
                "model config unavailable", target=target.name, model=model, error=str(exc)
            )
            return None

    async def _close_clients(self) -> None:
        for source in self.sources:
            await source.close()
        for client in self._tritons.values():
            await client.close()
        self._tritons.clear()
        if self._kube_owned is not None:
            self._kube_owned.close()

    # ---- readiness, alerts --------------------------------------------------------------------
    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when some source delivered recently and the engine evaluated recently."""
        now = self.clock()
        s = self.settings
        # Each source by its own cadence: a Prometheus polled every 5 s that went away must not
        # look fresh for three 15 s scrape intervals it never had.
        stale_after = {
            "scrape": 3 * s.scrape_interval_s + s.scrape_timeout_s,
            "prometheus": 3 * s.prometheus_interval_s + s.prometheus_timeout_s,
        }
        longest = max(stale_after.values())
        targets: dict[str, Any] = {}
        fresh = False
        for (source, target), health in sorted(self._health.items()):
            age = None if health.ok_at is None else round(now - health.ok_at, 3)
            fresh = fresh or (age is not None and age <= stale_after.get(source, longest))
            targets[f"{source}/{target}"] = {
                "ok": health.last.ok if health.last else False,
                "last_success_age_s": age,
                "error": _shown(health.last.error) if health.last else None,
            }
        last_eval = self.engine.last_evaluated
        eval_age = None if last_eval is None else round(now - last_eval, 3)
        evaluated = eval_age is not None and eval_age <= 3 * s.evaluation_interval_s + 1.0
        # A scrape source with nothing to scrape (discovery found no pod yet) is not a failure.
        expected = [x for x in self.sources if not isinstance(x, ScrapeSource) or x.targets]
        sources_ok = fresh or not expected
        discovery: dict[str, Any] | None = None
        discovery_ok = True
        if self.discovery is not None:
            discovery = self.discovery.status()
            discovery_ok = bool(discovery["ready"])
        elif self.settings.discovery.enabled:
            discovery = {"ready": False, "error": self._discovery_problem}
            discovery_ok = False
        ready = sources_ok and evaluated and discovery_ok and not self.supervisor.stopping.is_set()
        state = self._playbooks.playbook_state() if self._playbooks is not None else None
        detail = {
            "dry_run": s.dry_run.as_dict(),
            "shard": {"index": self.shard.index, "count": self.shard.count},
            "leadership": self._playbooks.leadership() if self._playbooks is not None else None,
            "playbooks": state.as_dict() if state is not None else None,
            "sources_fresh": sources_ok,
            "discovery": discovery,
            "last_evaluation_age_s": eval_age,
            "stopping": self.supervisor.stopping.is_set(),
            "targets": targets,
            "tasks": {
                name: {"running": st.running, "restarts": st.restarts, "last_error": st.last_error}
                for name, st in self.supervisor.states().items()
            },
        }
        return ready, detail

    async def _handle_alerts(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            self.metrics.alerts_received.labels(alert.status).inc()
        self._log.info(
            "alertmanager notification",
            alerts=len(alerts),
            names=sorted({a.name for a in alerts}),
        )
        if self.cause_alerts is not None and self.features_source is not None:
            # Other shards' subjects are theirs to judge: kept here they would be logged as
            # not acted on for as long as they fire.
            mine = [a for a in alerts if self.features_source.keeps(a.labels)]
            before = self.cause_alerts.dropped
            self.cause_alerts.update(mine, self.clock())
            dropped = self.cause_alerts.dropped - before
            if dropped and (count := self._unjudged_log.tally("cause_alerts_dropped", dropped)):
                self._log.warning(
                    "rule alerts full: oldest cause alerts dropped",
                    dropped=count,
                    dropped_total=self.cause_alerts.dropped,
                    max_alerts=self.cause_alerts.max_alerts,
                    hint="raise api.alert_book_max_alerts",
                )
        if self._on_alerts is not None:
            await self._on_alerts(alerts)

    def incidents_json(self) -> list[dict[str, Any]]:
        """Return the open incidents in the replay/CLI JSON form, one entry per fleet group.

        A group's entry lists its pods (``group``) and what was done on any of them.
        """
        out = []
        for event in one_per_group(self.engine.open_incidents()):
            item = event.as_dict()
            if self._playbooks is not None:
                ids = event.group.incidents if event.group is not None else ()
                item["actions"] = [
                    a
                    for incident_id in ids or (event.incident_id,)
                    for a in self._playbooks.actions_for(incident_id)
                    if incident_id == event.incident_id
                    or not (a.get("status") == "skipped" and a.get("guard") in GROUP_GUARDS)
                ]
            out.append(item)
        return out

    def history_json(self) -> list[dict[str, Any]]:
        """Return the latest incidents of the audit trail, resolved ones too, newest first.

        Each of a past fleet group names it (``group``: its first incident and pods).
        """
        return (
            [] if self._playbooks is None else with_past_groups(self._playbooks.incident_history())
        )

    # ---- lifecycle ----------------------------------------------------------------------------
    def build(self) -> None:
        """Register every root task and cleanup with the supervisor (idempotent per instance)."""
        sup = self.supervisor
        for source in self.sources:
            sup.add(
                f"source:{source.name}",
                functools.partial(self._source_loop, source),
                stage=STAGE_SOURCES,
            )
        if self.discovery is not None:
            sup.add("discovery", self.discovery.run, stage=STAGE_SOURCES)
        sup.add("model-configs", self._model_config_loop, stage=STAGE_SOURCES)
        sup.add("config-reads-on-shift", self._shift_reads_loop, stage=STAGE_SOURCES)
        sup.add("evaluator", self._evaluator_loop, stage=STAGE_EVALUATOR)
        if self.baselines is not None:
            # The task takes the saved baselines back first, in a thread, then saves.
            sup.add("baselines", self.baselines.run, stage=STAGE_EVALUATOR)
        if self._playbooks is not None:
            sup.add(
                "playbooks",
                self._playbooks_loop,
                stage=STAGE_PLAYBOOKS,
                grace_s=self.settings.shutdown_grace_s,
            )
        host, port = split_listen(self.settings.listen)
        api = self.settings.api
        try:
            token = api.bearer_token()
        except ValueError as exc:
            # The webhook stays off rather than open; run() logs why.
            token, self._webhook_problem = None, str(exc)
        self.http = HttpServer(
            host=host,
            port=port,
            registry=self.registry,
            readiness=self.readiness,
            incidents=self.incidents_json,
            history=self.history_json,
            on_alerts=self._handle_alerts,
            api_token=token,
            on_refused=self.metrics.count_refusal,
            forwarder=self._leader_forwarder(token, port),
            max_body_bytes=api.max_body_bytes,
            read_timeout_s=api.read_timeout_s,
            max_json_depth=api.max_json_depth,
        )
        sup.add("http", self.http.serve_forever, stage=STAGE_HTTP)
        if self._playbooks is not None:
            # Election keeps renewing while in-flight actions drain, so it stops last.
            for name, factory in self._playbooks.background().items():
                sup.add(name, factory, stage=STAGE_HTTP)
        sup.add_cleanup("clients", self._close_clients)
        if self.baselines is not None:
            # A SIGTERM saves what was learnt since the last periodic save.
            sup.add_cleanup("baselines", self.baselines.save)
        if self._playbooks is not None:
            sup.add_cleanup("playbooks", self._playbooks.close)

    def _leader_forwarder(self, token: str | None, port: int) -> LeaderForwarder | None:
        """Publish this replica's address on its Lease; forward posts it may not act on.

        Without election every replica acts on what it receives; without a token the webhook
        is off. With shards the posts go to every shard's leader (docs/sharding.md).
        """
        elector = self._playbooks.elector if self._playbooks is not None else None
        if elector is None:
            return None
        if elector.advertise_url is None:
            elector.advertise_url = self.settings.kube.advertised_url(port)
        if token is None:
            return None
        shard = self.shard
        base = elector.name.removesuffix(f"-shard-{shard.index}") if shard.sharded else ""
        leases = (
            [shard_lease_name(base, i) for i in range(shard.count)]
            if shard.sharded
            else [elector.name]
        )
        return LeaderForwarder(
            elector.kube,
            namespace=elector.namespace,
            leases=leases,
            own_lease=elector.name,
            identity=elector.identity,
            token=token,
            leads=elector.is_leader,
            timeout_s=self.settings.kube.forward_timeout_s,
            registry=self.registry,
        )

    def _log_webhook_state(self) -> None:
        endpoint = f"POST {WEBHOOK_PATH}"
        if self._webhook_problem is not None:
            self._log.error(
                "Alertmanager webhook off (404): the bearer token cannot be read; "
                "fix api.token_file",
                endpoint=endpoint,
                problem=self._webhook_problem,
            )
        elif self.http is None or not self.http.webhook_enabled:
            self._log.warning(
                "Alertmanager webhook off (404): no bearer token; set api.token_file "
                "(or TRITONGUARD_API__TOKEN) to turn it on",
                endpoint=endpoint,
            )
        else:
            source = "api.token_file" if self.settings.api.token_file else "api.token"
            self._log.info(
                "Alertmanager webhook on: bearer token required",
                endpoint=endpoint,
                token_from=source,
            )

    def request_stop(self, reason: str = "requested") -> None:
        """Begin a graceful shutdown."""
        self.supervisor.request_stop(reason)

    async def run(self, *, install_signals: bool = True) -> None:
        """Serve until stopped; with ``install_signals`` SIGTERM/SIGINT stop gracefully.

        SIGHUP reloads the playbook files.
        """
        if not self.sources:
            self._log.warning("no targets and no prometheus_url: nothing to watch")
        if self._discovery_problem is not None:
            self._log.error("pod discovery off", error=self._discovery_problem)
        self.build()
        remove = self.supervisor.install_signal_handlers() if install_signals else None
        if install_signals and self._playbooks is not None:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, self._playbooks.reload)
        self._log.info(
            "daemon starting",
            targets=[t.name for t in self.static_targets],
            shard=f"{self.shard.index} of {self.shard.count}",
            discovery=self.settings.discovery.namespaces or None,
            prometheus=redact_url(self.settings.prometheus_url or "") or None,
            prometheus_mode=self.settings.prometheus_mode if self.settings.prometheus_url else None,
            dry_run=self.settings.dry_run.as_dict(),
            listen=self.settings.listen,
        )
        self._log_webhook_state()
        try:
            await self.supervisor.run()
        finally:
            if remove is not None:
                remove()
                if self._playbooks is not None:
                    asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)


def _shown(error: str | None) -> str | None:
    """Return an error message fit to show: a URL a library echoed loses its userinfo."""
    return None if error is None else redact_text(error)
