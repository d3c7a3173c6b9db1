"""The features mode's webhook: each shard keeps only its own subjects' rule alerts."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog.testing

from tritonguard.core.shards import Shard
from tritonguard.runtime.alertmanager_webhook import Alert
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings


def _app(tmp_path: Path, index: int, max_alerts: int = 100) -> DaemonApp:
    s = Settings(
        prometheus_url="http://127.0.0.1:9",
        prometheus_mode="features",
        audit_db_path=tmp_path / f"audit-{index}.sqlite3",
        shard={"count": 2, "index": index},
        api={"alert_book_max_alerts": max_alerts},
    )
    return DaemonApp(s)


def _alert(pod: str) -> Alert:
    return Alert(
        status="firing",
        labels={
            "alertname": "TritonguardBatchingDelay",
            "cause": "batching_delay",
            "namespace": "prod",
            "pod": pod,
            "model": "resnet",
        },
        fingerprint=f"fp-{pod}",
    )


def _pods_by_owner() -> tuple[str, str]:
    """Return a pod of shard 0's workload and one of shard 1's."""
    shard0 = Shard(0, 2)
    mine = next(f"a{i}-0" for i in range(100) if shard0.owns("prod", f"a{i}"))
    theirs = next(f"b{i}-0" for i in range(100) if not shard0.owns("prod", f"b{i}"))
    return mine, theirs


@pytest.mark.parametrize("index", [0, 1])
async def test_a_shard_keeps_only_the_rule_alerts_of_its_own_subjects(
    tmp_path: Path, index: int
) -> None:
    """Of two firing alerts, each shard keeps the one whose workload it owns, never both."""
    app = _app(tmp_path, index)
    mine, theirs = _pods_by_owner()
    await app._handle_alerts([_alert(mine), _alert(theirs)])
    assert app.cause_alerts is not None
    kept = {key[1] for key in app.cause_alerts.firing(app.clock())}
    assert kept == ({mine} if index == 0 else {theirs})


async def test_dropped_rule_alerts_are_logged(tmp_path: Path) -> None:
    """Alerts beyond the cap are dropped and the drop is logged with the count."""
    app = _app(tmp_path, 0, max_alerts=1)
    mine, _ = _pods_by_owner()
    others = [_alert(mine.replace("-0", f"-{i}")) for i in range(1, 4)]
    with structlog.testing.capture_logs() as logs:
        await app._handle_alerts([_alert(mine), *others])
    (line,) = [e for e in logs if e["event"] == "rule alerts full: oldest cause alerts dropped"]
    assert line["dropped"] == 3 and line["dropped_total"] == 3
