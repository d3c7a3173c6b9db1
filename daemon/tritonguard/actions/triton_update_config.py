"""``triton.update_config``: patch a model's live config, reload it through the repository API."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from tritonguard.actions.config_reload import plan_patch, reload_with_patch
from tritonguard.actions.registry import ActionContext, ActionParams, ActionResult, action
from tritonguard.core.config_patch import ConfigPatch, PatchError, parse_path
from tritonguard.core.playbook_model import Duration


class UpdateConfigParams(ActionParams):
    """Paths are dotted with indices, e.g. ``dynamic_batching.max_queue_delay_microseconds``."""

    model: str | None = Field(None, description="model name; default: the incident's model")
    set: dict[str, Any] = Field(default_factory=dict, description="path → new value")
    add: dict[str, float] = Field(default_factory=dict, description="path → number to add")
    remove: list[str] = Field(default_factory=list, description="paths to delete")
    ready_timeout: Duration = Field(120.0, description="how long to wait for the model to be ready")
    restore_on_resolve: bool = Field(
        False, description="load the previous config again when the incident resolves"
    )

    @field_validator("set", "add")
    @classmethod
    def _paths(cls, value: dict[str, Any]) -> dict[str, Any]:
        for path in value:
            try:
                parse_path(path)
            except PatchError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> UpdateConfigParams:
        if not (self.set or self.add or self.remove):
            raise ValueError("give at least one of set, add, remove")
        return self

    def patch(self) -> ConfigPatch:
        """Return the config patch these parameters describe."""
        return ConfigPatch(set=self.set, add=self.add, remove=tuple(self.remove))


async def _plan(ctx: ActionContext, params: UpdateConfigParams) -> dict[str, Any]:
    return await plan_patch(ctx, params.model or ctx.subject.model, params.patch())


@action("triton.update_config", UpdateConfigParams, reloads_model=True, plan=_plan)
async def update_config(ctx: ActionContext, params: UpdateConfigParams) -> ActionResult:
    """Patch the model's live config and reload it explicitly; keeps the old config for rollback."""
    return await reload_with_patch(
        ctx,
        params.model or ctx.subject.model,
        params.patch(),
        params.ready_timeout,
        restore_on_resolve=params.restore_on_resolve,
    )
