"""The features mode against a real Prometheus evaluating the exported rules.

Prometheus (the Debian binary) scrapes synthetic Tritons, one stuck in its batcher and one
healthy, and evaluates the rule file ``tritonguard rules export`` writes. The daemon reads
every recorded feature with one instant query per feature for the whole fleet, and the rules'
firing cause alerts (``ALERTS``) with one more; a proxy in front of Prometheus counts the
queries and injects its faults. The rules' alerts also reach the daemon through a real
Alertmanager and its webhook.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fault_harness import FAST, STALE_REASON, readiness, running, until
from tests.fault_servers import Answer, FaultProxy, HoldAnswer
from tests.fixtures_alertmanager import (  # noqa: F401 - alertmanager_starter: the fixture
    AlertmanagerProcess,
    StartAlertmanager,
    alertmanager_starter,
    webhook_config,
)
from tests.fixtures_prometheus import (
    MetricsServer,
    PrometheusProcess,
    closed_port_url,
    launch_prometheus,
    prometheus_binary,
)
from tests.synthetic_triton import BatchingTriton
from tests.webhook_harness import TOKEN
from tritonguard.clients.prometheus_query import PrometheusQueryClient
from tritonguard.core.engine import Engine
from tritonguard.core.feature_rows import read_features
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.rules_export import (
    compile_rules,
    recorded_features,
    render_yaml,
    rule_file,
    rule_group,
)
from tritonguard.core.shards import SeriesFilter, Shard
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.settings import Settings
from tritonguard.sources.recorded_features import RecordedFeatureSource

pytestmark = pytest.mark.live

INTERVAL_S = 0.5
# Windows of a few seconds so the rules fire within seconds of Prometheus' start; data is
# stale 3 s after the rules last wrote it. Each 0.5 s evaluation counts on its own (no
# hold, as at coarse scrapes), so an incident also resolves within seconds of its fix.
THRESHOLDS = FAST.model_copy(
    update={"rate_window_s": 3.0, "stale_after_min_s": 3.0, "hold_single_scrape_s": 0.5}
)
SICK = Subject("search", "ranker", "ranker-0")
WELL = Subject("search", "ranker", "ranker-1")
FEATURES = recorded_features(compile_rules(THRESHOLDS, INTERVAL_S))
# What a poll queries of them: FeatureSet's fields and the symptom.
READ = read_features(FEATURES)


def _key(subject: Subject) -> tuple[str, str, str]:
    return (subject.namespace, subject.pod, subject.model)


def start_rules_prometheus(
    workdir: Path, pods: Mapping[str, str], alertmanager: str | None = None
) -> PrometheusProcess:
    """Start Prometheus scraping each pod's ``host:port`` and evaluating the exported rules."""
    binary = prometheus_binary()
    if binary is None:
        raise RuntimeError("prometheus is not installed; run `make system-deps`")
    workdir.mkdir(parents=True, exist_ok=True)
    rules = workdir / "tritonguard.rules.yaml"
    rules.write_text(render_yaml(rule_file([rule_group(THRESHOLDS, INTERVAL_S)])))
    every = f"{int(INTERVAL_S * 1000)}ms"
    config: dict[str, object] = {
        "global": {"scrape_interval": every, "scrape_timeout": every, "evaluation_interval": every},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": f"triton-{pod}",
                "static_configs": [
                    {"targets": [target], "labels": {"namespace": "search", "pod": pod}}
                ],
            }
            for pod, target in pods.items()
        ],
    }
    if alertmanager is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return launch_prometheus(binary, workdir, config)


@asynccontextmanager
async def fleet(
    tmp_path: Path, alertmanager: str | None = None
) -> AsyncIterator[tuple[PrometheusProcess, BatchingTriton]]:
    """Serve the two Tritons and run Prometheus on them until the block ends.

    Yields Prometheus and the sick Triton (``healthy`` fixes it).
    """
    well, sick = BatchingTriton(), BatchingTriton()
    well.healthy = True
    sick_server = await MetricsServer(render=sick.render).start()
    well_server = await MetricsServer(render=well.render).start()
    pods = {SICK.pod: sick_server.host_port, WELL.pod: well_server.host_port}
    prom = await asyncio.to_thread(start_rules_prometheus, tmp_path / "prom", pods, alertmanager)
    try:
        yield prom, sick
    finally:
        await asyncio.to_thread(prom.stop)
        await sick_server.stop()
        await well_server.stop()


