"""``kubernetes.scale``: replicas within bounds; when an HPA owns the workload, its minReplicas.

The count is computed once, from the replicas read before the change, and written as an
absolute number. A write that fails is judged by reading the count back (see
``docs/reliability.md``): what the server now holds, not the error, says whether it scaled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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

            async def hpa_min() -> int:
                found = await kube.find_hpa_for(params.kind, ns, params.name)
                return -1 if found is None else int(found.min_replicas)

            undo = UndoStep(
                "kubernetes.hpa_min", {"namespace": ns, "name": hpa_name, "min_replicas": old_min}
            )
            # On file before the write: a daemon killed with the patch in flight is put back
            # to the count read above at its next start, whether the patch landed or not.
            ctx.intend(undo)
            note = await _write(
                lambda: kube.set_hpa_min_replicas(ns, hpa_name, wanted),
                hpa_min,
                wanted=wanted,
                before=old_min,
                what=f"HPA {ns}/{hpa_name} {{has}} minReplicas {{n}}",
            )
            return ActionResult(
                detail={
                    "hpa": f"{ns}/{hpa_name}",
                    "min_replicas": wanted,
                    "was": old_min,
                    **({"note": note} if note else {}),
                },
                undo=undo,
            )
        undo = UndoStep(
            "kubernetes.scale",
            {"kind": params.kind, "name": params.name, "namespace": ns, "replicas": current},
        )
        ctx.intend(undo)
        note = await _write(
            lambda: kube.set_scale(params.kind, ns, params.name, wanted),
            lambda: kube.get_scale(params.kind, ns, params.name),
            wanted=wanted,
            before=current,
            what="the workload {has} {n} replicas",
        )
    except (BoundsExceeded, ActionFailed):
        raise
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None
    return ActionResult(
        detail={
            "workload": f"{ns}/{params.kind}/{params.name}",
            "replicas": wanted,
            "was": current,
            **({"note": note} if note else {}),
        },
        undo=undo,
    )


async def _write(
    write: Callable[[], Awaitable[object]],
    read: Callable[[], Awaitable[int]],
    *,
    wanted: int,
    before: int,
    what: str,
) -> str | None:
    """Set a count to ``wanted``; on failure let the count read back decide; return a note.

    ``what`` says what the count is in a reason: a format string with ``{has}`` and ``{n}``.

    The write names an absolute count, so sending it again can never add up to more: a
    server error or a timeout with the count still at ``before`` is retried once. A count
    already at ``wanted`` means the write landed and only its answer was lost. A conflict,
    a refusal, or a count someone else changed meanwhile is not retried: the step fails
    with one line saying what the count is now.
    """
    try:
        await write()
        return None
    except Exception as exc:  # the client's one-line error; the read-back judges it
        first = exc
    try:
        now = int(await read())
    except Exception as exc:  # the same client error: the outcome stays unknown
        raise ActionFailed(
            f"kubernetes: {first}; reading the count back failed too ({exc}), so it may be "
            f"{wanted} now"
        ) from None
    if now == wanted:
        return f"the answer was lost ({first}); read back: {wanted}"
    # Retryable (the client's errors say so): the server was down, slow or overloaded.
    if now == before and getattr(first, "retryable", False):
        try:
            await write()
        except Exception as again:  # the client's one-line error
            still = what.format(has="still has", n=now)
            raise ActionFailed(f"kubernetes: {first}; sent once more: {again}; {still}") from None
        return f"sent once more after: {first}"
    if now == before:
        said = what.format(has="still has", n=now)
    else:
        said = what.format(has="has", n=now) + f" (it was {before}: changed by someone else)"
    raise ActionFailed(f"kubernetes: {first}; {said}; not retried")
