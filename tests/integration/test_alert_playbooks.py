"""Playbooks matched on Alertmanager alert names: armed by the webhook, disarmed on resolve.

The alert book behind them stays within its entry and byte caps, dropping the oldest first.
"""

from __future__ import annotations

import structlog

from tests.playbook_harness import handle, stage
from tritonguard.actions.registry import catalog
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.alert_book import AlertBook, entry_size
from tritonguard.runtime.alertmanager_webhook import Alert, parse_webhook
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv

PLAYBOOK = """
name: page-on-slo-burn
when:
  alerts: [TritonSLOBurn]
steps:
  - action: slack.post
    params:
      text: "{{ model }}: SLO burning and {{ cause }} diagnosed"
"""


def _webhook(status: str, **labels: str) -> dict[str, object]:
    return {
        "version": "4",
        "status": status,
        "receiver": "tritonguard",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": [
            {
                "status": status,
                "labels": {"alertname": "TritonSLOBurn", **labels},
                "annotations": {},
                "startsAt": "2026-11-30T03:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": "f00d",
            }
        ],
    }


def _incident(n: int, model: str = "resnet") -> IncidentEvent:
    return IncidentEvent(
        event="opened",
        incident_id=f"inc-{n}",
        cause="too_few_instances",
        subject=Subject("prod", model, "triton-0"),
        at=1000.0 + n,
        confidence=0.8,
        summary="all instances busy",
        evidence={"busy": Evidence(1.0, "instances", 30, "busy instances")},
        fix=Fix("add an instance"),
        opened_at=1000.0 + n,
    )


async def test_alert_named_playbook_runs_only_while_its_alert_fires_for_the_subject() -> None:
    """No alert: nothing planned; firing for the model: planned; other model or resolved: not."""
    alerts = AlertBook(clock=lambda: 1000.0)
    books = load_playbooks_text(PLAYBOOK, "alerts.yaml", catalog())
    on = stage(
        books,
        AuditStore(),
        settings=GuardSettings(dry_run=True),
        env=ExecutorEnv(clock=lambda: 1000.0),
        alerts_for=alerts.names_for,
    )
    assert await handle(on, _incident(1), 1001.0) == []

    alerts.update(parse_webhook(_webhook("firing", namespace="prod", model="resnet")))
    planned = await handle(on, _incident(2), 1002.0)
    assert [(r.action, r.status) for r in planned] == [("slack.post", "planned")]
    assert await handle(on, _incident(3, model="bert"), 1003.0) == []

    alerts.update(parse_webhook(_webhook("resolved", namespace="prod", model="resnet")))
    assert await handle(on, _incident(4), 1004.0) == []


def test_forgotten_resolution_expires() -> None:
    """An alert never re-sent nor resolved stops arming playbooks after its time to live."""
    now = [0.0]
    alerts = AlertBook(ttl_s=60.0, clock=lambda: now[0])
    alerts.update(parse_webhook(_webhook("firing")))
    assert alerts.names_for(_incident(1)) == {"TritonSLOBurn"}
    now[0] = 61.0
    assert alerts.names_for(_incident(1)) == frozenset()


def _firing(fingerprint: str, name: str | None = None, **annotations: str) -> Alert:
    return Alert(
        status="firing",
        labels={"alertname": name or f"A-{fingerprint}", "namespace": "prod"},
        annotations=annotations,
        fingerprint=fingerprint,
    )


def _held(book: AlertBook) -> set[str]:
    return set(book.names_for(_incident(0)))


def test_beyond_its_entry_cap_the_book_drops_the_alerts_heard_of_least_recently() -> None:
    """max_alerts 3: a fourth and fifth alert push out the oldest; one re-sent stays newest."""
    dropped: list[tuple[str, int]] = []
    book = AlertBook(
        clock=lambda: 1000.0, max_alerts=3, on_evicted=lambda c, n: dropped.append((c, n))
    )
    book.update([_firing("f1"), _firing("f2"), _firing("f3")])
    book.update([_firing("f1")])  # Alertmanager re-sends f1: now it is the newest
    book.update([_firing("f4"), _firing("f5")])
    assert _held(book) == {"A-f1", "A-f4", "A-f5"}
    assert book.count == 3
    assert book.evicted == {"max_alerts": 2, "max_bytes": 0}
    assert dropped == [("max_alerts", 2)]


def test_the_book_stays_within_its_byte_cap() -> None:
    """Alerts with large annotations: the held bytes never pass max_bytes, the oldest go."""
    book = AlertBook(clock=lambda: 1000.0, max_bytes=65_536)
    for n in range(40):
        book.update([_firing(f"f{n}", summary="x" * 4000)])
        assert book.bytes <= 65_536
    kept = _held(book)
    assert "A-f39" in kept and "A-f0" not in kept
    assert 10 <= book.count < 20
    assert book.evicted["max_bytes"] == 40 - book.count
    # Resolving frees what the alert held.
    before = book.bytes
    book.update([Alert(status="resolved", labels={"alertname": "A-f39"}, fingerprint="f39")])
    assert book.bytes < before - 4000 and "A-f39" not in _held(book)


def test_an_alert_larger_than_the_whole_cap_is_not_kept() -> None:
    """One alert bigger than max_bytes is dropped (and counted) rather than overflow the book."""
    book = AlertBook(clock=lambda: 1000.0, max_bytes=65_536)
    book.update([_firing("small")])
    book.update([_firing("huge", summary="y" * 100_000)])
    assert book.count == 0 and book.bytes == 0
    assert book.evicted["max_bytes"] == 2


def test_entry_size_counts_what_an_alert_holds() -> None:
    """The byte estimate grows with the label and annotation text an alert carries."""
    small = entry_size("k", _firing("k"))
    assert small > 500  # object headers alone: the Alert, two dicts, a dozen strings
    assert entry_size("k", _firing("k", summary="z" * 10_000)) >= small + 10_000


def test_evictions_are_logged_at_most_once_a_minute_with_the_count() -> None:
    """A flood evicting on every notification logs one line, then one a minute with the total."""
    now = [1000.0]
    book = AlertBook(clock=lambda: now[0], max_alerts=10)
    with structlog.testing.capture_logs() as logs:
        for n in range(500):
            book.update([_firing(f"f{n}")])
            now[0] += 0.01
        now[0] += 60.0
        book.update([_firing("last")])
    lines = [e for e in logs if e["event"].startswith("alert book full")]
    assert [e["dropped"] for e in lines] == [1, 490]
    assert lines[-1]["dropped_total"] == 491 and lines[-1]["cap"] == "max_alerts"
    assert lines[-1]["limit"] == 10 and lines[-1]["held"] == 10
