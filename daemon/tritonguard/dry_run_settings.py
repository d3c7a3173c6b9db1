"""The two dry-run switches: notifications (steps that only tell people) and remediation."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class DryRunSettings(BaseModel):
    """Which kinds of playbook step only plan; the old ``dry_run: true|false`` sets both.

    A notification step is one whose action only tells people (``slack.post``: its registry
    kind is ``notify``); every other step (Triton reloads, scaling, verification) is
    remediation. A playbook's own ``guards.dry_run: true`` still plans both kinds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    notify: bool = Field(True, description="plan notifications instead of posting them")
    remediate: bool = Field(True, description="plan remediation instead of acting on servers")

    @model_validator(mode="before")
    @classmethod
    def _one_boolean_sets_both(cls, data: Any) -> Any:
        # Configs written before the split say ``dry_run: true|false`` (and the env var
        # TRITONGUARD_DRY_RUN=true|false): that meant every step, so it sets both switches.
        if isinstance(data, bool):
            return {"notify": data, "remediate": data}
        return data

    def as_dict(self) -> dict[str, bool]:
        """Return both switches, for /readyz and the start-up log line."""
        return {"notify": self.notify, "remediate": self.remediate}


def expand_boolean(data: dict[str, Any]) -> dict[str, Any]:
    """Return config-file data with an old boolean ``dry_run`` spelt as both switches."""
    # Before the environment is merged in: TRITONGUARD_DRY_RUN__NOTIFY=true over a file's
    # ``dry_run: false`` must leave remediation off, not fall back to the default.
    value = data.get("dry_run")
    if isinstance(value, bool):
        return {**data, "dry_run": {"notify": value, "remediate": value}}
    return data
