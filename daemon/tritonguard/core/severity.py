"""How bad an incident is for its users, from its own evidence: critical, high or warning."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tritonguard.core.findings import Evidence, IncidentEvent

Severity = Literal["critical", "high", "warning"]
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "warning")

# Evidence that counts requests failing, as shares of all requests.
_FAILURE_SHARES = ("ingress_timeouts_share", "triton_canceled_share")
# Pairs of (latency now, the model's healthy latency), the most telling first.
_LATENCY_PAIRS = (
    ("p99_ms", "baseline_p99_ms"),
    ("mean_latency_ms", "baseline_mean_latency_ms"),
)


class SeverityRules(BaseModel):
    """When an incident is critical or high; below both it is a warning.

    Severity is what users feel: requests failing, or latency a multiple of the model's own
    healthy latency. The cause alone says nothing about it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    critical_failure_share: float = Field(
        0.05, ge=0, le=1, description="Requests timing out or cancelled: at least this share."
    )
    critical_latency_factor: float = Field(
        10.0, gt=1, description="Latency at least this many times its healthy value."
    )
    high_latency_factor: float = Field(
        3.0, gt=1, description="Latency at least this many times its healthy value."
    )


def _value(evidence: dict[str, Evidence], name: str) -> float | None:
    e = evidence.get(name)
    return None if e is None else e.value


def latency_factor(evidence: dict[str, Evidence]) -> float | None:
    """Return latency now over the model's healthy latency, or None without a baseline.

    For a cold start (no history) the first requests are set against the steady execution.
    """
    for now_name, base_name in _LATENCY_PAIRS:
        now, base = _value(evidence, now_name), _value(evidence, base_name)
        if now is not None and base:
            return now / base
    early, steady = (
        _value(evidence, "early_mean_latency_ms"),
        _value(evidence, "steady_compute_per_exec_ms"),
    )
    if early is not None and steady:
        return early / steady
    return None


def severity(event: IncidentEvent, rules: SeverityRules | None = None) -> Severity:
    """Return the incident's severity under ``rules`` (the defaults without)."""
    r = rules or SeverityRules()
    ev = event.evidence
    failing = max((v for n in _FAILURE_SHARES if (v := _value(ev, n)) is not None), default=0.0)
    factor = latency_factor(ev)
    if failing >= r.critical_failure_share or (
        factor is not None and factor >= r.critical_latency_factor
    ):
        return "critical"
    if factor is not None and factor >= r.high_latency_factor:
        return "high"
    return "warning"
