"""``kubernetes.scaledobject_min``: set a KEDA ScaledObject's minReplicaCount (a scale's undo)."""

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


class ScaledObjectMinParams(ActionParams):
    """The ScaledObject and the minReplicaCount to set; null removes it (KEDA's default, 0)."""

    name: str
    namespace: str | None = None
    min_replica_count: int | None = Field(ge=0)


async def _plan(ctx: ActionContext, params: ScaledObjectMinParams) -> dict[str, Any]:
    ns = params.namespace or ctx.subject.namespace
    return {"scaled_object": f"{ns}/{params.name}", "min_replica_count": params.min_replica_count}


@action("kubernetes.scaledobject_min", ScaledObjectMinParams, plan=_plan)
async def scaledobject_min(ctx: ActionContext, params: ScaledObjectMinParams) -> ActionResult:
    """Set the ScaledObject's minReplicaCount; KEDA brings its own HPA along."""
    if ctx.kube is None:
        raise ActionFailed("no Kubernetes API configured")
    ns = params.namespace or ctx.subject.namespace
    try:
        so = await ctx.kube.read_scaled_object(ns, params.name)
        await ctx.kube.set_scaled_object_min(ns, params.name, params.min_replica_count)
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    return ActionResult(
        detail={
            "scaled_object": f"{ns}/{params.name}",
            "min_replica_count": params.min_replica_count,
            "was": so.min_replica_count,
        }
    )
