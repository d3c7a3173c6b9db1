"""The daemon in-process with playbooks: synthetic Triton metrics → incident → audited actions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.fixtures_prometheus import MetricsServer
from tests.playbook_harness import StaticFeatures, stage
from tests.synthetic_triton import BatchingTriton
from tritonguard.actions.registry import catalog
from tritonguard.cli.main import main
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import EventKind, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS
from tritonguard.runtime.playbook_service import (
    PlaybookService,
    TritonDirectory,
    build_service,
    flight_recorder_dir,
    playbook_dirs,
)
from tritonguard.settings import KubeSettings, Settings, SlackSettings, TargetSettings

# Short windows and holds so an incident opens within a second or two of scraping; the
# defaults (30 s windows, 10 s hold) are tuned for 15 s scrape intervals, not a unit test.
FAST = Thresholds(
    rate_window_s=1.5,
    stale_after_min_s=2.0,
    hold_s=0.5,
    resolve_after_s=1.0,
    resolve_after_scrapes=2.0,
)

NOTIFY = """
name: tell-the-batcher-story
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: slack.post
    params: {channel: "#tritonguard-alerts", text: "{{ model }} waits in the batcher"}
"""


def settings(tmp_path: Path, server: MetricsServer, **extra: Any) -> Settings:
    """Daemon settings scraping ``server`` fast, with the test playbook and an audit file."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "notify.yaml").write_text(NOTIFY)
    values: dict[str, Any] = {
        "targets": [
            TargetSettings(name="t0", metrics_url=server.url, namespace="search", pod="ranker-0")
        ],
        "scrape_interval_s": 0.25,
        "scrape_timeout_s": 0.25,
        "scrape_jitter_s": 0.0,
        "evaluation_interval_s": 0.25,
        "listen": "127.0.0.1:0",
        "shutdown_grace_s": 5.0,
        "playbook_dirs": [books],
        "audit_db_path": tmp_path / "audit.sqlite3",
        "thresholds": FAST,
        **extra,
    }
    return Settings(**values)


def slack_of(fake: FakeSlack) -> SlackSettings:
    """Slack settings pointing at the fake Web API."""
    return SlackSettings(token=fake.token, channel="#tritonguard-alerts", base_url=fake.base_url)


def daemon(s: Settings) -> tuple[DaemonApp, PlaybookService]:
    """Build the daemon as `tritonguard run` does."""
    engine = Engine(EngineConfig(thresholds=s.thresholds))
    service = build_service(s, engine)
    app = DaemonApp(s, engine=engine, playbooks=service)
    service.on_change = app.refresh_model_configs
    return app, service


async def wait_for(predicate: Callable[[], object], timeout_s: float = 15.0) -> float:
    """Poll ``predicate`` until it holds: 15 s unless told, for a daemon with its scrapes to run."""
    return await waiting.wait_for(predicate, timeout_s)


@asynccontextmanager
async def running(app: DaemonApp) -> AsyncIterator[str]:
    """Run the daemon; yield its base URL; stop it and require a clean exit."""
    task = asyncio.create_task(app.run(install_signals=False))
    await wait_for(lambda: app.http is not None and app.http.port != 0, 5.0)
    assert app.http is not None
    try:
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        if not task.done():
            app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)


def decisions(service: PlaybookService) -> list[ActionRecord]:
    """Every decision of the daemon's audit trail."""
    return service.store.decisions()


@pytest.fixture
async def metrics() -> AsyncIterator[tuple[BatchingTriton, MetricsServer]]:
    """Serve the exposition of a model stuck in its batcher."""
    model = BatchingTriton()
    server = await MetricsServer(render=model.render).start()
    try:
        yield model, server
    finally:
        await server.stop()


