"""The ``scale`` subresource: a workload seen as an ``autoscaling/v1`` Scale."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.errors import ApiError
from tests.fakes.kube.resources import JsonObj
from tests.fakes.kube.selectors import selector_string
from tests.fakes.kube.validation import replicas_error


def scale_of(workload: JsonObj) -> JsonObj:
    """Return the Scale of a stored Deployment or StatefulSet."""
    md = workload["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: md[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in md
        },
        "spec": {"replicas": workload["spec"].get("replicas", 1)},
        "status": {
            "replicas": (workload.get("status") or {}).get("replicas", 0),
            "selector": selector_string(workload["spec"]["selector"].get("matchLabels", {})),
        },
    }


def requested_replicas(name: str, scale: JsonObj) -> int:
    """Return ``spec.replicas`` of a Scale a client wrote, or raise 422 Invalid."""
    replicas: Any = (scale.get("spec") or {}).get("replicas")
    complaint = replicas_error(replicas)
    if complaint:
        raise ApiError(
            422,
            "Invalid",
            f'Scale.autoscaling "{name}" is invalid: spec.replicas: {complaint}',
            {
                "name": name,
                "group": "autoscaling",
                "kind": "Scale",
                "causes": [{"reason": "FieldValueInvalid", "field": "spec.replicas"}],
            },
        )
    return int(replicas)
