"""``triton.shed_load``: a REJECT queue policy so excess requests fail fast; restored on resolve."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.config_reload import plan_patch, reload_with_patch
from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)
from tritonguard.core.config_patch import ConfigPatch
from tritonguard.core.playbook_model import Duration

_POLICY = "dynamic_batching.default_queue_policy"


class ShedLoadParams(ActionParams):
    """Queue policy of the dynamic batcher (the model must use dynamic batching)."""

    model: str | None = Field(None, description="model name; default: the incident's model")
    max_queue_size: int = Field(ge=1, description="requests beyond this queue length are rejected")
    default_timeout_microseconds: int = Field(
        ge=1, description="requests queued longer than this are rejected"
    )
    restore_on_resolve: bool = Field(True, description="put the old policy back on resolve")
    ready_timeout: Duration = 120.0

    def patch(self) -> ConfigPatch:
        """Return the config patch that sets the policy."""
        return ConfigPatch(
            set={
                f"{_POLICY}.timeout_action": "REJECT",
                f"{_POLICY}.max_queue_size": self.max_queue_size,
                f"{_POLICY}.default_timeout_microseconds": self.default_timeout_microseconds,
            }
        )


async def _plan(ctx: ActionContext, params: ShedLoadParams) -> dict[str, Any]:
    return await plan_patch(ctx, params.model or ctx.subject.model, params.patch())


@action("triton.shed_load", ShedLoadParams, reloads_model=True, plan=_plan)
async def shed_load(ctx: ActionContext, params: ShedLoadParams) -> ActionResult:
    """Make excess requests fail fast with a REJECT queue policy; restore it when resolved."""
    model = params.model or ctx.subject.model
    config = await ctx.need_triton().model_config(model)
    if "dynamic_batching" not in config:
        raise ActionFailed(f"{model} has no dynamic_batching; a queue policy needs the batcher")
    return await reload_with_patch(
        ctx,
        model,
        params.patch(),
        params.ready_timeout,
        restore_on_resolve=params.restore_on_resolve,
    )
