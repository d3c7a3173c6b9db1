"""Shared by the config-changing actions: apply a bounded patch, reload, confirm, build the undo.

A reload that does not succeed leaves the server with its previous config, and the reason
says which way: Triton refused it (checked by reading the config back), or the previous
config was loaded again because the load's outcome was unknown (see ``docs/reliability.md``).
"""

from __future__ import annotations

from typing import Any

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionResult,
    BoundsExceeded,
    UndoStep,
)
from tritonguard.clients.ports import TritonApi
from tritonguard.core.config_patch import (
    BoundError,
    Change,
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
    # The whole previous config, not the reverse patch: a load still running on the server
    # reads back as the old values, so a patch would find nothing to put back while the
    # change is about to land. Loading ``previous`` is queued behind it and replaces it.
    ctx.intend(
        UndoStep(
            "triton.load", {"model": model, "config": previous, "ready_timeout": ready_timeout}
        )
    )
    try:
        await triton.load(model, new, timeout_s=ready_timeout)
        await triton.wait_model_ready(model, timeout_s=ready_timeout)
    except Exception as exc:  # the client's one-line error (or a bug): the reload did not happen
        raise await keep_previous(
            triton, model, previous, changes, exc, ready_timeout=ready_timeout
        ) from None
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


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())


async def keep_previous(
    triton: TritonApi,
    model: str,
    previous: dict[str, Any],
    changes: list[Change],
    failure: BaseException,
    *,
    ready_timeout: float,
) -> ActionFailed:
    """Make sure a failed reload leaves ``previous`` on the server; return why it failed.

    An answer from the server (Triton's client errors carry its HTTP status) ends the load:
    Triton keeps serving the old model when a load fails, and reading the config back shows
    that it did. A load without an answer (a timeout, a dropped connection) may still be
    running, stuck in the model's initialize(), or may have happened with its answer lost:
    the previous config is loaded again. Triton runs the loads of one model in turn, so even
    when this one waits behind a stuck load it replaces the change when that finishes.
    """
    why = _one_line(failure)
    if getattr(failure, "status", None) is not None:
        try:
            live = flatten(await triton.model_config(model))
        except Exception:  # an unreadable server: load the previous config to be sure
            live = None
        if live is not None and all(_same(live.get(c.path), c.old) for c in changes):
            return ActionFailed(
                f"{model}: Triton refused the new config ({why}); "
                "the server kept its previous config"
            )
    try:
        await triton.load(model, previous, timeout_s=ready_timeout)
    except Exception as again:  # the same one-line client error
        return ActionFailed(
            f"{model}: {why}; the previous config was sent again and did not finish within "
            f"{ready_timeout:g}s either ({_one_line(again)}): Triton loads a model's configs in "
            f"turn, so it replaces the change once the load in progress ends; check {model} "
            "if it does not"
        )
    return ActionFailed(
        f"{model}: {why}; the previous config was loaded again, so the change cannot land later"
    )
