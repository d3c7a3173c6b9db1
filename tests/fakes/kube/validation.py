"""Per-kind validation of objects before they are stored, answered with 422 Invalid."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.errors import ApiError
from tests.fakes.kube.resources import (
    EVENTS,
    HPAS,
    LEASES,
    SCALED_OBJECTS,
    WORKLOADS,
    JsonObj,
    ResourceType,
)


def replicas_error(replicas: Any) -> str | None:
    """Return the complaint about a replica count, or None if it is a non-negative integer."""
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return f"Invalid value: {replicas!r}: must be greater than or equal to 0"
    return None


def _invalid_value(field: str, value: Any, rule: str) -> JsonObj:
    return {"field": field, "message": f"Invalid value: {value!r}: {rule}"}


def _causes(rtype: ResourceType, obj: JsonObj) -> list[JsonObj]:
    causes: list[JsonObj] = []
    spec = obj.get("spec") or {}
    if rtype in WORKLOADS:
        complaint = replicas_error(spec.get("replicas", 1))
        if complaint:
            causes.append({"field": "spec.replicas", "message": complaint})
    if rtype is HPAS:
        lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
        if not isinstance(lo, int) or lo < 1:
            causes.append(
                _invalid_value("spec.minReplicas", lo, "must be greater than or equal to 1")
            )
        if not isinstance(hi, int) or (isinstance(lo, int) and hi < lo):
            causes.append(
                _invalid_value(
                    "spec.maxReplicas", hi, "must be greater than or equal to `minReplicas`"
                )
            )
        if not (spec.get("scaleTargetRef") or {}).get("name"):
            causes.append({"field": "spec.scaleTargetRef.name", "message": "Required value"})
    if rtype is SCALED_OBJECTS:
        causes.extend(_scaled_object_causes(spec))
    if rtype is LEASES:
        d = spec.get("leaseDurationSeconds")
        if d is not None and (not isinstance(d, int) or d <= 0):
            causes.append(_invalid_value("spec.leaseDurationSeconds", d, "must be greater than 0"))
    if rtype is EVENTS:
        inv = obj.get("involvedObject") or {}
        ns = obj.get("metadata", {}).get("namespace")
        if inv.get("namespace") and ns and inv["namespace"] != ns:
            causes.append(
                {"field": "involvedObject.namespace", "message": "does not match event.namespace"}
            )
        if not inv.get("kind") or not inv.get("name"):
            causes.append({"field": "involvedObject", "message": "Required value"})
    return causes


def _scaled_object_causes(spec: JsonObj) -> list[JsonObj]:
    """KEDA's CRD schema (int32 counts, a named target) and its webhook (min ≤ max)."""
    causes: list[JsonObj] = []
    if not (spec.get("scaleTargetRef") or {}).get("name"):
        causes.append({"field": "spec.scaleTargetRef.name", "message": "Required value"})
    if not isinstance(spec.get("triggers"), list):
        causes.append({"field": "spec.triggers", "message": "Required value"})
    counts = {}
    for field in ("minReplicaCount", "maxReplicaCount"):
        value = spec.get(field)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            causes.append(
                {"field": f"spec.{field}", "message": f'Invalid value: "{value}": must be integer'}
            )
        else:
            counts[field] = value
    low, high = counts.get("minReplicaCount", 0), counts.get("maxReplicaCount", 100)
    if low > high:
        causes.append(
            {
                "field": "spec.minReplicaCount",
                "message": f"MinReplicaCount={low} must be less than MaxReplicaCount={high}",
            }
        )
    return causes


def validate(rtype: ResourceType, obj: JsonObj) -> None:
    """Raise 422 Invalid, listing every cause, if ``obj`` breaks a rule of its kind."""
    causes = _causes(rtype, obj)
    if not causes:
        return
    name = obj.get("metadata", {}).get("name", "")
    detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    raise ApiError(
        422,
        "Invalid",
        f'{rtype.kind}.{rtype.group or "core"} "{name}" is invalid: {detail}',
        {
            "name": name,
            "group": rtype.group,
            "kind": rtype.kind,
            "causes": [{"reason": "FieldValueInvalid", **c} for c in causes],
        },
    )
