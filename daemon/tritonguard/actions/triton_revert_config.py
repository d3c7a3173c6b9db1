"""``triton.revert_config``: put back the config the model ran before the change an incident followed.

The incident names the change (``IncidentEvent.change``: two reads of the repository API that
differ). Reverting loads the sections of the config that change touched (``dynamic_batching``,
``instance_group``, ...) as they were before it, leaving every other section as it is now. The
values put back are the ones the server itself ran while the model was healthy, so they are
not checked against the playbook's bounds (a restore is not), but everything else guards a
reload applies here too: dry-run, cooldown, rate limits, verification and rollback to the
config it replaced.

It refuses, changing nothing, when the incident names no change, when the change was to
another model, or when the server no longer runs what the change made (someone changed the
same sections since): reverting then would undo work nobody here knows about.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import Field

from tritonguard.actions.config_reload import patched, reload_with_patch
from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)
from tritonguard.core.config_changes import ConfigChange
from tritonguard.core.config_patch import ConfigPatch, flatten
from tritonguard.core.playbook_model import Duration


class RevertConfigParams(ActionParams):
    """Revert the model-config change the incident followed."""

    ready_timeout: Duration = Field(120.0, description="how long to wait for the model to be ready")


def _change(ctx: ActionContext) -> ConfigChange:
    change = ctx.event.change
    if change is None:
        raise ActionFailed(
            f"no model-config change is known before this incident on {ctx.subject.key()}; "
            "nothing to revert (the daemon reads configs from Triton's repository API)"
        )
    if change.model != ctx.subject.model:
        raise ActionFailed(f"the change was to {change.model}, not {ctx.subject.model}")
    if not change.changes and change.config_map is not None and change.rollout is None:
        mounted = change.config_map
        raise ActionFailed(
            f"nothing to revert on {ctx.subject.key()}: the change before this incident "
            f"changed no model config Triton serves ({mounted.headline()} changed: "
            f"`kubectl -n {mounted.namespace} edit configmap {mounted.name}` puts it back, "
            "then the model's next load reads it)"
        )
    if not change.changes:
        raise ActionFailed(
            f"nothing to revert on {ctx.subject.key()}: the change before this incident "
            "changed no model config (a rollout of the pod template: `kubectl rollout undo` "
            "puts that back)"
        )
    return change


def _section(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def revert_patch(change: ConfigChange, live: dict[str, Any]) -> ConfigPatch:
    """Return the patch putting back ``change``'s sections; ActionFailed if they moved on since.

    Each leaf the change touched must read as the change left it or as it was before (a
    partial revert by hand); every other leaf of those sections as the change left it.
    """
    now, after = flatten(live), flatten(dict(change.after))
    sections = {_section(c.path) for c in change.changes}
    changed = {c.path: (c.old, c.new) for c in change.changes}
    moved = sorted(
        path
        for path in set(now) | set(after)
        if _section(path) in sections
        and (
            now.get(path) not in changed[path]
            if path in changed
            else now.get(path) != after.get(path)
        )
    )
    if moved:
        raise ActionFailed(
            f"{change.model}: the config changed again since ({', '.join(moved[:3])}); "
            "reverting would undo that too, so nothing was changed"
        )
    before = dict(change.before)
    return ConfigPatch(
        set={s: before[s] for s in sorted(sections) if s in before},
        remove=tuple(s for s in sorted(sections) if s not in before and s in live),
    )


async def _plan(ctx: ActionContext, params: RevertConfigParams) -> dict[str, Any]:
    change = _change(ctx)
    live = await ctx.read_config(change.model)
    planned: dict[str, Any] = {"model": change.model, "reverts": change.summary()}
    if live is None:
        return {**planned, "config_known": False}
    _, changes = patched(replace(ctx, restoring=True), live, revert_patch(change, live))
    return {**planned, "changes": [c.as_dict() for c in changes]}


@action("triton.revert_config", RevertConfigParams, reloads_model=True, plan=_plan)
async def revert_config(ctx: ActionContext, params: RevertConfigParams) -> ActionResult:
    """Put back the sections of the model config the incident's preceding change touched."""
    change = _change(ctx)
    live = await ctx.need_triton().model_config(change.model)
    patch = revert_patch(change, live)
    result = await reload_with_patch(
        replace(ctx, restoring=True),
        change.model,
        patch,
        params.ready_timeout,
        restore_on_resolve=False,
    )
    result.detail["reverts"] = change.summary()
    return result
