"""A real Alertmanager with the shipped receiver config posting to the daemon's webhook."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from tests.fixtures_alertmanager import (  # noqa: F401 - alertmanager_starter: the fixture
    StartAlertmanager,
    alertmanager_starter,
    prometheus_alert,
    webhook_config,
)
from tests.webhook_harness import (
    TOKEN,
    armed,
    daemon,
    metric,
    running,
    settings,
    wait_until,
)

pytestmark = pytest.mark.live

WEBHOOK_SENT = 'alertmanager_notifications_total{integration="webhook"}'
WEBHOOK_FAILED = 'alertmanager_notifications_failed_total{integration="webhook"}'


async def _daemon_metric(base: str, series: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as resp:
        return metric(await resp.text(), series)


async def test_alertmanager_with_the_token_arms_the_playbook_and_disarms_it_on_resolve(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """An alert posted to Alertmanager arrives authenticated and arms the playbook of its name.

    Its resolution, which Alertmanager sends too, disarms the playbook again.
    """
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    credentials = tmp_path / "alertmanager-token"
    credentials.write_text(TOKEN)
    app, service = daemon(settings(tmp_path, token_file=secret))
    async with running(app) as base:
        am = await asyncio.to_thread(alertmanager, webhook_config(base, credentials))
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: service.alerts.count == 1, timeout_s=30)
        firing = await armed(service)
        received = await _daemon_metric(
            base, 'tritonguard_alertmanager_alerts_total{status="firing"}'
        )
        refused = await _daemon_metric(
            base,
            'tritonguard_api_unauthorized_total{endpoint="/api/alertmanager",reason="missing"}',
        )
        sent, failed = am.metric(WEBHOOK_SENT), am.metric(WEBHOOK_FAILED)

        await asyncio.to_thread(am.post_alerts, [prometheus_alert(resolved=True)])
        await wait_until(lambda: service.alerts.count == 0, timeout_s=30)
        after_resolve = await armed(service)

    assert [(r.playbook, r.status) for r in firing] == [("reload-on-slo-burn", "planned")]
    assert received >= 1 and refused == 0
    assert sent >= 1 and failed == 0
    assert after_resolve == []


async def test_alertmanager_with_a_wrong_token_is_refused_and_arms_nothing(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """Alertmanager sending another token gets 401, and nothing is armed.

    Alertmanager counts a failed notification and the daemon counts the refusal.
    """
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    credentials = tmp_path / "alertmanager-token"
    credentials.write_text("an-old-token-from-before-rotation")
    app, service = daemon(settings(tmp_path, token_file=secret))
    wrong = 'tritonguard_api_unauthorized_total{endpoint="/api/alertmanager",reason="wrong_token"}'
    async with running(app) as base:
        am = await asyncio.to_thread(alertmanager, webhook_config(base, credentials))
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: am.metric(WEBHOOK_SENT) >= 1, timeout_s=30)
        # The attempt is counted before it is made; give its answer time to land.
        await wait_until(lambda: am.metric(WEBHOOK_FAILED) >= 1, timeout_s=30)
        decided = await armed(service)
        refused = await _daemon_metric(base, wrong)
    assert decided == []
    assert refused >= 1
    assert "unexpected status code 401" in am.log_tail(200)
