"""``kubernetes.scale``: the pod's owning workload within bounds, through its HPA or ScaledObject.

The workload is the one the incident's pod belongs to, read from its owner chain (Pod →
ReplicaSet → Deployment, or Pod → StatefulSet) unless the playbook names one. When an HPA
controls the replica count its minReplicas is raised instead; when KEDA made that HPA, the
ScaledObject's minReplicaCount is raised instead and put back when the incident resolves,
because KEDA reverts any edit to the HPA it owns (kedacore/keda#6061, #2917).

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
from tritonguard.clients.ports import Hpa, KubeApi, Workload
from tritonguard.core.config_patch import BoundError
from tritonguard.core.guards import DEFAULT_REPLICA_BOUND

# What KEDA assumes when a ScaledObject does not say (its CRD defaults).
KEDA_DEFAULT_MIN, KEDA_DEFAULT_MAX = 0, 100


class ScaleParams(ActionParams):
    """Either an absolute ``replicas`` or a relative ``add``; bounded by guards.bounds.replicas.

    Without ``name`` the workload is the Deployment or StatefulSet owning the incident's pod;
    a ``kind`` given with it must match what the owner chain says.
    """

    kind: Literal["Deployment", "StatefulSet"] | None = Field(
        None, description="default: the owner's kind (Deployment when a name is given)"
    )
    name: str | None = Field(None, description="default: the owner of the incident's pod")
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


async def resolve_workload(ctx: ActionContext, params: ScaleParams, kube: KubeApi) -> Workload:
    """Return the workload to scale: the one named, else the owner of the incident's pod."""
    ns = params.namespace or ctx.subject.namespace
    if params.name:
        return Workload(params.kind or "Deployment", params.name)
    pod = ctx.subject.pod
    if not pod:
        raise ActionFailed(
            f"the incident on {ctx.subject.key()} names no pod, so it has no owner to scale; "
            "name the workload (params.name)"
        )
    try:
        found = await kube.workload_of_pod(ns, pod)
    except Exception as exc:  # the client's one-line error (404: the pod is gone, 403: RBAC)
        raise ActionFailed(
            f"kubernetes: cannot follow the owner of pod {ns}/{pod}: {exc}"
        ) from None
    if found is None:
        raise ActionFailed(
            f"pod {ns}/{pod} is owned by no Deployment or StatefulSet (a bare pod, a DaemonSet "
            "or a Job): nothing to scale"
        )
    if params.kind is not None and found.kind != params.kind:
        raise ActionFailed(
            f"pod {ns}/{pod} belongs to {found.kind} {found.name}, not to a {params.kind}"
        )
    return found


def _label(ns: str, workload: Workload) -> str:
    return f"{ns}/{workload.kind}/{workload.name}"


async def _plan(ctx: ActionContext, params: ScaleParams) -> dict[str, Any]:
    ns = params.namespace or ctx.subject.namespace
    if ctx.kube is None:
        # Without the API the owner is not known yet: the plan says whose it will be.
        where = (
            _label(ns, Workload(params.kind or "Deployment", params.name))
            if params.name
            else f"the owner of pod {ns}/{ctx.subject.pod or '*'}"
        )
        if params.add is not None:
            return {"workload": where, "add": params.add}
        return {"workload": where, "replicas": _target(ctx, params, None)}
    workload = await resolve_workload(ctx, params, ctx.kube)
    current = await ctx.kube.get_scale(workload.kind, ns, workload.name)
    plan: dict[str, Any] = {
        "workload": _label(ns, workload),
        "replicas": _target(ctx, params, current),
    }
    hpa = await ctx.kube.find_hpa_for(workload.kind, ns, workload.name)
    if hpa is not None and hpa.scaled_object:
        plan["scaled_object"] = f"{ns}/{hpa.scaled_object}"
    elif hpa is not None:
        plan["hpa"] = f"{ns}/{hpa.name}"
    return plan


@action("kubernetes.scale", ScaleParams, plan=_plan)
async def scale(ctx: ActionContext, params: ScaleParams) -> ActionResult:
    """Scale the pod's workload; through its HPA's minReplicas, or KEDA's minReplicaCount."""
    kube = ctx.kube
    if kube is None:
        raise ActionFailed("no Kubernetes API configured")
    ns = params.namespace or ctx.subject.namespace
    workload = await resolve_workload(ctx, params, kube)
    kind, name = workload.kind, workload.name
    try:
        current = int(await kube.get_scale(kind, ns, name))
        wanted = _target(ctx, params, current)
        hpa = await kube.find_hpa_for(kind, ns, name)
        if hpa is not None and hpa.scaled_object:
            return await _through_keda(ctx, kube, ns, workload, hpa, wanted, current)
        if hpa is not None:
            return await _through_hpa(ctx, kube, ns, workload, hpa, wanted)
        return await _change(
            ctx,
            UndoStep(
                "kubernetes.scale",
                {"kind": kind, "name": name, "namespace": ns, "replicas": current},
            ),
            lambda: kube.set_scale(kind, ns, name, wanted),
            lambda: kube.get_scale(kind, ns, name),
            wanted=wanted,
            before=current,
            what="the workload {has} {n} replicas",
            detail={"workload": _label(ns, workload), "replicas": wanted, "was": current},
        )
    except (BoundsExceeded, ActionFailed):
        raise
    except Exception as exc:  # the Kubernetes client raises its own typed error; keep one line
        raise ActionFailed(f"kubernetes: {exc}") from None