def firing(prom: PrometheusProcess, cause: str = "batching_delay") -> bool:
    """Whether the rules' alert of ``cause`` fires on the sick pod."""
    result = prom.query(
        f'ALERTS{{alertstate="firing", cause="{cause}", pod="{SICK.pod}", model="{SICK.model}"}}'
    )
    return bool(result)


def queries_served(prom: PrometheusProcess) -> float:
    """Return how many instant queries Prometheus answered over HTTP, by its own /metrics."""
    with urllib.request.urlopen(f"{prom.url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
    )


def source_on(
    url: str,
    max_response_bytes: int | None = None,
    shard: SeriesFilter | None = None,
    concurrency: int = 4,
) -> RecordedFeatureSource:
    """Return the features source the daemon builds, on ``url``."""
    return RecordedFeatureSource(
        PrometheusQueryClient(url, timeout_s=2.0, max_response_bytes=max_response_bytes),
        features=FEATURES,
        thresholds=THRESHOLDS,
        interval_s=INTERVAL_S,
        deadline_s=3.0,
        shard_filter=shard,
        concurrency=concurrency,
    )


async def test_one_query_per_feature_reads_the_whole_fleet_onto_its_subjects(
    tmp_path: Path,
) -> None:
    """Each poll sends one instant query per recorded feature, whatever the fleet holds.

    Both the proxy in front of Prometheus and Prometheus' own request counter see exactly
    one query per feature (and the confidences, and the rules' alerts) per poll, for two
    pods as for one. The values land on the subject they were recorded for: the batcher's
    queue on ranker-0, the healthy pod's on ranker-1, and they are the ones Prometheus'
    rules recorded; the firing batching_delay alert is ranker-0's alone, and only on the
    shard that owns its workload.
    """
    async with fleet(tmp_path) as (prom, _), FaultProxy(prom.url) as proxy:
        await until(lambda: firing(prom), 60.0, prom.log_tail)
        source = source_on(proxy.url)
        counted = []
        for _ in range(2):
            before_proxy, before_prom = len(proxy.seen), queries_served(prom)
            result = await source.poll()
            counted.append((len(proxy.seen) - before_proxy, queries_served(prom) - before_prom))
        # Two shards: the pods' one workload (ranker, a StatefulSet) is one shard's alone.
        shards = [source_on(prom.url, shard=SeriesFilter(Shard(i, 2))) for i in range(2)]
        for sharded in shards:
            await sharded.poll()
            await sharded.close()
        direct = {
            r["metric"]["pod"]: float(r["value"][1]) for r in prom.query("tritonguard:queue_share")
        }
        await source.close()
    per_poll = len(READ) + 2
    assert source.features == [*READ, "cause_confidence"] and "pod_seen" not in READ
    assert counted == [(per_poll, per_poll)] * 2, counted
    assert source.queries == 2 * per_poll
    assert result.ok and result.statuses[0].samples > 0
    snapshot = source.latest
    assert snapshot is not None and snapshot.ok and snapshot.problems() == {}
    sick, well = snapshot.features[_key(SICK)], snapshot.features[_key(WELL)]
    assert sick.fresh and well.fresh
    assert sick.queue_share is not None and sick.queue_share > 0.8
    assert well.queue_share is not None and well.queue_share < 0.2
    assert sick.queue_share == pytest.approx(direct[SICK.pod], abs=0.05)
    assert sick.request_rate == pytest.approx(60.0, rel=0.1)
    assert "symptom" in snapshot.extra[_key(SICK)]
    assert "symptom" not in snapshot.extra.get(_key(WELL), {})
    assert snapshot.confidences[_key(SICK)]["batching_delay"] >= THRESHOLDS.open_confidence
    assert snapshot.alerts == {_key(SICK): frozenset({"batching_delay"})}
    owner = Shard(0, 2).owns(SICK.namespace, "ranker")
    kept = [set(s.latest.features) if s.latest is not None else None for s in shards]
    assert kept == (
        [{_key(SICK), _key(WELL)}, set()] if owner else [set(), {_key(SICK), _key(WELL)}]
    )
    alerted = [s.latest.alerts if s.latest is not None else None for s in shards]
    mine = {_key(SICK): frozenset({"batching_delay"})}
    assert alerted == ([mine, {}] if owner else [{}, mine])


