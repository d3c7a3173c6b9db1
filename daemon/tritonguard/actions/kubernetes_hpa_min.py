"""``kubernetes.hpa_min``: set an HPA's minReplicas (the undo of a scale through an HPA).

An HPA that KEDA made is refused: KEDA reverts edits to it, so the change would not hold and
would fight KEDA. The ScaledObject's minReplicaCount is where such a floor goes
(``kubernetes.scale`` does that itself).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)


class HpaMinParams(ActionParams):
    """The HPA and the minReplicas to set."""

    name: str
    namespace: str | None = None
    min_replicas: int = Field(ge=1)


async def _plan(ctx: ActionContext, params: HpaMinParams) -> dict[str, Any]:
    ns = params.namespace or ctx.subject.namespace
    plan: dict[str, Any] = {"hpa": f"{ns}/{params.name}"}
    if ctx.kube is not None:
        hpa = await ctx.kube.read_hpa(ns, params.name)
        if hpa.scaled_object:
            plan["refused"] = f"owned by KEDA ScaledObject {ns}/{hpa.scaled_object}"
    return plan


@action("kubernetes.hpa_min", HpaMinParams, plan=_plan)
async def hpa_min(ctx: ActionContext, params: HpaMinParams) -> ActionResult:
    """Set the HPA's minReplicas, unless KEDA owns the HPA."""
    if ctx.kube is None:
        raise ActionFailed("no Kubernetes API configured")
    ns = params.namespace or ctx.subject.namespace
    try:
        hpa = await ctx.kube.read_hpa(ns, params.name)
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    if hpa.scaled_object:
        raise ActionFailed(
            f"HPA {ns}/{params.name} belongs to KEDA ScaledObject {ns}/{hpa.scaled_object}; KEDA "
            "reverts edits to it, so it is not changed: set the ScaledObject's minReplicaCount "
            "(kubernetes.scale does) instead"
        )
    try:
        await ctx.kube.set_hpa_min_replicas(ns, params.name, params.min_replicas)
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    return ActionResult(
        detail={
            "hpa": f"{ns}/{params.name}",
            "min_replicas": params.min_replicas,
            "was": hpa.min_replicas,
        }
    )
