"""`tritonguard run` as a process: its webhook start-up line, and its memory under an alert flood."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.webhook_harness import (
    TOKEN,
    DaemonProcess,
    alert,
    metric,
    notification,
    start_daemon,
)
from tritonguard.settings import ApiSettings

MiB = 1024 * 1024
FINGERPRINTS = 180_000
BATCH = 1_000


@pytest.fixture
def started() -> Iterator[list[DaemonProcess]]:
    """Collect the daemons a test starts; stop every one of them afterwards."""
    daemons: list[DaemonProcess] = []
    yield daemons
    for daemon in daemons:
        daemon.stop()


async def _post_batches(base: str, prefix: str, total: int) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for start in range(0, total, BATCH):
            alerts = [
                alert(f"{prefix}{n:012x}", pod=f"triton-{n}") for n in range(start, start + BATCH)
            ]
            body = json.dumps(notification(alerts))
            async with http.post(f"{base}/api/alertmanager", data=body) as resp:
                assert resp.status == 200, await resp.text()


def _metrics(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
        text: str = resp.read().decode()
    return text


def test_the_daemon_says_in_one_line_that_the_webhook_is_off_without_a_token(
    tmp_path: Path, started: list[DaemonProcess]
) -> None:
    """No token: one start-up log line naming the webhook and api.token_file; POST gets 404."""
    daemon = start_daemon(tmp_path)
    started.append(daemon)
    request = urllib.request.Request(
        f"{daemon.base}/api/alertmanager",
        data=json.dumps(notification([alert("a1")])).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    refused.value.close()  # the error is the response: its socket stays open until closed
    assert refused.value.code == 404
    raw = [line for line in daemon.log_path.read_text().splitlines() if "webhook" in line.lower()]
    assert len(raw) == 1
    (line,) = [json.loads(r) for r in raw]
    assert line["level"] == "warning"
    assert "webhook off" in line["event"] and "api.token_file" in line["event"]


def test_180k_unique_fingerprints_leave_the_alert_book_and_the_daemon_within_their_caps(
    tmp_path: Path, started: list[DaemonProcess]
) -> None:
    """180 000 unique firing alerts in batches of 1000: the book keeps its entry and byte caps.

    Before the caps the same flood grew the daemon by 225 MiB (every fingerprint kept).
    Now the growth is bounded by what the caps let the book hold: its byte accounting (which
    counts every string's full size, so errs high) is at most ``alert_book_max_bytes``
    (16 MiB), plus 8 MiB for one notification in flight (a 1 MiB body, its text and parsed
    objects) and the allocator's slack: 24 MiB. Drops are counted exactly and logged once.
    """
    caps = ApiSettings()
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    daemon = start_daemon(tmp_path, token_file=secret)
    started.append(daemon)
    # Warm-up: one notification's worth of transient memory is in the baseline.
    asyncio.run(_post_batches(daemon.base, "warm-", 2 * BATCH))
    before_kib = daemon.rss_kib()
    started_at = time.monotonic()
    asyncio.run(_post_batches(daemon.base, "flood-", FINGERPRINTS))
    took_s = time.monotonic() - started_at
    after_kib = daemon.rss_kib()
    growth = (after_kib - before_kib) * 1024
    bound = caps.alert_book_max_bytes + 8 * MiB
    assert growth < bound, f"RSS grew {growth / MiB:.1f} MiB (bound {bound / MiB:.0f} MiB)"

    metrics = _metrics(daemon.base)
    held = metric(metrics, "tritonguard_alert_book_alerts")
    held_bytes = metric(metrics, "tritonguard_alert_book_bytes")
    evicted = sum(
        metric(metrics, f'tritonguard_alert_book_evicted_total{{cap="{cap}"}}')
        for cap in ("max_alerts", "max_bytes")
    )
    assert 0 < held <= caps.alert_book_max_alerts
    assert 0 < held_bytes <= caps.alert_book_max_bytes
    assert evicted == FINGERPRINTS + 2 * BATCH - held
    lines = [e for e in daemon.log_lines() if e["event"].startswith("alert book full")]
    assert 1 <= len(lines) <= 1 + took_s // 60
