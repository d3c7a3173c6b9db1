"""The Slack outbox on /metrics: messages waiting, the oldest one's age, messages given up.

The threads are built from settings as the daemon builds them (slack_sdk's Web API client
to the fake Slack, the outbox in the audit file), and /metrics is the daemon's HTTP server
rendering SelfMetrics' registry.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.integration.test_slack_approvals import Clock
from tritonguard.core.action_records import ActionRecord
from tritonguard.runtime.http_server import HttpServer
from tritonguard.runtime.self_metrics import SelfMetrics
from tritonguard.runtime.slack_threads import build_threads
from tritonguard.settings import Settings, SlackSettings


async def scrape(server: HttpServer) -> dict[str, float]:
    """Return the outbox's samples on /metrics by name."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{server.port}/metrics") as resp,
    ):
        text = await resp.text()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("tritonguard_slack_outbox")
    }


async def test_an_outage_shows_as_a_backlog_then_as_messages_given_up(
    tmp_path: Path, fake_slack: FakeSlack
) -> None:
    """While Slack is down the incident's messages wait and age; past the limit they are given up.

    Before anything is queued the series are there at 0, so a rule reads them from the start.
    """
    clock = Clock()
    s = Settings(
        audit_db_path=tmp_path / "audit.sqlite3",
        slack=SlackSettings(
            token=fake_slack.token,
            channel="#tritonguard-alerts",
            base_url=fake_slack.base_url,
            outbox={"retry_initial_s": 1, "retry_max_s": 1, "give_up_after_s": 600},
        ),
    )
    threads = build_threads(s, clock=clock)
    metrics = SelfMetrics(CollectorRegistry())
    metrics.watch_slack_outbox(threads.worker.stats)
    server = HttpServer(
        host="127.0.0.1",
        port=0,
        registry=metrics.registry,
        readiness=lambda: (True, {}),
        incidents=list,
    )
    await server.start()
    try:
        assert await scrape(server) == {
            "tritonguard_slack_outbox_pending": 0.0,
            "tritonguard_slack_outbox_oldest_pending_age_seconds": 0.0,
            "tritonguard_slack_outbox_given_up_total": 0.0,
        }
        fake_slack.set_down(True)
        event = playbook_harness.incident("cpu_bottleneck", at=clock.now)
        threads.observe_events([event])
        post = ActionRecord(
            at=clock.now,
            incident_id=event.incident_id,
            event="opened",
            playbook="notify",
            subject=event.subject.key(),
            action="slack.post",
            params={},
            dry_run=False,
            status="ran",
        )
        threads.observe_records([post])
        await threads.worker.deliver_due()
        clock.now += 300
        seen = await scrape(server)
        assert seen["tritonguard_slack_outbox_pending"] >= 1
        assert seen["tritonguard_slack_outbox_oldest_pending_age_seconds"] == 300.0
        assert seen["tritonguard_slack_outbox_given_up_total"] == 0.0

        clock.now += 300
        await threads.worker.deliver_due()
        seen = await scrape(server)
        assert seen["tritonguard_slack_outbox_pending"] == 0.0
        assert seen["tritonguard_slack_outbox_given_up_total"] >= 1
        assert fake_slack.roots_in("#tritonguard-alerts") == []
    finally:
        await server.stop()
        await threads.close()
