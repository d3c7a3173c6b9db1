"""Server-side printing: the ``Table`` objects kubectl asks for with ``as=Table``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tests.fakes.kube.pods import pod_ready
from tests.fakes.kube.resources import (
    CONFIG_MAPS,
    DEPLOYMENTS,
    EVENTS,
    EVENTS_V1,
    HPAS,
    LEASES,
    PODS,
    REPLICASETS,
    SCALED_OBJECTS,
    STATEFULSETS,
    JsonObj,
    ResourceType,
)

Cell = Callable[[JsonObj], Any]


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def age(ts: str | None) -> str:
    """Render an age the way kubectl does (``45s``, ``3m``, ``2h``, ``5d``)."""
    when = _parse_time(ts or "")
    if when is None:
        return "<unknown>"
    secs = max(0, int((datetime.now(UTC) - when).total_seconds()))
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60}m"
    if secs < 172800:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _col(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> JsonObj:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def _md(o: JsonObj) -> JsonObj:
    return dict(o.get("metadata", {}))


def _spec(o: JsonObj) -> JsonObj:
    return dict(o.get("spec", {}))


def _status(o: JsonObj) -> JsonObj:
    return dict(o.get("status", {}))


def _name(o: JsonObj) -> Any:
    return _md(o).get("name", "")


def _age(o: JsonObj) -> str:
    return age(_md(o).get("creationTimestamp"))


def _replicas_ready(o: JsonObj) -> str:
    return f"{_status(o).get('readyReplicas', 0)}/{_spec(o).get('replicas', 0)}"


def _pod_phase(o: JsonObj) -> Any:
    return "Terminating" if _md(o).get("deletionTimestamp") else _status(o).get("phase", "Unknown")


def _hpa_reference(o: JsonObj) -> str:
    ref = _spec(o).get("scaleTargetRef", {})
    return f"{ref.get('kind')}/{ref.get('name')}"


def _event_object(o: JsonObj) -> str:
    inv = o.get("involvedObject") or o.get("regarding") or {}
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


def _event_last_seen(o: JsonObj) -> str:
    # As the server prints it: the series' last observation, else the last or the event time.
    series = o.get("series") or {}
    return age(
        series.get("lastObservedTime")
        or o.get("lastTimestamp")
        or o.get("deprecatedLastTimestamp")
        or o.get("eventTime")
        or _md(o).get("creationTimestamp")
    )


def _ready_condition(o: JsonObj) -> str:
    for cond in _status(o).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status", "Unknown"))
    return "Unknown"


_NAME = (_col("Name", fmt="name"), _name)
_AGE = (_col("Age"), _age)

# Each column beside the cell that fills it, in kubectl's order for the kind.
_PRINTERS: dict[str, list[tuple[JsonObj, Cell]]] = {
    PODS.key: [
        _NAME,
        (_col("Ready"), lambda o: "1/1" if pod_ready(o) else "0/1"),
        (_col("Status"), _pod_phase),
        (_col("Restarts"), lambda o: "0"),
        _AGE,
        (_col("IP", priority=1), lambda o: _status(o).get("podIP", "<none>")),
        (_col("Node", priority=1), lambda o: _spec(o).get("nodeName", "<none>")),
    ],
    DEPLOYMENTS.key: [
        _NAME,
        (_col("Ready"), _replicas_ready),
        (_col("Up-to-date", "integer"), lambda o: _status(o).get("updatedReplicas", 0)),
        (_col("Available", "integer"), lambda o: _status(o).get("availableReplicas", 0)),
        _AGE,
    ],
    STATEFULSETS.key: [_NAME, (_col("Ready"), _replicas_ready), _AGE],
    REPLICASETS.key: [
        _NAME,
        (_col("Desired", "integer"), lambda o: _spec(o).get("replicas", 0)),
        (_col("Current", "integer"), lambda o: _status(o).get("replicas", 0)),
        (_col("Ready", "integer"), lambda o: _status(o).get("readyReplicas", 0)),
        _AGE,
    ],
    HPAS.key: [
        _NAME,
        (_col("Reference"), _hpa_reference),
        (_col("Targets"), lambda o: "<unknown>"),
        (_col("MinPods", "integer"), lambda o: _spec(o).get("minReplicas", 1)),
        (_col("MaxPods", "integer"), lambda o: _spec(o).get("maxReplicas", 0)),
        (_col("Replicas", "integer"), lambda o: _status(o).get("currentReplicas", 0)),
        _AGE,
    ],
    # As kubectl prints them: how many keys, data and binaryData together.
    CONFIG_MAPS.key: [
        _NAME,
        (
            _col("Data", "integer"),
            lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
        ),
        _AGE,
    ],
    LEASES.key: [_NAME, (_col("Holder"), lambda o: _spec(o).get("holderIdentity", "")), _AGE],
    EVENTS.key: [
        (_col("Last Seen"), _event_last_seen),
        (_col("Type"), lambda o: o.get("type", "")),
        (_col("Reason"), lambda o: o.get("reason", "")),
        (_col("Object"), _event_object),
        (_col("Message"), lambda o: o.get("message", "")),
        _NAME,
    ],
    EVENTS_V1.key: [
        (_col("Last Seen"), _event_last_seen),
        (_col("Type"), lambda o: o.get("type", "")),
        (_col("Reason"), lambda o: o.get("reason", "")),
        (_col("Object"), _event_object),
        (_col("Message"), lambda o: o.get("note", "")),
        _NAME,
    ],
    # KEDA's printer columns, as its CRD declares them (those tritonguard's tests read).
    SCALED_OBJECTS.key: [
        _NAME,
        (_col("ScaleTargetKind"), lambda o: _status(o).get("scaleTargetKind", "")),
        (_col("ScaleTargetName"), lambda o: _spec(o).get("scaleTargetRef", {}).get("name", "")),
        (_col("Min", "integer"), lambda o: _spec(o).get("minReplicaCount", "")),
        (_col("Max", "integer"), lambda o: _spec(o).get("maxReplicaCount", "")),
        (_col("Ready"), _ready_condition),
        _AGE,
    ],
}
# Namespaces, and any kind without a printer of its own.
_DEFAULT: list[tuple[JsonObj, Cell]] = [
    _NAME,
    (_col("Status"), lambda o: _status(o).get("phase", "Active")),
    _AGE,
]


def wants_table(accept: str) -> bool:
    """Tell whether an ``Accept`` header asks for server-side printing."""
    return "as=Table" in accept


def table(rtype: ResourceType, objs: list[JsonObj], rv: str, include: str) -> JsonObj:
    """Return a Table of ``objs``; ``include`` is the request's ``includeObject`` policy."""
    printer = _PRINTERS.get(rtype.key, _DEFAULT)
    rows = []
    for obj in objs:
        row: JsonObj = {"cells": [cell(obj) for _, cell in printer]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [dict(column) for column, _ in printer],
        "rows": rows,
    }