async def _through_hpa(  # noqa: PLR0917 - the step's context, the workload and its HPA
    ctx: ActionContext, kube: KubeApi, ns: str, workload: Workload, hpa: Hpa, wanted: int
) -> ActionResult:
    """Raise the HPA's minReplicas to ``wanted`` (the HPA then scales the workload to it)."""
    hpa_name, old_min = str(hpa.name), int(hpa.min_replicas)
    if wanted > int(hpa.max_replicas):
        raise BoundsExceeded(
            f"minReplicas {wanted} would exceed the HPA's maxReplicas {hpa.max_replicas}"
        )

    async def hpa_min() -> int:
        found = await kube.find_hpa_for(workload.kind, ns, workload.name)
        return -1 if found is None else int(found.min_replicas)

    return await _change(
        ctx,
        UndoStep(
            "kubernetes.hpa_min", {"namespace": ns, "name": hpa_name, "min_replicas": old_min}
        ),
        lambda: kube.set_hpa_min_replicas(ns, hpa_name, wanted),
        hpa_min,
        wanted=wanted,
        before=old_min,
        what=f"HPA {ns}/{hpa_name} {{has}} minReplicas {{n}}",
        detail={
            "workload": _label(ns, workload),
            "hpa": f"{ns}/{hpa_name}",
            "min_replicas": wanted,
            "was": old_min,
        },
    )


async def _through_keda(  # noqa: PLR0917 - the step's context, workload, HPA, counts
    ctx: ActionContext,
    kube: KubeApi,
    ns: str,
    workload: Workload,
    hpa: Hpa,
    wanted: int,
    current: int,
) -> ActionResult:
    """Raise the ScaledObject's minReplicaCount; KEDA's HPA follows. The HPA is never edited."""
    so_name = str(hpa.scaled_object)
    refuse = (
        f"HPA {ns}/{hpa.name} belongs to KEDA ScaledObject {ns}/{so_name}, and KEDA reverts "
        "edits to it, so the HPA is left alone"
    )
    try:
        so = await kube.read_scaled_object(ns, so_name)
    except Exception as exc:  # the client's one-line error (403 without scaledobjects get)
        raise ActionFailed(
            f"{refuse}; reading the ScaledObject failed ({exc}): grant scaledobjects get and "
            "patch in this namespace (deploy/namespace)"
        ) from None
    if so.paused:
        raise ActionFailed(
            f"{refuse}; ScaledObject {ns}/{so_name} is paused ({so.paused}), so KEDA holds "
            f"the replicas at {current}: not changed"
        )
    old = so.min_replica_count
    high = so.max_replica_count if so.max_replica_count is not None else KEDA_DEFAULT_MAX
    if wanted > high:
        raise BoundsExceeded(
            f"minReplicaCount {wanted} would exceed ScaledObject {ns}/{so_name}'s "
            f"maxReplicaCount {high}"
        )

    async def so_min() -> int:
        found = await kube.read_scaled_object(ns, so_name)
        return KEDA_DEFAULT_MIN if found.min_replica_count is None else found.min_replica_count

    return await _change(
        ctx,
        # Restored when the incident resolves: the floor is KEDA's to manage, raised only
        # while the incident lasts (and rolled back at once when verification fails).
        UndoStep(
            "kubernetes.scaledobject_min",
            {"namespace": ns, "name": so_name, "min_replica_count": old},
            on_resolve=True,
        ),
        lambda: kube.set_scaled_object_min(ns, so_name, wanted),
        so_min,
        wanted=wanted,
        before=KEDA_DEFAULT_MIN if old is None else old,
        what=f"ScaledObject {ns}/{so_name} {{has}} minReplicaCount {{n}}",
        detail={
            "workload": _label(ns, workload),
            "scaled_object": f"{ns}/{so_name}",
            "min_replica_count": wanted,
            "was": old,
            "replicas_before": current,
        },
    )


async def _change(
    ctx: ActionContext,
    undo: UndoStep,
    write: Callable[[], Awaitable[object]],
    read: Callable[[], Awaitable[int]],
    *,
    wanted: int,
    before: int,
    what: str,
    detail: dict[str, Any],
) -> ActionResult:
    """Put ``undo`` on file, set the count (``_write``) and return the result with ``detail``.

    On file before the write: a daemon killed with the write in flight is put back to the
    count read before it at its next start, whether the write landed or not. A note on how
    the write went (an answer lost, sent once more) ends the detail.
    """
    ctx.intend(undo)
    note = await _write(write, read, wanted=wanted, before=before, what=what)
    return ActionResult(detail={**detail, **({"note": note} if note else {})}, undo=undo)


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
