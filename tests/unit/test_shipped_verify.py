"""The shipped too_few_instances verify: its latency bound comes from the incident's evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonguard.actions.verify import VerifyParams
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.templating import TemplateError, incident_context, render_value
from tritonguard.runtime.playbook_files import load_playbook_files

PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "too_few_instances.yaml"


def incident(**evidence_ms: float | None) -> IncidentEvent:
    """Return a too_few_instances incident whose evidence holds the given values (in ms)."""
    return IncidentEvent(
        event="opened",
        incident_id="inc-1",
        cause="too_few_instances",
        subject=Subject("prod", "detector", "triton-0"),
        at=1000.0,
        confidence=0.8,
        summary="all instances busy",
        evidence={k: Evidence(v, "ms", 60.0, k) for k, v in evidence_ms.items()},
        fix=Fix("raise instance_group.count"),
        opened_at=950.0,
    )


def verify_params(event: IncidentEvent) -> VerifyParams:
    """Render the shipped verify against ``event`` as the dispatcher does, and validate it."""
    [book] = load_playbook_files([PLAYBOOK])
    assert book.verify is not None
    return VerifyParams.model_validate(render_value(book.verify, incident_context(event)))


def test_bound_is_halfway_between_the_incident_latency_and_the_baseline() -> None:
    """400 ms at the incident, 40 ms healthy: latency must fall below 220 ms to pass."""
    params = verify_params(incident(mean_latency_ms=400.0, baseline_mean_latency_ms=40.0))
    [check] = params.checks
    assert check.feature == "mean_latency_us"
    assert check.below == pytest.approx(220_000.0)
    assert check.judge(45_000.0) is None  # the queue drained: latency near compute time
    assert check.judge(400_000.0) is not None  # a fix that added no capacity
    assert check.judge(None) is not None  # no fresh data never passes


def test_without_a_baseline_latency_must_halve() -> None:
    """A model with no healthy history yet: the bound is half the incident's latency."""
    params = verify_params(incident(mean_latency_ms=300.0))
    assert params.checks[0].below == pytest.approx(150_000.0)


def test_an_incident_without_latency_evidence_cannot_render_a_bound() -> None:
    """Missing latency evidence is an error at render time, never a bound of zero or nothing."""
    with pytest.raises(TemplateError, match="mean_latency_ms"):
        verify_params(incident(mean_latency_ms=None, baseline_mean_latency_ms=40.0))
