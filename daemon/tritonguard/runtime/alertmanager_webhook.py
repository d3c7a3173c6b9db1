"""Alertmanager webhook payloads (version 4) parsed into alerts the daemon can match on."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Where the daemon serves the webhook; Alertmanager's webhook_config url ends with it.
WEBHOOK_PATH = "/api/alertmanager"

# A JSON string, closing quote optional: an unterminated one runs to the end, as the parser
# would read it. Possessive loops keep the scan linear whatever the body holds.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")


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


def nesting_exceeds(text: str, limit: int) -> bool:
    """Return True when JSON ``text`` nests arrays and objects deeper than ``limit``.

    Linear and without recursion, so it runs before the parser, which recurses once per
    level. Brackets inside strings do not count. On malformed text it may count too deep,
    never too shallow for the part a parser would read before failing.
    """
    skeleton = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = 0
    for bracket in skeleton:
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def parse_webhook_body(body: bytes, *, max_depth: int) -> list[Alert]:
    """Return the alerts of a raw webhook body; raise WebhookError with a one-line reason."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WebhookError("body is not UTF-8 JSON") from None
    if nesting_exceeds(text, max_depth):
        raise WebhookError(
            f"body nests deeper than {max_depth} levels; an Alertmanager webhook needs 4"
        )
    try:
        payload = json.loads(text)
    except RecursionError:
        # Only when api.max_json_depth is set above what the parser can recurse into.
        raise WebhookError("body nests too deeply to parse") from None
    except ValueError:
        # JSONDecodeError, and integers longer than Python converts (4300 digits).
        raise WebhookError("body is not JSON") from None
    return parse_webhook(payload)
