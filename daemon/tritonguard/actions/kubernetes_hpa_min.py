"""``kubernetes.hpa_min``: set an HPA's minReplicas (the undo of a scale through an HPA)."""

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
    return {"hpa": f"{params.namespace or ctx.subject.namespace}/{params.name}"}


@action("kubernetes.hpa_min", HpaMinParams, plan=_plan)
async def hpa_min(ctx: ActionContext, params: HpaMinParams) -> ActionResult:
    """Set the HPA's minReplicas."""
    if ctx.kube is None:
        raise ActionFailed("no Kubernetes API configured")
    ns = params.namespace or ctx.subject.namespace
    try:
        await ctx.kube.set_hpa_min_replicas(ns, params.name, params.min_replicas)
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    return ActionResult(detail={"hpa": f"{ns}/{params.name}", "min_replicas": params.min_replicas})
