"""The daemon's own Prometheus metrics, kept in an injected registry (not the global one)."""

from __future__ import annotations

import contextlib
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent
from tritonguard.runtime.alert_book import CAPS, AlertBook
from tritonguard.runtime.alertmanager_webhook import WEBHOOK_PATH
from tritonguard.runtime.api_auth import REFUSALS
from tritonguard.runtime.slack_outbox import DeliveryStats
from tritonguard.sources.source_status import SourceStatus


class _OutboxCollector:
    """Reads the Slack outbox at each scrape: its backlog lives in the audit database."""

    def __init__(self) -> None:
        self.stats: Callable[[], DeliveryStats] = DeliveryStats

    def collect(self) -> Iterator[Metric]:
        s = self.stats()
        yield GaugeMetricFamily(
            "tritonguard_slack_outbox_pending",
            "Slack messages waiting in the outbox for delivery (retries and Retry-After waits "
            "included).",
            value=s.pending,
        )
        yield GaugeMetricFamily(
            "tritonguard_slack_outbox_oldest_pending_age_seconds",
            "How long the oldest Slack message in the outbox has waited; 0 with none waiting.",
            value=s.oldest_pending_age_s,
        )
        yield CounterMetricFamily(
            "tritonguard_slack_outbox_given_up",
            "Slack messages given up since the start: refused for good, or undelivered for "
            "slack.outbox.give_up_after_s, with the rest of a thread whose root never posted.",
            value=s.given_up,
        )


