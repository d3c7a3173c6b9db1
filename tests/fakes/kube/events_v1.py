"""events.k8s.io/v1: a view of the core Events with the real server's conversion and rules.

The API server stores one kind of Event and converts it per request: ``regarding`` is the
core ``involvedObject``, ``note`` its ``message``, ``reportingController`` its
``reportingComponent``, the ``deprecated*`` fields its ``source``, ``firstTimestamp``,
``lastTimestamp`` and ``count``; ``series`` is the same on both. An Event written here is
therefore what ``kubectl describe`` and ``kubectl get events`` (core/v1) list.

Creation is validated as ``ValidateEventCreate`` does for this group version (eventTime,
reportingController, reportingInstance, action, reason, type, note length, series), and an
update may change only ``series`` and metadata: every other field is immutable.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from tests.fakes.kube.errors import ApiError
from tests.fakes.kube.resources import EVENTS_V1, JsonObj

# events.k8s.io/v1 name ↔ core/v1 name.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("eventTime", "series", "reportingInstance", "action", "reason", "related", "type")
_IMMUTABLE = (
    "regarding",
    "related",
    "note",
    "reason",
    "type",
    "action",
    "eventTime",
    "reportingController",
    "reportingInstance",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
_NOTE_LIMIT = 1024
# metav1.MicroTime parses with Go's RFC3339Micro layout: exactly six fractional digits.
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def to_core(event: JsonObj) -> JsonObj:
    """Return the core/v1 form of an events.k8s.io/v1 Event."""
    out: JsonObj = {"metadata": copy.deepcopy(event.get("metadata") or {})}
    for v1, core in _RENAMED.items():
        if event.get(v1) not in (None, ""):
            out[core] = copy.deepcopy(event[v1])
    for name in _SAME:
        if event.get(name) not in (None, ""):
            out[name] = copy.deepcopy(event[name])
    return out


def from_core(event: JsonObj) -> JsonObj:
    """Return the events.k8s.io/v1 form of a stored (core/v1) Event."""
    out: JsonObj = {
        "kind": "Event",
        "apiVersion": EVENTS_V1.api_version,
        "metadata": copy.deepcopy(event.get("metadata") or {}),
    }
    for v1, core in _RENAMED.items():
        if event.get(core) not in (None, "", 0):
            out[v1] = copy.deepcopy(event[core])
    for name in _SAME:
        if event.get(name) not in (None, ""):
            out[name] = copy.deepcopy(event[name])
    # Core events written by old clients have no eventTime; the conversion leaves it null.
    out.setdefault("eventTime", None)
    return out


def _invalid(name: str, causes: list[JsonObj]) -> ApiError:
    detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(
        422,
        "Invalid",
        f'Event.events.k8s.io "{name}" is invalid: {detail}',
        {
            "name": name,
            "group": EVENTS_V1.group,
            "kind": "Event",
            "causes": [{"reason": "FieldValueInvalid", **c} for c in causes],
        },
    )


def _required(field: str) -> JsonObj:
    return {"field": field, "message": "Required value"}


def check_times(event: JsonObj) -> None:
    """Raise the 400 the server's JSON decoding gives a MicroTime it cannot parse."""
    series = event.get("series")
    for value in (
        event.get("eventTime"),
        series.get("lastObservedTime") if isinstance(series, dict) else None,
    ):
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.match(value)):
            raise ApiError(
                400,
                "BadRequest",
                f'Event in version "v1" cannot be handled as a Event: parsing time '
                f'{json.dumps(value)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse',
            )


def validate_create(event: JsonObj, namespace: str) -> None:
    """Raise 422 Invalid as the real server does for a new events.k8s.io/v1 Event."""
    check_times(event)
    causes: list[JsonObj] = []
    if not event.get("eventTime"):
        causes.append(_required("eventTime"))
    controller = str(event.get("reportingController") or "")
    if not controller:
        causes.append(_required("reportingController"))
    elif not _QUALIFIED.match(controller) or len(controller.rsplit("/", 1)[-1]) > 63:
        causes.append(
            {
                "field": "reportingController",
                "message": f"Invalid value: {controller!r}: must be a qualified name",
            }
        )
    for field in ("reportingInstance", "action", "reason"):
        value = str(event.get(field) or "")
        if not value:
            causes.append(_required(field))
        elif len(value) > 128:
            causes.append({"field": field, "message": "can have at most 128 characters"})
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(
            {
                "field": "type",
                "message": f"Unsupported value: {json.dumps(event.get('type'))}: supported "
                'values: "Normal", "Warning"',
            }
        )
    if len(str(event.get("note") or "")) > _NOTE_LIMIT:
        causes.append({"field": "note", "message": f"can have at most {_NOTE_LIMIT} characters"})
    # Creation through this group version leaves the core-only fields to the server.
    for field in (
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    ):
        if event.get(field):
            causes.append({"field": field, "message": "Invalid value: needs to be unset"})
    regarding = event.get("regarding") or {}
    if regarding.get("namespace") and regarding["namespace"] != namespace:
        causes.append({"field": "regarding.namespace", "message": "does not match event.namespace"})
    causes.extend(_series_causes(event.get("series")))
    if causes:
        raise _invalid(str((event.get("metadata") or {}).get("name") or ""), causes)


def _series_causes(series: Any) -> list[JsonObj]:
    if series is None:
        return []
    if not isinstance(series, dict):
        return [{"field": "series", "message": "must be an object"}]
    causes: list[JsonObj] = []
    count = series.get("count")
    if not isinstance(count, int) or count < 2:
        causes.append(
            {"field": "series.count", "message": f"Invalid value: {count!r}: should be at least 2"}
        )
    if not series.get("lastObservedTime"):
        causes.append(_required("series.lastObservedTime"))
    return causes


def validate_update(new: JsonObj, old: JsonObj) -> None:
    """Raise 422 Invalid when an update changes anything but ``series`` and metadata."""
    check_times(new)
    name = str((old.get("metadata") or {}).get("name") or "")
    causes = [
        {"field": field, "message": "field is immutable"}
        for field in _IMMUTABLE
        if new.get(field) != old.get(field)
    ]
    causes.extend(_series_causes(new.get("series")))
    if causes:
        raise _invalid(name, causes)


def core_field_selector(selector: str) -> str:
    """Rewrite a field selector on events.k8s.io/v1 names to the stored core names."""
    out = []
    for term in filter(None, selector.split(",")):
        renamed = term
        for v1, core in _RENAMED.items():
            if term == v1 or term.startswith((v1 + ".", v1 + "=", v1 + "!")):
                renamed = core + term[len(v1) :]
                break
        out.append(renamed)
    return ",".join(out)