async def test_dry_run_plans_are_audited_and_shown_on_api_incidents(
    tmp_path: Path, metrics: tuple[BatchingTriton, MetricsServer], fake_slack: FakeSlack
) -> None:
    """With both dry-run switches on (the default) the playbook is planned and audited, not run.

    Its notification is planned too, so nothing goes to Slack: the deploy's config turns the
    notification switch off (test_dry_run_switches.py). /readyz states both switches.
    """
    _, server = metrics
    s = settings(tmp_path, server, slack=slack_of(fake_slack))
    assert s.dry_run.notify and s.dry_run.remediate
    app, runner = daemon(s)
    async with running(app) as base, aiohttp.ClientSession() as http:
        await wait_for(lambda: any(d.status == "planned" for d in decisions(runner)))
        async with http.get(f"{base}/api/incidents") as resp:
            body = await resp.json()
        async with http.get(f"{base}/api/incidents/history") as resp:
            history = await resp.json()
        async with http.get(f"{base}/readyz") as resp:
            ready = await resp.json()
        async with http.get(f"{base}/metrics") as resp:
            exported = await resp.text()
    assert ready["dry_run"] == {"notify": True, "remediate": True}
    # The Slack outbox's state is on /metrics from the start (nothing to deliver here).
    assert "tritonguard_slack_outbox_pending 0.0" in exported
    [incident] = body["incidents"]
    # The audit trail lists it too, with the id `tritonguard test --from-incident` takes.
    assert [h["incident_id"] for h in history["incidents"]] == [incident["id"]]
    assert (incident["cause"], incident["model"], incident["pod"]) == (
        "batching_delay",
        "ranker",
        "ranker-0",
    )
    [action] = incident["actions"]
    assert action["action"] == "slack.post"
    assert (action["status"], action["dry_run"]) == ("planned", True)
    assert action["params"]["text"] == "ranker waits in the batcher"
    # The plan is in the SQLite file, not just in memory.
    stored = AuditStore(s.audit_db_path)
    try:
        assert [(d.action, d.status) for d in stored.decisions()] == [("slack.post", "planned")]
        assert stored.incident(incident["id"]) is not None
    finally:
        stored.close()
    assert fake_slack.roots_in("tritonguard-alerts") == []


async def test_acting_for_real_then_a_restart_keeps_the_cooldown(
    tmp_path: Path, metrics: tuple[BatchingTriton, MetricsServer], fake_slack: FakeSlack
) -> None:
    """dry_run off runs the step; a restarted daemon on the same file is held by the cooldown."""
    _, server = metrics
    s = settings(tmp_path, server, slack=slack_of(fake_slack), dry_run=False)
    app, runner = daemon(s)
    async with running(app):
        await wait_for(lambda: any(d.status == "ran" for d in decisions(runner)))
    assert [(d.action, d.status, d.dry_run) for d in AuditTrail(s).rows()] == [
        ("slack.post", "ran", False)
    ]
    [root] = fake_slack.roots_in("tritonguard-alerts")
    assert "batching_delay on search/ranker on ranker-0" in root.text
    assert "ranker waits in the batcher" in str(root.blocks)
    # The incident's chart, uploaded into its thread (docs/slack.md#the-chart).
    [chart] = [m for m in fake_slack.thread_of(root) if m.files]
    assert str((chart.files or [{}])[0]["name"]).endswith("-opened.png")

    again, runner2 = daemon(s)
    async with running(again):
        await wait_for(lambda: any(d.status == "skipped" for d in decisions(runner2)))
    rows = AuditTrail(s).rows()
    assert [(d.status, d.guard) for d in rows] == [("ran", ""), ("skipped", "cooldown")]
    assert rows[0].incident_id != rows[1].incident_id  # a new incident after the restart
    assert len(fake_slack.roots_in("tritonguard-alerts")) == 1
    assert fake_slack.thread_of(root) == [chart], "nothing new after the restart"