class SelfMetrics:
    """Counters and gauges describing scrapes, evaluations, incidents and actions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.scrape_duration = Histogram(
            "tritonguard_source_poll_duration_seconds",
            "Time one poll of one target (scrape or PromQL group) took.",
            ["source", "target"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.scrape_errors = Counter(
            "tritonguard_source_poll_errors_total",
            "Polls of a target that returned no data (down, slow, bad exposition).",
            ["source", "target"],
            registry=registry,
        )
        self.target_up = Gauge(
            "tritonguard_source_up",
            "1 when the last poll of the target succeeded, else 0.",
            ["source", "target"],
            registry=registry,
        )
        self.tick_lag = Gauge(
            "tritonguard_source_tick_lag_seconds",
            "How late the newest tick of a source (one poll of all its targets) started, "
            "against one interval after the tick before: 0 when on time. A tick longer than "
            "the interval, or an event loop too busy to wake on time, makes it grow.",
            ["source"],
            registry=registry,
        )
        self.tick_duration = Histogram(
            "tritonguard_source_tick_duration_seconds",
            "Time one tick of a source took: every target polled, parsed and stored.",
            ["source"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60),
            registry=registry,
        )
        self.tick_overruns = Counter(
            "tritonguard_source_tick_overruns_total",
            "Ticks that took longer than their source's interval, so that the next one "
            "started late.",
            ["source"],
            registry=registry,
        )
        self.samples_ingested = Counter(
            "tritonguard_samples_ingested_total",
            "Samples handed to the engine.",
            ["source"],
            registry=registry,
        )
        self.leader = Gauge(
            "tritonguard_leader",
            "1 when this replica may run playbooks (it holds the leader lease, or replicas do "
            "not elect one), else 0.",
            registry=registry,
        )
        self.leader_needed = Gauge(
            "tritonguard_leader_needed",
            "1 when this replica runs the playbook stage (playbooks, Slack threads, Kubernetes "
            "Events), so one replica of its installation must lead, even with no playbook "
            "loaded; 0 when it only diagnoses and nothing waits for a leader.",
            registry=registry,
        )
        self.evaluations = Counter(
            "tritonguard_evaluations_total", "Engine evaluations.", registry=registry
        )
        self.evaluation_duration = Histogram(
            "tritonguard_evaluation_duration_seconds",
            "Time one engine evaluation took.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=registry,
        )
        self.incident_events = Counter(
            "tritonguard_incident_events_total",
            "Incident transitions, by event and cause.",
            ["event", "cause"],
            registry=registry,
        )
        self.open_incidents = Gauge(
            "tritonguard_open_incidents",
            "Incidents open now, by cause.",
            ["cause"],
            registry=registry,
        )
        self.unexplained = Gauge(
            "tritonguard_unexplained_subjects",
            "Subjects whose latency has been up a full rate window while no cause held: the "
            "engine abstains rather than guess. The daemon's log names each, with the sources "
            "it could not read.",
            registry=registry,
        )
        self.actions = Counter(
            "tritonguard_actions_total",
            "Playbook step records, by status (ok, planned, skipped, failed, ...).",
            ["status"],
            registry=registry,
        )
        self.task_restarts = Counter(
            "tritonguard_task_restarts_total",
            "Root tasks restarted after a crash.",
            ["task"],
            registry=registry,
        )
        self.alerts_received = Counter(
            "tritonguard_alertmanager_alerts_total",
            "Alerts received on the Alertmanager webhook, by status.",
            ["status"],
            registry=registry,
        )
        self.api_unauthorized = Counter(
            "tritonguard_api_unauthorized_total",
            "Requests to state-changing endpoints refused (401) for a missing, malformed "
            "(not Bearer) or wrong token.",
            ["endpoint", "reason"],
            registry=registry,
        )
        self.alert_book_evicted = Counter(
            "tritonguard_alert_book_evicted_total",
            "Firing alerts dropped, least recently heard of first, to keep the alert book "
            "within a cap (api.alert_book_max_alerts or api.alert_book_max_bytes).",
            ["cap"],
            registry=registry,
        )
        self.alert_book_alerts = Gauge(
            "tritonguard_alert_book_alerts",
            "Firing Alertmanager alerts the daemon remembers for playbook matching.",
            registry=registry,
        )
        self.alert_book_bytes = Gauge(
            "tritonguard_alert_book_bytes",
            "Estimated memory those alerts take, as counted against api.alert_book_max_bytes.",
            registry=registry,
        )
        self.memory = Gauge(
            "tritonguard_memory_bytes",
            "Memory the bounded parts hold, as counted against memory_budget_mb.",
            ["part"],
            registry=registry,
        )
        self.series = Gauge(
            "tritonguard_series", "Series in the engine's store.", registry=registry
        )
        self.shed = Counter(
            "tritonguard_memory_shed_total",
            "What the memory budget turned away: new series not stored, old points dropped, "
            "subjects whose baseline history was dropped, flight-recorder points let go.",
            ["what"],
            registry=registry,
        )
        self._shed_seen: dict[str, int] = {}
        self.rule_alerts_hidden = Gauge(
            "tritonguard_rule_alerts_hidden",
            "prometheus_mode features: rule cause alerts the Alertmanager webhook reports "
            "firing that the reads of ALERTS have not listed for longer than two rule "
            "evaluations and a read, by alert name. The read wins, so no incident opens on "
            "them: above 0, ALERTS is not queryable through prometheus_url, or it points at "
            "another Prometheus than the one whose rules fire.",
            ["alertname"],
            registry=registry,
        )
        self._hidden_seen: set[str] = set()
        self.discovery_targets = Gauge(
            "tritonguard_discovery_targets",
            "Triton pods discovery found ready to scrape, by namespace.",
            ["namespace"],
            registry=registry,
        )
        self.discovery_synced = Gauge(
            "tritonguard_discovery_synced",
            "1 while discovery's view of a namespace is current (listed, watch open), else 0.",
            ["namespace"],
            registry=registry,
        )
        self.discovery_errors = Counter(
            "tritonguard_discovery_watch_errors_total",
            "Pod list or watch requests that failed, by namespace and kind of failure "
            "(down, timeout, forbidden, ...).",
            ["namespace", "kind"],
            registry=registry,
        )
        self.playbooks_loaded = Gauge(
            "tritonguard_playbooks_loaded", "Playbooks active now.", registry=registry
        )
        self.playbooks_reload_ok = Gauge(
            "tritonguard_playbooks_reload_ok",
            "1 when the newest playbook files loaded, 0 while a broken set is refused (the last "
            "good set stays active).",
            registry=registry,
        )
        self.playbooks_reload_failures = Counter(
            "tritonguard_playbooks_reload_failures_total",
            "Playbook sets that did not load (each left the last good set active).",
            registry=registry,
        )
        self._reload_failures_seen = 0
        # Known label values start at 0, so a rate() over them works before the first event.
        for reason in REFUSALS:
            self.api_unauthorized.labels(WEBHOOK_PATH, reason)
        for cap in CAPS:
            self.alert_book_evicted.labels(cap)
        for what in ("series", "points", "baseline_subjects", "recorder_samples"):
            self.shed.labels(what)
        self._causes_seen: set[str] = set()
        # At 0 until the daemon's outbox is watched: a rule can read them from the start.
        self._outbox = _OutboxCollector()
        registry.register(self._outbox)

    def watch_slack_outbox(self, stats: Callable[[], DeliveryStats]) -> None:
        """Export the Slack outbox's backlog and give-ups, read at each scrape."""
        self._outbox.stats = stats

    def observe_memory(self, held: Mapping[str, int], shed: Mapping[str, int]) -> dict[str, int]:
        """Export what the bounded parts hold and their shed totals; return what is new."""
        for part, size in held.items():
            self.memory.labels(part).set(size)
        new: dict[str, int] = {}
        for what, total in shed.items():
            delta = total - self._shed_seen.get(what, 0)
            if delta > 0:
                self.shed.labels(what).inc(delta)
                new[what] = delta
            self._shed_seen[what] = total
        return new

    def observe_leadership(self, *, needed: bool, leading: bool) -> None:
        """Set whether this replica needs a leader (it may act) and whether it is the one."""
        self.leader_needed.set(1 if needed else 0)
        self.leader.set(1 if needed and leading else 0)

    def observe_playbooks(self, active: int, ok: bool, failures: int) -> None:
        """Export the active playbook count, whether the newest set loaded, its failures."""
        self.playbooks_loaded.set(active)
        self.playbooks_reload_ok.set(1 if ok else 0)
        if failures > self._reload_failures_seen:
            self.playbooks_reload_failures.inc(failures - self._reload_failures_seen)
        self._reload_failures_seen = failures

    def observe_tick(
        self, source: str, *, lag_s: float | None, duration_s: float, interval_s: float
    ) -> None:
        """Record one tick of a source: how late it started (None: the first), how long it took."""
        if lag_s is not None:
            self.tick_lag.labels(source).set(max(0.0, lag_s))
        self.tick_duration.labels(source).observe(duration_s)
        overruns = self.tick_overruns.labels(source)  # at 0 from the first tick on
        if duration_s > interval_s:
            overruns.inc()

    def observe_statuses(self, statuses: Iterable[SourceStatus]) -> None:
        """Record one poll's per-target outcomes."""
        for status in statuses:
            self.scrape_duration.labels(status.source, status.target).observe(status.duration_s)
            self.target_up.labels(status.source, status.target).set(1.0 if status.ok else 0.0)
            if not status.ok:
                self.scrape_errors.labels(status.source, status.target).inc()

    def observe_discovery(self, namespace: str, targets: int, synced: bool) -> None:
        """Export one namespace's discovered target count and whether its view is current."""
        self.discovery_targets.labels(namespace).set(targets)
        self.discovery_synced.labels(namespace).set(1 if synced else 0)

    def count_discovery_error(self, namespace: str, kind: str) -> None:
        """Count one failed pod list or watch request."""
        self.discovery_errors.labels(namespace, kind).inc()

    def forget_targets(self, source: str, targets: Iterable[str]) -> None:
        """Drop the per-target series of targets that are gone (deleted pods).

        Pods come and go under new names; without this, churn would grow /metrics forever.
        """
        for target in targets:
            for metric in (self.scrape_duration, self.scrape_errors, self.target_up):
                with contextlib.suppress(KeyError):
                    metric.remove(source, target)

    def observe_events(self, events: Iterable[IncidentEvent]) -> None:
        """Count incident transitions."""
        for event in events:
            self.incident_events.labels(event.event, event.cause).inc()

    def set_open_incidents(self, incidents: Iterable[IncidentEvent]) -> None:
        """Set the open-incident gauge; causes that closed drop back to 0 rather than vanish."""
        tally = Tally(event.cause for event in incidents)
        self._causes_seen.update(tally)
        for cause in self._causes_seen:
            self.open_incidents.labels(cause).set(tally.get(cause, 0))

    def set_hidden_alerts(self, counts: Mapping[str, int]) -> None:
        """Set the hidden rule alerts by alert name; names no longer hidden drop back to 0."""
        self._hidden_seen.update(counts)
        for name in self._hidden_seen:
            self.rule_alerts_hidden.labels(name).set(counts.get(name, 0))

    def watch_alert_book(self, book: AlertBook) -> None:
        """Export the book's size and count what it drops."""
        self.alert_book_alerts.set_function(lambda: book.count)
        self.alert_book_bytes.set_function(lambda: book.bytes)
        book.on_evicted = lambda cap, n: self.alert_book_evicted.labels(cap).inc(n)

    def count_refusal(self, endpoint: str, reason: str) -> None:
        """Count one request refused for its credentials."""
        self.api_unauthorized.labels(endpoint, reason).inc()

    def observe_actions(self, records: Iterable[ActionRecord]) -> None:
        """Count playbook decisions by status."""
        for record in records:
            self.actions.labels(record.status).inc()
