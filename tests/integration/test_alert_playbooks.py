"""Playbooks matched on Alertmanager alert names: armed by the webhook, disarmed on resolve."""

from __future__ import annotations

from tests.playbook_harness import handle, stage
from tritonguard.actions.registry import catalog
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.runtime.alert_book import AlertBook
from tritonguard.runtime.alertmanager_webhook import parse_webhook
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
