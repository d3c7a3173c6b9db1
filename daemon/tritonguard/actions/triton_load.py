"""``triton.load``: load or reload a model, optionally replacing its configuration."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import ActionContext, ActionParams, ActionResult, action
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
    """Load (or reload) the model and wait until it is ready."""
    triton = ctx.need_triton()
    model = params.model or ctx.subject.model
    await triton.load(model, params.config, timeout_s=params.ready_timeout)
    await triton.wait_model_ready(model, timeout_s=params.ready_timeout)
    return ActionResult(detail={"model": model, "config_replaced": params.config is not None})
