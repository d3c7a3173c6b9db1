"""The features mode says so when its reads cannot see the rule alerts the webhook reports.

A real Prometheus evaluates the exported rules and notifies a real Alertmanager, which posts
to the daemon's webhook. The daemon reads Prometheus through a query proxy that answers the
``ALERTS`` query with nothing (as a label-enforcing proxy or a tenant that does not serve
the series would) and passes every feature query through: the webhook's alert is then never
listed by a read. The same fleet read straight through, ALERTS and all, warns of nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog

from tests.fault_harness import metrics, running, sample_value, until
from tests.fault_servers import Answer, FaultProxy, Rule
from tests.fixtures_alertmanager import (  # noqa: F401 - alertmanager_starter: the fixture
    StartAlertmanager,
    alertmanager_starter,
    webhook_config,
)
from tests.fixtures_prometheus import PrometheusProcess
from tests.integration.test_recorded_features import (
    LATER,
    SICK,
    Watch,
    features_daemon,
    features_watch,
    firing,
    fleet,
)
from tests.webhook_harness import TOKEN
from tritonguard.core.feature_rows import alerts_query

pytestmark = pytest.mark.live

HIDDEN = "rule alerts hidden"
GAUGE = 'tritonguard_rule_alerts_hidden{alertname="TritonguardBatchingDelay"}'
EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


# The proxy answers every ALERTS query of a test empty, as a proxy or tenant that filters the
# series does, and forwards the rest.
HIDE_TIMES = 10**6


def hidden_reads(hide: Rule) -> int:
    """Return how many ALERTS queries the proxy answered empty."""
    return HIDE_TIMES - hide.times


@asynccontextmanager
async def hiding_daemon(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> AsyncIterator[tuple[Watch, str, PrometheusProcess, FaultProxy, Rule]]:
    """Run the fleet, Alertmanager posting to the daemon, the daemon reading through the proxy."""
    # Prometheus is not up yet: its address is fixed first, so the daemon can be built.
    proxy = await FaultProxy("http://127.0.0.1:1").start()
    waiting = proxy.add("*", r".*", Answer(503, "Prometheus not started yet"), times=10**6)
    hide = proxy.add(
        "GET", r"/api/v1/query", Answer(200, EMPTY), HIDE_TIMES, values=(("query", r"ALERTS.*"),)
    )
    watch = features_watch(tmp_path, proxy.url, LATER)
    credentials = tmp_path / "alertmanager-token"
    credentials.write_text(TOKEN)
    try:
        async with running(watch.app) as base:
            config = webhook_config(base, credentials)
            # As Alertmanager's own default (30 s) does, the first notification waits past
            # a read after the alert's start: the webhook's news is then older than a read.
            (route,) = config["route"]["routes"]
            route["group_wait"] = "3s"
            am = await asyncio.to_thread(alertmanager, config)
            watch.alertmanager = am
            async with fleet(tmp_path, am.url.removeprefix("http://")) as (prom, _):
                proxy.upstream, waiting.times = prom.url, 0
                yield watch, base, prom, proxy, hide
    finally:
        await proxy.stop()


async def test_a_webhook_alert_the_reads_never_list_is_warned_of_and_counted(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """The rule fires and the webhook says so, but no read lists it: one warning, a count of 1.

    The daemon reads every feature (the sick pod's are fresh) and gets an empty ALERTS;
    Alertmanager's first notification comes a few seconds after the alert's start, so the
    read wins and no incident opens, as before. What is new: once the alert has been
    absent past two rule evaluations and a read, the daemon logs one warning naming the
    alert, its subject, the query it ran, the URL it read and what to do, and
    ``tritonguard_rule_alerts_hidden`` counts it; more reads of the same hidden alert do not
    repeat the line.
    """
    with structlog.testing.capture_logs() as logs:
        async with hiding_daemon(tmp_path, alertmanager) as (watch, base, prom, proxy, hide):
            app = watch.app
            book = app.cause_alerts
            assert book is not None
            await until(lambda: firing(prom), 60.0, prom.log_tail)
            await until(
                lambda: any(e["event"].startswith(HIDDEN) for e in logs), 60.0, prom.log_tail
            )
            # Some reads more: the same hidden alert is no news.
            reads = hidden_reads(hide)
            await until(lambda: hidden_reads(hide) >= reads + 4, 10.0, lambda: hidden_reads(hide))
            text = await metrics(base)
            heard = book.firing(app.clock())
            snapshot = app.features_source.latest if app.features_source is not None else None
            fresh = snapshot is not None and snapshot.fresh(("search", SICK.pod, SICK.model))
    lines = [e for e in logs if e["event"].startswith(HIDDEN)]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line["log_level"] == "warning"
    assert line["alertname"] == "TritonguardBatchingDelay"
    assert line["subjects"] == [f"search/{SICK.pod}/{SICK.model}"] and line["hidden"] == 1
    assert line["query"] == alerts_query()
    assert line["prometheus_url"] == proxy.url
    assert "make ALERTS queryable through prometheus_url" in line["hint"]
    assert "point prometheus_url at the Prometheus or ruler whose rules fire" in line["hint"]
    assert sample_value(text, GAUGE) == 1.0
    assert "batching_delay" in heard.get(("search", SICK.pod, SICK.model), {})
    assert fresh
    assert watch.opened() is None, watch.events


async def test_alerts_the_reads_list_are_not_warned_of(
    tmp_path: Path, alertmanager: StartAlertmanager
) -> None:
    """ALERTS readable: the incident opens on the read and nothing is warned of as hidden.

    The webhook told of the alert too, and the daemon goes on reading it for longer than
    the bound; the gauge is exported at 0.
    """
    with structlog.testing.capture_logs() as logs:
        async with features_daemon(tmp_path, alertmanager, LATER) as (watch, base, prom, _):
            app = watch.app
            book = app.cause_alerts
            assert book is not None
            await until(lambda: watch.opened() is not None and len(book) > 0, 90.0, prom.log_tail)
            # Past two evaluations and a read (1.5 s here) after the webhook heard it.
            await asyncio.sleep(3.0)
            text = await metrics(base)
    assert [e for e in logs if e["event"].startswith(HIDDEN)] == []
    assert f"{GAUGE} 0.0" in text.splitlines()
    opened = watch.opened()
    assert opened is not None and opened.cause == "batching_delay"