async def test_nan_and_duplicate_series_are_left_out_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    """An answer with NaN and a subject twice: those values are unknown, the read goes on.

    The first feature query (``request_rate``) is answered by the proxy with one NaN series,
    two series of one subject and the fleet's own two rates; the daemon counts the NaN as
    not finite and the pair as a conflict, and every other feature, from the real
    Prometheus, is read and fresh.
    """
    other = {"namespace": SICK.namespace, "pod": SICK.pod, "model": "other"}
    nan = {"namespace": WELL.namespace, "pod": WELL.pod, "model": "other"}
    rows: list[dict[str, object]] = [
        {"metric": {**other, "replica": "a"}, "value": [0, "1"]},
        {"metric": {**other, "replica": "b"}, "value": [0, "1"]},
        {"metric": nan, "value": [0, "NaN"]},
    ]
    # The fleet's own request rates, so its subjects stay fresh.
    for s in (SICK, WELL):
        labels = {"namespace": s.namespace, "pod": s.pod, "model": s.model}
        rows.append({"metric": labels, "value": [0, "60"]})
    odd = {
        "status": "success",
        "data": {"resultType": "vector", "result": rows},
    }
    async with fleet(tmp_path) as (prom, _), FaultProxy(prom.url) as proxy:
        await until(lambda: firing(prom), 60.0, prom.log_tail)
        # One query at a time, so the odd answer is the first feature's, the pod's own.
        source = source_on(proxy.url, concurrency=1)
        proxy.add("GET", r"/api/v1/query", Answer(200, odd), times=1)
        result = await source.poll()
        await source.close()
    snapshot = source.latest
    assert result.ok and snapshot is not None and snapshot.ok
    # The NaN is counted as not finite; the duplicate is a conflict.
    assert source.features[0] == "request_rate"
    assert snapshot.problems() == {"conflicts": 1, "not_finite": 1}
    assert snapshot.fresh((SICK.namespace, SICK.pod, "other")) is None
    assert snapshot.fresh((WELL.namespace, WELL.pod, "other")) is None
    assert snapshot.fresh(_key(SICK)) is not None and snapshot.fresh(_key(WELL)) is not None


@dataclass(frozen=True)
class Fault:
    """One way Prometheus answers badly, and what the failed read must say."""

    name: str
    answer: Answer | HoldAnswer
    says: str
    # How many queries answer so: one among the rest, or every one (a slow Prometheus).
    times: int = 1


FAULTS = (
    Fault("garbage", Answer(200, "<html>proxy error</html>"), "malformed response"),
    Fault("error", Answer(503, "overloaded"), "HTTP Status Code 503"),
    Fault(
        "wrong shape",
        Answer(200, {"status": "success", "data": {"resultType": "vector", "result": [1, 2]}}),
        "malformed result",
    ),
    Fault(
        "huge",
        Answer(
            200,
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"namespace": "n", "model": f"m{i}"}, "value": [0, "1"]}
                        for i in range(20_000)
                    ],
                },
            },
        ),
        "answer larger than 262144 bytes",
    ),
    # Each answer within the client's timeout, all of them together past the poll's deadline.
    Fault(
        "slow",
        HoldAnswer(1.0),
        "queries (features and rule alerts) not answered within 3s",
        times=10**6,
    ),
)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_a_bad_answer_fails_the_whole_read_quickly_and_nothing_is_fresh(
    tmp_path: Path, fault: Fault
) -> None:
    """Garbage, an error, a wrong shape, a huge or a slow answer: a failed read, in bounded time.

    One bad answer among the feature queries fails the snapshot (nothing of it is fresh)
    within the poll's deadline, with a reason naming the fault; the next poll, with
    Prometheus answering well again, reads everything.
    """
    async with fleet(tmp_path) as (prom, _), FaultProxy(prom.url) as proxy:
        await until(lambda: firing(prom), 60.0, prom.log_tail)
        source = source_on(proxy.url, max_response_bytes=256 * 1024)
        rule = proxy.add("GET", r"/api/v1/query", fault.answer, times=fault.times)
        started = time.monotonic()
        bad = await source.poll()
        took = time.monotonic() - started
        failed = source.latest
        rule.times = 0
        good = await source.poll()
        await source.close()
    assert not bad.ok and bad.stored == 0
    (status,) = bad.statuses
    assert status.error is not None and fault.says in status.error, status.error
    assert failed is not None and not failed.ok and failed.fresh(_key(SICK)) is None
    assert took < 4.0
    assert good.ok and source.latest is not None and source.latest.fresh(_key(SICK)) is not None


