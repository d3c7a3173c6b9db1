"""The audit record of one playbook decision: ran, planned, skipped and why, failed, rolled back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal[
    "planned",
    "ran",
    "skipped",
    "failed",
    "rolled_back",
    "deferred",
    "cancelled",
    "resumed",
    # A step that waits for a human's yes in Slack, and how that ended.
    "awaiting_approval",
    "approved",
    "rejected",
    "expired",
]
Phase = Literal["step", "rollback", "escalate", "restore"]


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One decision, as written once to the audit store and shown in replay, tests and the API.

    ``action`` is ``"*"`` when a guard blocked the whole playbook before any step.
    """

    at: float
    incident_id: str
    event: str
    playbook: str
    subject: str
    action: str
    params: dict[str, Any]
    dry_run: bool
    status: Status
    guard: str = ""
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    phase: Phase = "step"

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form of ``actions`` in the CLI contract (replay, test, /api)."""
        out: dict[str, Any] = {
            "playbook": self.playbook,
            "action": self.action,
            "params": self.params,
            "dry_run": self.dry_run,
            "status": self.status,
            "reason": self.reason,
            "at": round(self.at, 3),
            "phase": self.phase,
        }
        if self.guard:
            out["guard"] = self.guard
        if self.detail:
            out["detail"] = self.detail
        return out
