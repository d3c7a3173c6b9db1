"""``triton.unload``: unload a model from the server."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import ActionContext, ActionParams, ActionResult, UndoStep, action


class UnloadParams(ActionParams):
    """An unload through ``POST /v2/repository/models/{m}/unload``."""

    model: str | None = Field(None, description="model name; default: the incident's model")


async def _plan(ctx: ActionContext, params: UnloadParams) -> dict[str, Any]:
    return {"model": params.model or ctx.subject.model}


@action("triton.unload", UnloadParams, reloads_model=True, plan=_plan)
async def unload(ctx: ActionContext, params: UnloadParams) -> ActionResult:
    """Unload the model; undone by loading it again."""
    model = params.model or ctx.subject.model
    await ctx.need_triton().unload(model)
    return ActionResult(detail={"model": model}, undo=UndoStep("triton.load", {"model": model}))