ALERTS_FAULTS = (
    Fault("garbage", Answer(200, "<html>proxy error</html>"), "malformed response"),
    Fault("error", Answer(503, "overloaded"), "HTTP Status Code 503"),
    Fault(
        "wrong shape",
        Answer(200, {"status": "success", "data": {"resultType": "vector", "result": ["x"]}}),
        "malformed result",
    ),
)


async def test_a_bad_alerts_answer_fails_the_whole_read(tmp_path: Path) -> None:
    """Every feature answered well, the rule alerts' query badly: the read fails whole.

    With one query at a time the alerts query is the last; the proxy passes the features
    through and spoils only its answer, with garbage, an error or a wrong shape in turn.
    Each such snapshot is not ok, names the alerts query and the fault, has nothing fresh
    and no alerts, so the daemon acts on none of it; the next read is whole again, its
    alert included.
    """
    async with fleet(tmp_path) as (prom, _), FaultProxy(prom.url) as proxy:
        await until(lambda: firing(prom), 60.0, prom.log_tail)
        source = source_on(proxy.url, concurrency=1)
        for fault in ALERTS_FAULTS:
            features = proxy.add("GET", r"/api/v1/query", HoldAnswer(0.0), times=len(READ) + 1)
            spoiled = proxy.add("GET", r"/api/v1/query", fault.answer, times=1)
            bad = await source.poll()
            failed = source.latest
            good = await source.poll()
            assert features.times == 0 and spoiled.times == 0, fault.name
            (status,) = bad.statuses
            assert not bad.ok and bad.stored == 0, fault.name
            assert status.error is not None and "rule alerts query: " in status.error
            assert fault.says in status.error, status.error
            assert failed is not None and not failed.ok and failed.error == status.error
            assert failed.fresh(_key(SICK)) is None and failed.alerts is None
            assert good.ok and source.latest is not None, good
            assert source.latest.alerts == {_key(SICK): frozenset({"batching_delay"})}
        await source.close()
    assert len(proxy.faulted("Answer")) == len(ALERTS_FAULTS)


async def test_prometheus_down_fails_the_read_at_once() -> None:
    """Nothing listening: the read fails in well under a second, saying so."""
    source = source_on(closed_port_url(path=""))
    started = time.monotonic()
    result = await source.poll()
    took = time.monotonic() - started
    await source.close()
    assert not result.ok and took < 2.0
    assert "connection failed (is Prometheus running?)" in (result.statuses[0].error or "")
    # The first failure stops the rest: not one connection attempt per feature.
    assert source.queries <= 4


VERIFY = """
name: check-the-batcher
when: {causes: [batching_delay]}
guards: {cooldown: 1h, dry_run: false}
steps:
  - action: verify
    params: {wait: 1s, checks: [{feature: queue_share, below: 0.5}]}
"""
LATER = """
name: tell-on-call
when: {causes: [batching_delay], held_for: 6s}
guards: {cooldown: 1h}
steps:
  - action: slack.post
    params: {text: "{{ pod }} waits in the batcher"}
"""


@dataclass
class Watch:
    """The daemon in the features mode, and what it announced."""

    app: DaemonApp
    service: PlaybookService
    events: list[IncidentEvent] = field(default_factory=list)
    # The Alertmanager posting to it, when there is one.
    alertmanager: AlertmanagerProcess | None = None
    # Queries the features source had sent when each batch of events was announced.
    queries_at: list[int] = field(default_factory=list)

    def opened(self) -> IncidentEvent | None:
        """Return the first incident opened on the sick pod."""
        return next((e for e in self.events if e.event == "opened" and e.subject == SICK), None)

    def trail(self) -> list[tuple[str, str, str, str, str]]:
        """Return (playbook, action, status, guard, reason) of each decision on it."""
        first = self.opened()
        if first is None:
            return []
        return [
            (r.playbook, r.action, r.status, r.guard, r.reason)
            for r in self.service.store.decisions(first.incident_id)
        ]


