"""Alertmanager webhook payloads (version 4) parsed into alerts the daemon can match on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class WebhookError(ValueError):
    """The body is not an Alertmanager v4 webhook payload; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert of a notification: its state, labels and annotations."""

    status: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    starts_at: str = ""
    ends_at: str = ""
    fingerprint: str = ""
    generator_url: str = ""

    @property
    def name(self) -> str:
        """Return the ``alertname`` label."""
        return self.labels.get("alertname", "")


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebhookError(f"{where} must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def parse_webhook(payload: Any) -> list[Alert]:
    """Return the alerts of a v4 webhook body; raise WebhookError naming the bad field."""
    if not isinstance(payload, dict):
        raise WebhookError("body must be a JSON object")
    version = str(payload.get("version", ""))
    if version != "4":
        raise WebhookError(f"unsupported webhook version {version!r}; Alertmanager sends '4'")
    raw_alerts = payload.get("alerts")
    if not isinstance(raw_alerts, list):
        raise WebhookError("'alerts' must be a list")
    alerts: list[Alert] = []
    for index, raw in enumerate(raw_alerts):
        where = f"alerts[{index}]"
        if not isinstance(raw, dict):
            raise WebhookError(f"{where} must be an object")
        status = raw.get("status")
        if status not in ("firing", "resolved"):
            raise WebhookError(f"{where}.status must be 'firing' or 'resolved'")
        alerts.append(
            Alert(
                status=status,
                labels=_str_map(raw.get("labels"), f"{where}.labels"),
                annotations=_str_map(raw.get("annotations"), f"{where}.annotations"),
                starts_at=str(raw.get("startsAt", "")),
                ends_at=str(raw.get("endsAt", "")),
                fingerprint=str(raw.get("fingerprint", "")),
                generator_url=str(raw.get("generatorURL", "")),
            )
        )
    return alerts
