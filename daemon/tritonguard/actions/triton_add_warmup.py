"""``triton.add_warmup``: write model_warmup (built from the model's inputs) and reload it."""

from __future__ import annotations

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
from tritonguard.core.config_patch import ConfigPatch
from tritonguard.core.model_warmup import WarmupError, warmup_from_inputs
from tritonguard.core.playbook_model import Duration


class AddWarmupParams(ActionParams):
    """Zero-data warm-up samples for every required input; Triton runs them before Ready."""

    model: str | None = Field(None, description="model name; default: the incident's model")
    count: int = Field(8, ge=1, le=100, description="warm-up executions per model instance")
    batch_size: int = Field(1, ge=1, le=1024, description="capped at the model's max_batch_size")
    variable_dim: int = Field(1, ge=1, le=4096, description="size used for each -1 dimension")
    ready_timeout: Duration = Field(300.0, description="loading now includes the warm-up")


def _warmup_patch(config: dict[str, Any], params: AddWarmupParams) -> ConfigPatch | None:
    """Return the patch adding model_warmup, or None when the config already has one."""
    if config.get("model_warmup"):
        return None
    try:
        warmup = warmup_from_inputs(
            config,
            count=params.count,
            batch_size=params.batch_size,
            variable_dim=params.variable_dim,
        )
    except WarmupError as exc:
        raise ActionFailed(str(exc)) from None
    return ConfigPatch(set={"model_warmup": warmup})


async def _plan(ctx: ActionContext, params: AddWarmupParams) -> dict[str, Any]:
    model = params.model or ctx.subject.model
    config = await ctx.read_config(model)
    if config is None:
        return {"model": model, "config_known": False}
    patch = _warmup_patch(config, params)
    if patch is None:
        return {"model": model, "changes": [], "note": "model_warmup already configured"}
    _, changes = patched(ctx, config, patch)
    return {"model": model, "changes": [c.as_dict() for c in changes]}


@action("triton.add_warmup", AddWarmupParams, reloads_model=True, plan=_plan)
async def add_warmup(ctx: ActionContext, params: AddWarmupParams) -> ActionResult:
    """Add model_warmup from the live config's inputs and reload, so every load is warm first."""
    model = params.model or ctx.subject.model
    config = await ctx.need_triton().model_config(model)
    patch = _warmup_patch(config, params)
    if patch is None:
        return ActionResult(
            detail={"model": model, "changes": [], "note": "model_warmup already configured"}
        )
    return await reload_with_patch(
        ctx, model, patch, params.ready_timeout, restore_on_resolve=False
    )
