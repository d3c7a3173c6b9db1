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
    """Unload the model; undone by loading it again with the config it served."""
    triton = ctx.need_triton()
    model = params.model or ctx.subject.model
    # The live config, not the repository's: a model changed through the repository API
    # would come back from its files without those changes. Loading it again with the
    # config it served is also harmless if the unload never happened (a restart's restore).
    try:
        served: dict[str, Any] | None = await triton.model_config(model)
    except Exception:  # the client's error: not loaded, or not readable; load from the files
        served = None
    undo_params: dict[str, Any] = {"model": model}
    if served is not None:
        undo_params["config"] = served
    undo = UndoStep("triton.load", undo_params)
    ctx.intend(undo)
    await triton.unload(model)
    return ActionResult(detail={"model": model}, undo=undo)
