"""``triton.load``: load or reload a model, optionally replacing its configuration."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import (
    ActionContext,
    ActionParams,
    ActionResult,
    UndoStep,
    action,
)
from tritonguard.core.playbook_model import Duration


class LoadParams(ActionParams):
    """A load through ``POST /v2/repository/models/{m}/load``."""

    model: str | None = Field(None, description="model name; default: the incident's model")
    config: dict[str, Any] | None = Field(None, description="replacement model configuration")
    ready_timeout: Duration = 120.0


async def _plan(ctx: ActionContext, params: LoadParams) -> dict[str, Any]:
    return {"model": params.model or ctx.subject.model, "config": params.config is not None}


@action("triton.load", LoadParams, reloads_model=True, plan=_plan)
async def load(ctx: ActionContext, params: LoadParams) -> ActionResult:
    """Load (or reload) the model and wait until it is ready; a replaced config can be undone."""
    triton = ctx.need_triton()
    model = params.model or ctx.subject.model
    undo: UndoStep | None = None
    if params.config is not None and not ctx.restoring:
        # A replacement config is a change like triton.update_config: keep the config it
        # replaces. A model that is not being served has none, and nothing to put back. Undos
        # and restores (``restoring``) are this action too; they need no way back.
        try:
            previous = await triton.model_config(model)
        except Exception:  # the client's error: the model is not loaded (or not readable)
            previous = None
        if previous is not None:
            undo = UndoStep(
                "triton.load",
                {"model": model, "config": previous, "ready_timeout": params.ready_timeout},
            )
            ctx.intend(undo)
    await triton.load(model, params.config, timeout_s=params.ready_timeout)
    await triton.wait_model_ready(model, timeout_s=params.ready_timeout)
    return ActionResult(
        detail={"model": model, "config_replaced": params.config is not None}, undo=undo
    )
