"""``kubernetes.scale``: replicas within bounds; when an HPA owns the workload, its minReplicas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    BoundsExceeded,
    UndoStep,
    action,
)
from tritonguard.core.config_patch import BoundError
from tritonguard.core.guards import DEFAULT_REPLICA_BOUND


class ScaleParams(ActionParams):
    """Either an absolute ``replicas`` or a relative ``add``; bounded by guards.bounds.replicas."""

    kind: Literal["Deployment", "StatefulSet"] = "Deployment"
    name: str = Field(description="workload name, e.g. triton-{{ model }}")
    namespace: str | None = Field(None, description="default: the incident's namespace")
    replicas: int | None = Field(None, ge=0)
    add: int | None = None

    @model_validator(mode="after")
    def _one(self) -> ScaleParams:
        if (self.replicas is None) == (self.add is None):
            raise ValueError("give exactly one of replicas or add")
        return self


def _target(ctx: ActionContext, params: ScaleParams, current: int | None) -> int:
    wanted = params.replicas if params.replicas is not None else (current or 0) + (params.add or 0)
    bound = ctx.bounds.get("replicas", DEFAULT_REPLICA_BOUND)
    try:
        bound.check("replicas", float(wanted))
    except BoundError as exc:
        raise BoundsExceeded(str(exc)) from None
    return wanted


async def _plan(ctx: ActionContext, params: ScaleParams) -> dict[str, Any]:
    ns = params.namespace or ctx.subject.namespace
    current = None
    if ctx.kube is not None:
        current = await ctx.kube.get_scale(params.kind, ns, params.name)
    elif params.add is not None:
        return {"workload": f"{ns}/{params.kind}/{params.name}", "add": params.add}
    return {
        "workload": f"{ns}/{params.kind}/{params.name}",
        "replicas": _target(ctx, params, current),
    }


@action("kubernetes.scale", ScaleParams, plan=_plan)
async def scale(ctx: ActionContext, params: ScaleParams) -> ActionResult:
    """Scale the workload, or raise its HPA's minReplicas when an HPA owns the replica count."""
    kube = ctx.kube
    if kube is None:
        raise ActionFailed("no Kubernetes API configured")
    ns = params.namespace or ctx.subject.namespace
    try:
        current = int(await kube.get_scale(params.kind, ns, params.name))
        wanted = _target(ctx, params, current)
        hpa = await kube.find_hpa_for(params.kind, ns, params.name)
        if hpa is not None:
            hpa_name, old_min = str(hpa.name), int(hpa.min_replicas)
            if wanted > int(hpa.max_replicas):
                raise BoundsExceeded(
                    f"minReplicas {wanted} would exceed the HPA's maxReplicas {hpa.max_replicas}"
                )
            await kube.set_hpa_min_replicas(ns, hpa_name, wanted)
            return ActionResult(
                detail={"hpa": f"{ns}/{hpa_name}", "min_replicas": wanted, "was": old_min},
                undo=UndoStep(
                    "kubernetes.hpa_min",
                    {"namespace": ns, "name": hpa_name, "min_replicas": old_min},
                ),
            )
        await kube.set_scale(params.kind, ns, params.name, wanted)
    except (BoundsExceeded, ActionFailed):
        raise
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    return ActionResult(
        detail={
            "workload": f"{ns}/{params.kind}/{params.name}",
            "replicas": wanted,
            "was": current,
        },
        undo=UndoStep(
            "kubernetes.scale",
            {"kind": params.kind, "name": params.name, "namespace": ns, "replicas": current},
        ),
    )
