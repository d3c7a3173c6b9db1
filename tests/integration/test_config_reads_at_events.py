"""An incident's events and its playbook's actions re-read its model's config, not the fleet's.

The daemon reads every model's config every ``model_config_refresh_s``. On a fleet of a
thousand pods with twenty models each that refresh is twenty thousand requests to the
repository APIs; it used to start again on every incident event of any subject and after any
action that ran. Here one synthetic Triton waits 90 ms in its batcher (an incident opens, then
resolves when it turns healthy) beside forty idle ones serving ten models each.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests import waiting
from tests.fakes.fake_slack import FakeSlack
from tests.fixtures_prometheus import MetricsServer
from tests.integration.test_daemon_playbooks import FAST, NOTIFY, slack_of
from tests.synthetic_triton import BatchingTriton
from tritonguard.core.action_records import ActionRecord, Status
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import build_service
from tritonguard.settings import Settings, TargetSettings

IDLE_TARGETS = 40
IDLE_MODELS = 10


def _idle_exposition() -> str:
    """Ten models of an idle Triton: each is a config to read at every refresh."""
    lines = ["# TYPE nv_inference_request_success counter"]
    lines += [
        f'nv_inference_request_success{{model="embedder-{i}",version="1"}} 0'
        for i in range(IDLE_MODELS)
    ]
    return "\n".join(lines) + "\n"


class Reads:
    """A repository API's config reads, counted by target and model."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    async def fetch(self, target: TargetSettings, model: str) -> Mapping[str, Any] | None:
        """Answer as a Triton whose batcher may wait 100 ms would (so its 90 ms is no veto)."""
        self.counts[(target.name, model)] += 1
        return {"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100_000}}

    def since(self, before: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
        """Return the reads made after ``before`` was taken."""
        return self.counts - before


@asynccontextmanager
async def fleet() -> AsyncIterator[tuple[BatchingTriton, list[str]]]:
    """Serve the faulty Triton and the idle fleet's exposition; yield the model and both URLs."""
    model = BatchingTriton()
    faulty = await MetricsServer(render=model.render).start()
    idle = await MetricsServer(render=_idle_exposition).start()
    try:
        yield model, [faulty.url, idle.url]
    finally:
        await faulty.stop()
        await idle.stop()


def _settings(tmp_path: Path, urls: list[str], **extra: Any) -> Settings:
    faulty, idle = urls
    targets = [
        TargetSettings(
            name="t0",
            metrics_url=faulty,
            triton_url="http://127.0.0.1:9",
            namespace="search",
            pod="ranker-0",
        )
    ]
    targets += [
        TargetSettings(
            name=f"idle-{i}",
            metrics_url=idle,
            triton_url="http://127.0.0.1:9",
            namespace="search",
            pod=f"embedder-{i}",
        )
        for i in range(IDLE_TARGETS)
    ]
    return Settings(
        targets=targets,
        scrape_interval_s=0.25,
        scrape_timeout_s=0.25,
        scrape_jitter_s=0.0,
        evaluation_interval_s=0.25,
        listen="127.0.0.1:0",
        shutdown_grace_s=5.0,
        thresholds=FAST,
        model_config_refresh_s=300.0,
        audit_db_path=tmp_path / "audit.sqlite3",
        **extra,
    )


async def _first_refresh(reads: Reads) -> Counter[tuple[str, str]]:
    """Wait for the start's read of every model; return the counts then."""
    every = 1 + IDLE_TARGETS * IDLE_MODELS
    await waiting.wait_for(lambda: len(reads.counts) == every, 15, what="the first refresh")
    return reads.counts.copy()


async def test_incident_events_read_only_their_subjects_config(tmp_path: Path) -> None:
    """Opening reads the subject's config; resolving reads it again; no idle model is re-read.

    Before, each event (the opening, the resolution) started a refresh of all 401 models.
    """
    reads = Reads()
    async with fleet() as (model, urls):
        engine = Engine(EngineConfig(thresholds=FAST))
        app = DaemonApp(_settings(tmp_path, urls), engine=engine, config_fetcher=reads.fetch)
        task = asyncio.create_task(app.run(install_signals=False))
        try:
            before = await _first_refresh(reads)
            await waiting.wait_for(engine.open_incidents, 15, what="the incident")
            model.healthy = True
            await waiting.wait_for(lambda: not engine.open_incidents(), 15, what="recovery")
            # The resolution's read is queued, not awaited: give its loop a moment.
            await waiting.wait_for(
                lambda: reads.since(before)[("t0", "ranker")] >= 2, 5, what="the reads"
            )
            await asyncio.sleep(1.0)
        finally:
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=15)
    after = reads.since(before)
    assert set(after) == {("t0", "ranker")}, sorted(after)[:5]


async def test_a_post_that_ran_reads_no_config(tmp_path: Path, fake_slack: FakeSlack) -> None:
    """A playbook's Slack post changes no model config: no model is read again for it.

    Before, any action that ran (a post, a scale) started a refresh of every model; only
    Triton's actions change one.
    """
    reads = Reads()
    books = tmp_path / "books"
    books.mkdir()
    (books / "notify.yaml").write_text(NOTIFY)
    slack = slack_of(fake_slack)
    async with fleet() as (_, urls):
        s = _settings(tmp_path, urls, playbook_dirs=[books], slack=slack, dry_run=False)
        engine = Engine(EngineConfig(thresholds=FAST))
        service = build_service(s, engine)
        app = DaemonApp(s, engine=engine, playbooks=service, config_fetcher=reads.fetch)
        service.on_change = app.refresh_model_configs
        task = asyncio.create_task(app.run(install_signals=False))
        try:
            before = await _first_refresh(reads)
            await waiting.wait_for(
                lambda: any(
                    r.action == "slack.post" and r.status == "ran"
                    for r in service.store.decisions()
                ),
                15,
                what="the post",
            )
            await asyncio.sleep(1.0)
        finally:
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=15)
    assert fake_slack.roots_in("tritonguard-alerts")
    after = reads.since(before)
    assert set(after) == {("t0", "ranker")}, sorted(after)[:5]


