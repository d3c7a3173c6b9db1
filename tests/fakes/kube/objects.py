"""Skeletons and timestamps for objects the fake creates itself."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.fakes.kube.resources import JsonObj


def now_iso() -> str:
    """Return the time as the API server writes timestamps (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_object(name: str, namespace: str, labels: dict[str, str]) -> JsonObj:
    """Return an object with only ``metadata``: name, labels and, if given, namespace."""
    md: JsonObj = {"name": name, "labels": dict(labels)}
    if namespace:
        md["namespace"] = namespace
    return {"metadata": md}
