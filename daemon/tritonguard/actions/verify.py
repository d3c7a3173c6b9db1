"""``verify``: wait, then check features of the incident's subject; failing triggers rollback."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field, field_validator, model_validator

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)
from tritonguard.core.features import FeatureSet
from tritonguard.core.playbook_model import Duration

FEATURES: frozenset[str] = frozenset(
    f.name
    for f in dataclasses.fields(FeatureSet)
    if f.name not in ("window_s", "interval_s", "fresh")
)


class Check(ActionParams):
    """One feature bound: the check passes when the value is known and within it."""

    feature: str
    below: float | None = None
    above: float | None = None

    @field_validator("feature")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in FEATURES:
            raise ValueError(f"unknown feature {value!r}; use one of {', '.join(sorted(FEATURES))}")
        return value

    @model_validator(mode="after")
    def _has_bound(self) -> Check:
        if self.below is None and self.above is None:
            raise ValueError("give below or above")
        return self

    def judge(self, value: float | None) -> str | None:
        """Return None when ``value`` passes, else why it does not."""
        if value is None:
            return f"{self.feature} is unknown (no fresh data)"
        if self.below is not None and not value < self.below:
            return f"{self.feature}={value:.6g} is not below {self.below:.6g}"
        if self.above is not None and not value > self.above:
            return f"{self.feature}={value:.6g} is not above {self.above:.6g}"
        return None


class VerifyParams(ActionParams):
    """Wait, then require every check to pass."""

    wait: Duration = Field(60.0, description="time for the fix to take effect")
    checks: list[Check] = Field(min_length=1)


async def _plan(ctx: ActionContext, params: VerifyParams) -> dict[str, Any]:
    return {
        "wait_s": params.wait,
        "checks": [c.model_dump(exclude_none=True) for c in params.checks],
    }


@action("verify", VerifyParams, kind="check", plan=_plan)
async def verify(ctx: ActionContext, params: VerifyParams) -> ActionResult:
    """Wait, then check the subject's features; failing makes the playbook roll back."""
    await ctx.sleep(params.wait)
    values = {c.feature: ctx.feature_value(ctx.subject, c.feature) for c in params.checks}
    problems = [p for c in params.checks if (p := c.judge(values[c.feature])) is not None]
    if problems:
        raise ActionFailed("verify failed: " + "; ".join(problems))
    return ActionResult(detail={"values": values})
