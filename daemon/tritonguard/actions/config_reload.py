"""Shared by the config-changing actions: apply a bounded patch, reload, confirm, build the undo."""

from __future__ import annotations

from typing import Any

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionResult,
    BoundsExceeded,
    UndoStep,
)
from tritonguard.core.config_patch import (
    BoundError,
    ConfigPatch,
    PatchError,
    apply_patch,
    bound_for,
    flatten,
    reverse_patch,
)


def patched(ctx: ActionContext, config: dict[str, Any], patch: ConfigPatch) -> Any:
    """Apply ``patch`` within the context's bounds; BoundsExceeded/ActionFailed on refusal."""
    try:
        return apply_patch(config, patch, ctx.bounds, check_bounds=not ctx.restoring)
    except BoundError as exc:
        raise BoundsExceeded(str(exc)) from None
    except PatchError as exc:
        raise ActionFailed(str(exc)) from None


def _same(live: Any, wanted: Any) -> bool:
    """Return True when a read-back leaf holds the value that was loaded."""
    if isinstance(live, bool) or isinstance(wanted, bool):
        return bool(live == wanted)
    try:
        return float(live) == float(wanted)
    except (TypeError, ValueError):
        return bool(live == wanted)


async def plan_patch(ctx: ActionContext, model: str, patch: ConfigPatch) -> dict[str, Any]:
    """Return the changes a patch would make, from the live or fixture config when known.

    Without a config, values being set are still checked against their bounds, so a dry-run
    test can prove that bounds block a change.
    """
    config = await ctx.read_config(model)
    if config is None:
        for path, value in patch.set.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                bound = bound_for(path, ctx.bounds)
                if bound is None:
                    raise BoundsExceeded(f"{path} has no bound; add one under guards.bounds")
                try:
                    bound.check(path, float(value))
                except BoundError as exc:
                    raise BoundsExceeded(str(exc)) from None
        return {"model": model, "config_known": False}
    _, changes = patched(ctx, config, patch)
    return {"model": model, "changes": [c.as_dict() for c in changes]}


async def reload_with_patch(
    ctx: ActionContext,
    model: str,
    patch: ConfigPatch,
    ready_timeout: float,
    *,
    restore_on_resolve: bool,
) -> ActionResult:
    """Read the live config, apply ``patch``, load it, wait ready, confirm, return the undo."""
    triton = ctx.need_triton()
    previous = await triton.model_config(model)
    new, changes = patched(ctx, previous, patch)
    if not changes:
        return ActionResult(detail={"model": model, "changes": [], "note": "already in place"})
    await triton.load(model, new, timeout_s=ready_timeout)
    await triton.wait_model_ready(model, timeout_s=ready_timeout)
    after = await triton.model_config(model)
    # Check the changed leaves against the read-back config rather than applying the patch
    # again: an ``add`` applied twice adds twice, and Triton adds defaults and writes 64-bit
    # integers as strings, so only the paths that changed are compared, numbers as numbers.
    live = flatten(after)
    remaining = [c for c in changes if not _same(live.get(c.path), c.new)]
    if remaining:
        # Triton kept the old model (a failed load leaves it serving): say what did not apply.
        paths = ", ".join(c.path for c in remaining)
        raise ActionFailed(f"{model}: reload did not apply {paths}; the server kept its config")
    reverse = reverse_patch(previous, changes) if restore_on_resolve else None
    if reverse is not None:
        # Restored on resolve, maybe minutes later: put back only these paths, keeping what
        # changed since (another playbook's fix, an operator's edit).
        undo = UndoStep(
            "triton.update_config",
            {
                "model": model,
                "set": dict(reverse.set),
                "remove": list(reverse.remove),
                "ready_timeout": ready_timeout,
            },
            on_resolve=True,
        )
    else:
        undo = UndoStep(
            "triton.load",
            {"model": model, "config": previous, "ready_timeout": ready_timeout},
            on_resolve=restore_on_resolve,
        )
    return ActionResult(
        detail={"model": model, "changes": [c.as_dict() for c in changes]}, undo=undo
    )
