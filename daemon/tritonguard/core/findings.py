"""Findings, evidence and incident events: what signatures produce and what playbooks consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tritonguard.core.config_changes import ConfigChange
    from tritonguard.core.fleet_groups import FleetGroup

# The cause catalogue of DESIGN.md. These identifiers are a public contract.
CAUSES: tuple[str, ...] = (
    "batching_delay",
    "too_few_instances",
    "too_many_instances",
    "cold_start",
    "cpu_bottleneck",
    "memory_copy",
    "model_reload",
    "node_contention",
    "retry_storm",
)


@dataclass(frozen=True, slots=True)
class Subject:
    """What an incident is about: a model, across a namespace, or on one pod."""

    namespace: str
    model: str
    pod: str = ""

    def key(self) -> str:
        """Return a stable string key, e.g. for cooldowns and audit rows."""
        return f"{self.namespace}/{self.pod or '*'}/{self.model}"

    @classmethod
    def from_key(cls, key: str) -> Subject | None:
        """Return the subject a ``key()`` names (pod ``*``: every pod), None if it names none.

        The model is the rest after the second slash, since a model name may hold slashes.
        """
        parts = key.split("/", 2)
        if len(parts) != 3 or not parts[0] or not parts[2]:
            return None
        namespace, pod, model = parts
        return cls(namespace, model, "" if pod == "*" else pod)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One number a finding used, with its unit and the window it was measured over.

    ``weight`` is how much the number decided the finding, as its signature judges it: 1 for
    a condition the signature cannot fire without, the confidence it adds for a corroborating
    sign, 0 for context. Messages show the heaviest evidence first.
    """

    value: float | None
    unit: str
    window_s: float
    what: str
    weight: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form used in replay output, Slack and the audit trail."""
        return {
            "value": None if self.value is None else round(self.value, 6),
            "unit": self.unit,
            "window_s": round(self.window_s, 3),
            "what": self.what,
            "weight": round(self.weight, 3),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        """Read the JSON form back (the Slack outbox and the CLI keep incidents as JSON)."""
        raw = data.get("value")
        return cls(
            value=None if raw is None else float(raw),
            unit=str(data.get("unit", "")),
            window_s=float(data.get("window_s", 0.0)),
            what=str(data.get("what", "")),
            weight=float(data.get("weight", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class Fix:
    """The concrete remediation: prose, a config snippet and/or server flags."""

    text: str
    config_snippet: str = ""
    flags: str = ""

    def as_dict(self) -> dict[str, str]:
        """Return the JSON form."""
        return {"text": self.text, "config_snippet": self.config_snippet, "flags": self.flags}


@dataclass(frozen=True, slots=True)
class Finding:
    """A signature's verdict for one subject at one evaluation time."""

    cause: str
    subject: Subject
    confidence: float
    summary: str
    evidence: dict[str, Evidence]
    fix: Fix
    # The reading rests only on signs a later scrape already confirmed (a burst of cold
    # executions counts as a reload once a warm scrape follows it): a second evaluation
    # would add nothing to it, so the incident book does not wait for one.
    settled: bool = False

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause id {self.cause!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence {self.confidence} outside 0..1")


EventKind = Literal["opened", "updated", "resolved"]


@dataclass(slots=True)
class IncidentEvent:
    """One incident transition, the record the CLI contract prints as a JSON line."""

    event: EventKind
    incident_id: str
    cause: str
    subject: Subject
    at: float
    confidence: float
    summary: str
    evidence: dict[str, Evidence]
    fix: Fix
    opened_at: float
    secondary: list[str] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    # On a resolution: whether fresh data showed the subject recovered. A subject that stopped
    # reporting is closed without that evidence, and what its playbooks changed stays.
    recovered: bool = True
    # The model-config change the incident followed, when one was seen (config_changes.py).
    change: ConfigChange | None = None
    # The fleet group the incident belongs to (its pods with the same cause on the same
    # model), as it stands after this transition; None for a subject without a pod.
    group: FleetGroup | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the contract JSON object (DESIGN.md, CLI contract).

        A resolution also says whether it came with recovery evidence (``recovered``); an
        incident on a pod names its fleet group (``group``: id, pods, count).
        """
        out = {
            "event": self.event,
            "id": self.incident_id,
            "cause": self.cause,
            "namespace": self.subject.namespace,
            "pod": self.subject.pod,
            "model": self.subject.model,
            "at": round(self.at, 3),
            "opened_at": round(self.opened_at, 3),
            "confidence": round(self.confidence, 3),
            "evidence": {k: v.as_dict() for k, v in self.evidence.items()},
            "summary": self.summary,
            "fix": self.fix.as_dict(),
            "secondary": list(self.secondary),
            "actions": list(self.actions),
        }
        if self.change is not None:
            out["change"] = self.change.as_dict(onset=self.opened_at)
        if self.event == "resolved":
            out["recovered"] = self.recovered
        if self.group is not None:
            out["group"] = self.group.as_dict()
        return out
