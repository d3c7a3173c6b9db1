"""A real Alertmanager with the shipped receiver config posting to the daemon's webhook."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.fixtures_alertmanager import AlertmanagerProcess, start_alertmanager
from tests.webhook_harness import (
    ALERT,
    TOKEN,
    armed,
    daemon,
    metric,
    running,
    settings,
    wait_until,
)

pytestmark = pytest.mark.live

EXAMPLE = Path(__file__).parents[2] / "deploy" / "examples" / "alertmanager.yaml"
WEBHOOK_SENT = 'alertmanager_notifications_total{integration="webhook"}'
WEBHOOK_FAILED = 'alertmanager_notifications_failed_total{integration="webhook"}'

StartAlertmanager = Callable[[Mapping[str, Any]], AlertmanagerProcess]


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[StartAlertmanager]:
    """Yield a function starting Alertmanager on a config; each one started is stopped after."""
    started: list[AlertmanagerProcess] = []

    def start(config: Mapping[str, Any]) -> AlertmanagerProcess:
        am = start_alertmanager(tmp_path / f"alertmanager{len(started)}", config)
        started.append(am)
        return am

    yield start
    for am in started:
        am.stop()


def _config(daemon_base: str, credentials: Path) -> dict[str, Any]:
    """Return the shipped example, pointed at this daemon and token file, notifying at once."""
    config: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    (route,) = config["route"]["routes"]
    route.update(group_wait="0s", group_interval="1s")
    (receiver,) = [r for r in config["receivers"] if r["name"] == "tritonguard"]
    (hook,) = receiver["webhook_configs"]
    hook["url"] = f"{daemon_base}/api/alertmanager"
    authorization = hook["http_config"]["authorization"]
    assert authorization["type"] == "Bearer" and "credentials_file" in authorization
    authorization["credentials_file"] = str(credentials)
    return config


def _alert(*, resolved: bool = False) -> dict[str, Any]:
    """Return an alert as Prometheus posts it to Alertmanager's API."""
    now = dt.datetime.now(dt.UTC)
    ends = now - dt.timedelta(seconds=1) if resolved else now + dt.timedelta(hours=1)
    return {
        "labels": {"alertname": ALERT, "namespace": "prod", "model": "resnet", "severity": "page"},
        "annotations": {"summary": "resnet p99 over its SLO for 5m"},
        "startsAt": (now - dt.timedelta(minutes=5)).isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": "http://prometheus:9090/graph",
    }


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
        am = await asyncio.to_thread(alertmanager, _config(base, credentials))
        await asyncio.to_thread(am.post_alerts, [_alert()])
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

        await asyncio.to_thread(am.post_alerts, [_alert(resolved=True)])
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
        am = await asyncio.to_thread(alertmanager, _config(base, credentials))
        await asyncio.to_thread(am.post_alerts, [_alert()])
        await wait_until(lambda: am.metric(WEBHOOK_SENT) >= 1, timeout_s=30)
        # The attempt is counted before it is made; give its answer time to land.
        await wait_until(lambda: am.metric(WEBHOOK_FAILED) >= 1, timeout_s=30)
        decided = await armed(service)
        refused = await _daemon_metric(base, wrong)
    assert decided == []
    assert refused >= 1
    assert "unexpected status code 401" in am.log_tail(200)