async def test_two_replicas_elect_one_leader_and_post_once(
    tmp_path: Path,
    metrics: tuple[BatchingTriton, MetricsServer],
    fake_slack: FakeSlack,
    fake_kube: FakeKube,
) -> None:
    """Two daemons on the same Triton: the lease holder posts, the other audits why it did not.

    Both diagnose; /readyz and tritonguard_leader say who leads; the leader releases the lease
    when it stops, so the other replica does not wait out a whole lease to take over.
    """
    _, server = metrics
    fake_kube.add_namespace("tritonguard")
    # The scraped Triton's pod, which the incident's Event is about.
    fake_kube.add_namespace("search")
    fake_kube.add_pod("search", "ranker-0")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig())

    def replica(name: str) -> Settings:
        return settings(
            tmp_path / name,
            server,
            slack=slack_of(fake_slack),
            dry_run=False,
            kube=KubeSettings(kubeconfig=kubeconfig, leader_election=True, identity=name),
        )

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    app_a, runner_a = daemon(replica("a"))
    app_b, runner_b = daemon(replica("b"))
    async with running(app_a) as base_a:
        await wait_for(lambda: runner_a.elector is not None and runner_a.elector.is_leader())
        async with running(app_b) as base_b, aiohttp.ClientSession() as http:
            await wait_for(lambda: any(d.status == "ran" for d in decisions(runner_a)))
            await wait_for(lambda: any(d.guard == "leader" for d in decisions(runner_b)))
            async with http.get(f"{base_b}/readyz") as resp:
                ready_b = await resp.json()
            async with http.get(f"{base_a}/metrics") as resp:
                metrics_a = await resp.text()
            async with http.get(f"{base_b}/metrics") as resp:
                metrics_b = await resp.text()
        lease = fake_kube.get_object("Lease", "tritonguard", "tritonguard-leader")
    released = fake_kube.get_object("Lease", "tritonguard", "tritonguard-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"
    assert released is not None and not released["spec"].get("holderIdentity")
    assert ready_b["leadership"]["holder"] == "a"
    assert ready_b["leadership"]["leader"] is False
    assert "tritonguard_leader 1.0" in metrics_a
    assert "tritonguard_leader 0.0" in metrics_b
    assert len(fake_slack.roots_in("tritonguard-alerts")) == 1
    skipped = [d for d in AuditTrail(replica("b")).rows() if d.guard == "leader"]
    assert skipped and "replica a holds the leader lease" in skipped[0].reason
    # The daemon writes Kubernetes Events of its incidents, the leader alone (kube_events.py).
    opened = [
        e for e in fake_kube.list_objects("Event", "search") if e.get("reason") == "IncidentOpened"
    ]
    assert [e["reportingInstance"] for e in opened] == ["a"]


def test_leader_election_without_the_kubernetes_api_is_a_settings_error() -> None:
    """kube.leader_election alone cannot elect anyone: the settings name what to add."""
    with pytest.raises(ValueError, match=r"kube\.in_cluster: true or kube\.kubeconfig"):
        KubeSettings(leader_election=True)


class AuditTrail:
    """Read the audit file of a stopped daemon."""

    def __init__(self, s: Settings) -> None:
        self.path = s.audit_db_path

    def rows(self) -> list[ActionRecord]:
        """Return every decision."""
        store = AuditStore(self.path)
        try:
            return store.decisions()
        finally:
            store.close()


VERIFY_SLOWLY = """
name: post-then-verify
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: slack.post
    params: {channel: "#tritonguard-alerts"}
verify:
  wait: 2s
  checks: [{feature: queue_share, below: 0.5}]
"""


async def test_sigterm_waits_for_in_flight_actions_and_evaluation_goes_on(
    tmp_path: Path, metrics: tuple[BatchingTriton, MetricsServer], fake_slack: FakeSlack
) -> None:
    """A verify wait runs beside evaluation; a stop during it lets it finish within the grace.

    The model turns healthy during the wait, so the verify (reading the engine's live
    features) passes: the daemon kept scraping and evaluating while the playbook waited.
    """
    model, server = metrics
    s = settings(tmp_path, server, slack=slack_of(fake_slack), dry_run=False)
    (s.playbook_dirs[0] / "notify.yaml").write_text(VERIFY_SLOWLY)
    app, runner = daemon(s)
    async with running(app):
        await wait_for(lambda: any(d.status == "ran" for d in decisions(runner)))
        evaluations = app.engine.evaluations
        model.healthy = True
        await asyncio.sleep(0.8)
        assert len(runner.stage.in_flight()) == 1
        assert app.engine.evaluations > evaluations  # the wait does not hold evaluation up
        stop_at = time.monotonic()
        app.request_stop("SIGTERM")
    stopped_after = time.monotonic() - stop_at
    rows = AuditTrail(s).rows()
    assert [(d.action, d.status) for d in rows] == [("slack.post", "ran"), ("verify", "ran")]
    assert rows[1].detail["values"]["queue_share"] < 0.5
    assert 0.5 < stopped_after < s.shutdown_grace_s


async def test_shutdown_grace_cancels_actions_that_take_too_long(
    tmp_path: Path, metrics: tuple[BatchingTriton, MetricsServer], fake_slack: FakeSlack
) -> None:
    """An action still waiting when the grace period ends is cancelled; the daemon exits.

    The audit trail says so, and the verification stays pending for the next start.
    """
    _, server = metrics
    s = settings(tmp_path, server, slack=slack_of(fake_slack), dry_run=False, shutdown_grace_s=0.5)
    (s.playbook_dirs[0] / "notify.yaml").write_text(VERIFY_SLOWLY.replace("wait: 2s", "wait: 60s"))
    app, runner = daemon(s)
    async with running(app):
        await wait_for(lambda: any(d.status == "ran" for d in decisions(runner)))
        assert len(runner.stage.in_flight()) == 1
        stop_at = time.monotonic()
        app.request_stop("SIGTERM")
    assert time.monotonic() - stop_at < 5.0
    rows = AuditTrail(s).rows()
    assert [(d.action, d.status) for d in rows] == [("slack.post", "ran"), ("verify", "cancelled")]
    store = AuditStore(s.audit_db_path)
    try:
        assert [v.playbook for v in store.pending_verifications()] == ["post-then-verify"]
    finally:
        store.close()


def test_shipped_playbooks_are_the_default(tmp_path: Path) -> None:
    """Without playbook_dirs the daemon loads the shipped playbooks; traces go next to the DB."""
    s = Settings(audit_db_path=tmp_path / "db" / "audit.sqlite3")
    assert playbook_dirs(s) == [SHIPPED_PLAYBOOKS]
    service = build_service(s, Engine())
    try:
        names = {b.name for b in service.stage.playbooks}
        assert "batching-delay-lower-queue-delay" in names
        assert service.stage.settings.dry_run is True
        assert flight_recorder_dir(s.audit_db_path) == tmp_path / "db" / "audit-incidents"
    finally:
        service.store.close()


def test_bad_playbook_stops_start_up_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tritonguard run` with a broken playbook exits 2 with file:line:col on one line."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "bad.yaml").write_text(NOTIFY.replace("slack.post", "slack.pots"))
    config = tmp_path / "config.yaml"
    config.write_text(
        f"playbook_dirs: [{books}]\naudit_db_path: {tmp_path / 'a.sqlite3'}\nlisten: 127.0.0.1:0\n"
    )
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"tritonguard: {books / 'bad.yaml'}:6:13: unknown action 'slack.pots'")


def test_triton_clients_are_found_by_namespace_and_pod_as_scraped() -> None:
    """Subjects map to targets by (namespace, pod), by instance when a target has no pod."""
    s = Settings(
        targets=[
            TargetSettings(
                name="a",
                metrics_url="http://127.0.0.1:8002/metrics",
                triton_url="http://127.0.0.1:8000",
                namespace="prod",
                pod="triton-a",
            ),
            TargetSettings(
                name="b",
                metrics_url="http://127.0.0.1:9002/metrics",
                triton_url="http://127.0.0.1:9000",
            ),
            TargetSettings(name="c", metrics_url="http://127.0.0.1:7002/metrics", namespace="x"),
        ]
    )
    tritons = TritonDirectory.from_settings(s)
    a = tritons.for_subject(Subject("prod", "m", "triton-a"))
    b = tritons.for_subject(Subject("", "m", "127.0.0.1:9002"))
    assert isinstance(a, TritonClient) and a.base_url == "http://127.0.0.1:8000"
    assert isinstance(b, TritonClient) and b.base_url == "http://127.0.0.1:9000"
    assert tritons.for_subject(Subject("prod", "m", "")) is a  # model-wide: the only one there
    assert tritons.for_subject(Subject("prod", "m", "triton-z")) is None
    assert tritons.for_subject(Subject("x", "m", "127.0.0.1:7002")) is None  # no triton_url


WAIT_THEN_CHECK = """
name: wait-then-check
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 1h}
steps:
  - action: verify
    params: {wait: 5s, checks: [{feature: queue_share, below: 0.5}]}
"""


async def test_a_resolution_waits_for_the_playbook_acting_on_its_subject() -> None:
    """Transitions on one subject run in order; the caller never waits for a playbook."""
    release = asyncio.Event()

    async def held_sleep(seconds: float) -> None:
        await release.wait()

    books = load_playbooks_text(WAIT_THEN_CHECK, "t.yaml", catalog())
    opened = incident_event("opened")
    still_open = [opened]
    on = stage(
        books,
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=ExecutorEnv(features=StaticFeatures(0.1), sleep=held_sleep),
        open_incidents=lambda: still_open,
    )
    started = time.monotonic()
    on.step([opened], time.time())
    still_open.clear()
    on.step([incident_event("resolved")], time.time())
    assert time.monotonic() - started < 0.5
    await asyncio.sleep(0.1)
    assert len(on.in_flight()) == 2
    row = on.store.incident(opened.incident_id)
    assert row is not None and row["resolved_at"] is None
    still_open.append(opened)
    on.step([], time.time())  # the subject is busy: no second check is started
    assert len(on.in_flight()) == 2
    release.set()
    await asyncio.wait_for(on.settle(), 2.0)
    assert [d.status for d in on.store.decisions()] == ["ran"]
    row = on.store.incident(opened.incident_id)
    assert row is not None and row["resolved_at"] is not None


def incident_event(kind: EventKind) -> IncidentEvent:
    """Return a batching_delay transition on one subject."""
    now = time.time()
    return IncidentEvent(
        event=kind,
        incident_id="inc-1",
        cause="batching_delay",
        subject=Subject("prod", "ranker", "triton-a"),
        at=now,
        confidence=0.9,
        summary="queue wait dominates",
        evidence={},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=now,
    )
