"""Build the rows a leader hands to the next one (``core.run_handover``) for tests.

Each kind carries the same incident fields; a test names only what it is about and takes
the rest from here: a cpu_bottleneck incident on prod/resnet/triton-0 and its ``scale``
playbook, with no undos.
"""

from __future__ import annotations

from typing import Any

from tritonguard.core.run_handover import HandedApproval, HandedIntent, HandedVerification

# Undos of a scale and of a KEDA floor, for rows that hand some over.
UNDOS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("kubernetes.scale", {"name": "triton", "replicas": 2}),
    ("kubernetes.scaledobject_min", {"name": "triton-so", "min_replica_count": 2}),
)


def _incident(fields: dict[str, Any]) -> dict[str, Any]:
    """Return the incident fields every row carries, overridden by ``fields``."""
    return {
        "incident_id": "inc-1",
        "playbook": "scale",
        "cause": "cpu_bottleneck",
        "namespace": "prod",
        "model": "resnet",
        "pod": "triton-0",
        "opened_at": 4000.0,
        "undos": (),
        **fields,
    }


def handed_verification(**fields: Any) -> HandedVerification:
    """Return a verification without a verdict: one check of the queue share after a minute."""
    return HandedVerification(
        **_incident(
            {
                "checks": ({"feature": "queue_share", "below": 0.5},),
                "wait_s": 60.0,
                "started_at": 4100.0,
                **fields,
            }
        )
    )


def handed_intent(**fields: Any) -> HandedIntent:
    """Return a config reload in flight, the previous config as its way back."""
    return HandedIntent(
        **_incident(
            {
                "action": "triton.update_config",
                "started_at": 4200.0,
                "undo": ("triton.load", {"model": "resnet"}),
                **fields,
            }
        )
    )


def handed_approval(**fields: Any) -> HandedApproval:
    """Return a scale waiting for approval by the on-call group for 15 minutes."""
    return HandedApproval(
        **_incident(
            {
                "approval_id": "apr-1",
                "step_index": 2,
                "action": "kubernetes.scale",
                "params": {"add": 1},
                "approvers": ("S0ONCALL01",),
                "requested_at": 4300.0,
                "expires_at": 5200.0,
                **fields,
            }
        )
    )