def features_settings(tmp_path: Path, prometheus_url: str, playbook: str) -> Settings:
    """Daemon settings in the features mode, webhook on, remediation live (verify only)."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "book.yaml").write_text(playbook)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    return Settings(
        prometheus_url=prometheus_url,
        prometheus_mode="features",
        prometheus_interval_s=INTERVAL_S,
        prometheus_timeout_s=2.0,
        evaluation_interval_s=0.25,
        listen="127.0.0.1:0",
        shutdown_grace_s=3.0,
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        thresholds=THRESHOLDS,
        api={"token_file": token},
        dry_run={"notify": True, "remediate": False},
    )


def features_watch(tmp_path: Path, prometheus_url: str, playbook: str) -> Watch:
    """Build the daemon in the features mode on ``prometheus_url``, recording its events."""
    s = features_settings(tmp_path, prometheus_url, playbook)
    engine = Engine(s.engine_config())
    service = build_service(s, engine)
    watch: Watch

    async def on_events(events: list[IncidentEvent]) -> None:
        watch.events.extend(events)
        source = watch.app.features_source
        watch.queries_at.extend([source.queries if source is not None else -1] * len(events))

    app = DaemonApp(s, engine=engine, playbooks=service, on_events=on_events)
    watch = Watch(app, service)
    return watch


@asynccontextmanager
async def features_daemon(
    tmp_path: Path, alertmanager: StartAlertmanager, playbook: str
) -> AsyncIterator[tuple[Watch, str, PrometheusProcess, BatchingTriton]]:
    """Run the fleet, Alertmanager posting to the daemon, and the daemon reading the rules."""
    # Prometheus is not up yet: its address is fixed first, so the daemon can be built.
    proxy = await FaultProxy("http://127.0.0.1:1").start()
    waiting = proxy.add("*", r".*", Answer(503, "Prometheus not started yet"), times=10**6)
    watch = features_watch(tmp_path, proxy.url, playbook)
    app = watch.app
    credentials = tmp_path / "alertmanager-token"
    credentials.write_text(TOKEN)
    try:
        async with running(app) as base:
            am = await asyncio.to_thread(alertmanager, webhook_config(base, credentials))
            watch.alertmanager = am
            async with fleet(tmp_path, am.url.removeprefix("http://")) as (prom, sick):
                proxy.upstream, waiting.times = prom.url, 0
                yield watch, base, prom, sick
    finally:
        await proxy.stop()


async def test_a_rule_alert_opens_the_incident_and_verify_judges_the_recorded_features(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """End to end: Prometheus' rule fires, Alertmanager posts it, the daemon acts on features.

    The incident opens on the sick pod only, told with the recorded queue share; the verify
    step reads the TSDB's queue share (still high: the fault is not fixed), fails on it and
    the playbook stops there. The healthy pod never has an incident.
    """
    async with features_daemon(tmp_path, alertmanager, VERIFY) as (watch, _, _, _):
        app = watch.app
        await until(lambda: any(t[1] == "verify" for t in watch.trail()), 90.0, watch.trail)
        now = app.clock()
        recorded = app.engine.feature_value(SICK, "queue_share", now)
        snapshot = app.features_source.latest if app.features_source is not None else None
        trail = watch.trail()
    opened = watch.opened()
    assert opened is not None and opened.cause == "batching_delay"
    assert opened.evidence["queue_share"].what == "recorded tritonguard:queue_share"
    assert opened.evidence["queue_share"].value is not None
    assert opened.evidence["queue_share"].value > 0.8
    assert all(e.subject != WELL for e in watch.events)
    assert recorded is not None and recorded > 0.8
    assert snapshot is not None and snapshot.ok
    verify = next(t for t in trail if t[1] == "verify")
    assert verify[2] == "failed", trail
    assert "verify failed: queue_share=0.9" in verify[4], verify


async def test_the_resolved_alert_and_recovered_features_resolve_the_incident(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """The fault is fixed: the rule stops firing, Alertmanager says so, the incident resolves.

    It resolves with recovery evidence (the recorded symptom is gone), and the daemon then
    reads the subject as recovered.
    """
    async with features_daemon(tmp_path, alertmanager, LATER) as (watch, _, prom, sick):
        app = watch.app
        await until(lambda: watch.opened() is not None, 90.0, prom.log_tail)
        sick.healthy = True
        await until(
            lambda: any(e.event == "resolved" for e in watch.events), 60.0, lambda: watch.events
        )
        recovered = app.engine.recovered(SICK, app.clock())
        alerts = app.cause_alerts.firing(app.clock()) if app.cause_alerts is not None else None
    kinds = [e.event for e in watch.events if e.subject == SICK]
    assert kinds[0] == "opened" and kinds[-1] == "resolved", kinds
    resolved = watch.events[-1]
    assert resolved.recovered and resolved.cause == "batching_delay"
    assert recovered and alerts == {}


async def test_an_alert_firing_before_the_daemon_starts_opens_with_no_notification(
    tmp_path: Path,
) -> None:
    """Started while a rule alert fires, with no Alertmanager: its first reads open and resolve.

    Prometheus' rule fires before the daemon starts and Prometheus notifies no Alertmanager,
    so no webhook call ever arrives (as after a restart, long before Alertmanager would
    repeat its notification). The daemon's first read lists the alert in ``ALERTS`` and the
    incident opens on it, before a third read is sent. Once the fault is fixed the rule stops
    firing and the reads alone resolve the incident, with recovery evidence.
    """
    per_read = len(READ) + 2
    async with fleet(tmp_path) as (prom, sick):
        await until(lambda: firing(prom), 60.0, prom.log_tail)
        watch = features_watch(tmp_path, prom.url, LATER)
        app = watch.app
        async with running(app):
            await until(lambda: watch.opened() is not None, 15.0, lambda: watch.events)
            sick.healthy = True
            await until(
                lambda: any(e.event == "resolved" for e in watch.events),
                60.0,
                lambda: watch.events,
            )
            recovered = app.engine.recovered(SICK, app.clock())
            still = firing(prom)
        told = len(app.cause_alerts) if app.cause_alerts is not None else None
    kinds = [e.event for e in watch.events if e.subject == SICK]
    assert kinds == ["opened", "resolved"], kinds
    assert watch.events[0].cause == "batching_delay"
    assert 0 < watch.queries_at[0] <= 2 * per_read, (watch.queries_at, per_read)
    assert watch.events[-1].recovered and recovered and not still
    assert told == 0
    assert all(e.subject != WELL for e in watch.events)


async def test_a_lost_resolution_does_not_hold_the_incident_open(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """Alertmanager told the daemon the alert fires, then went away: the reads resolve it.

    Alertmanager stops once its firing notification arrived, so no resolution is ever
    delivered and the webhook's book still holds the alert; the reads of ``ALERTS`` no
    longer list it once the fault is fixed, and the incident resolves on them with recovery
    evidence, rather than after the book's hours-long expiry, and does not reopen.
    """
    async with features_daemon(tmp_path, alertmanager, LATER) as (watch, _, prom, sick):
        app = watch.app
        book, am = app.cause_alerts, watch.alertmanager
        assert book is not None and am is not None
        await until(
            lambda: watch.opened() is not None and _key(SICK) in book.firing(app.clock()),
            90.0,
            prom.log_tail,
        )
        await asyncio.to_thread(am.stop)
        sick.healthy = True
        await until(
            lambda: any(e.event == "resolved" for e in watch.events), 60.0, lambda: watch.events
        )
        # More reads and evaluations: the webhook's stale word reopens nothing.
        await asyncio.sleep(2.0)
        told = book.firing(app.clock())
        still = firing(prom)
    kinds = [e.event for e in watch.events if e.subject == SICK]
    assert kinds == ["opened", "resolved"], kinds
    assert watch.events[-1].recovered and not still
    assert set(told.get(_key(SICK), {})) == {"batching_delay"}, told


async def test_prometheus_down_leaves_the_daemon_up_and_stops_the_playbook_as_stale(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """The incident opened; then Prometheus goes away: missing data, and no action on it.

    The playbook due six seconds in is stopped by the ``stale`` guard, the subject reads
    unknown rather than zero, the incident neither resolves nor reopens, and /readyz names
    the failed read while the daemon keeps serving, every task running.
    """
    async with features_daemon(tmp_path, alertmanager, LATER) as (watch, base, prom, _):
        app = watch.app
        await until(lambda: watch.opened() is not None, 90.0, prom.log_tail)
        await asyncio.to_thread(prom.stop)
        await until(lambda: any(t[3] == "stale" for t in watch.trail()), 40.0, watch.trail)
        await asyncio.sleep(2.0)
        _, ready = await readiness(base)
        now = app.clock()
        assert not app.engine.is_fresh(SICK, now)
        assert app.engine.feature_value(SICK, "queue_share", now) is None
        assert app.engine.book.is_open(SICK)
        trail = watch.trail()
    assert [e.event for e in watch.events if e.subject == SICK] == ["opened"]
    assert trail == [("tell-on-call", "*", "skipped", "stale", STALE_REASON)]
    targets = ready["targets"]
    assert isinstance(targets, dict)
    entry = targets["prometheus_features/features"]
    assert entry["ok"] is False and entry["error"]
    tasks = ready["tasks"]
    assert isinstance(tasks, dict)
    assert all(t["running"] and t["restarts"] == 0 for t in tasks.values()), tasks