def _record(action: str, status: Status = "ran", *, dry_run: bool = False) -> ActionRecord:
    return ActionRecord(
        at=0.0,
        incident_id="inc-1",
        event="opened",
        playbook="p",
        subject="search/embedder-3/embedder-3",
        action=action,
        params={},
        dry_run=dry_run,
        status=status,
    )


def test_only_a_triton_action_that_changed_a_server_reports_its_subject(tmp_path: Path) -> None:
    """A real Triton change hands its subject's key on; a post, a plan or a failure, nothing."""
    s = Settings(audit_db_path=tmp_path / "audit.sqlite3", listen="127.0.0.1:0")
    service = build_service(s, Engine(EngineConfig()))
    told: list[str] = []
    service.on_change = told.append
    try:
        key = "search/embedder-3/embedder-3"
        service.stage.report(key, [_record("slack.post"), _record("kubernetes.scale")])
        service.stage.report(key, [_record("triton.update_config", dry_run=True)])
        service.stage.report(key, [_record("triton.update_config", "failed")])
        assert told == []
        service.stage.report(key, [_record("triton.revert_config", "rolled_back")])
        service.stage.report(key, [_record("triton.update_config")])
        assert told == [key, key]
    finally:
        service.stage.store.close()


async def test_a_changed_subject_re_reads_its_own_model_and_a_group_its_pods(
    tmp_path: Path,
) -> None:
    """After a Triton action the subject's config is read, not every model of every pod.

    A fleet group's subject (pod ``*``) reads the model on every pod of its namespace that
    serves it. Before, any action that ran started a refresh of all 401 configs.
    """
    reads = Reads()
    async with fleet() as (_, urls):
        settings = _settings(tmp_path, urls)
        app = DaemonApp(settings, config_fetcher=reads.fetch)
        task = asyncio.create_task(app.run(install_signals=False))
        try:
            before = await _first_refresh(reads)
            app.refresh_model_configs("search/embedder-3/embedder-3")
            await waiting.wait_for(lambda: reads.since(before), 5, what="the subject's read")
            await asyncio.sleep(0.5)
            assert set(reads.since(before)) == {("idle-3", "embedder-3")}
            before = reads.counts.copy()
            app.refresh_model_configs("search/*/embedder-7")
            every = {(f"idle-{i}", "embedder-7") for i in range(IDLE_TARGETS)}
            await waiting.wait_for(
                lambda: set(reads.since(before)) == every, 5, what="the group's reads"
            )
            await asyncio.sleep(0.5)
            assert set(reads.since(before)) == every
        finally:
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=15)
