"""The live lab's account of a missed fault: what the engine last concluded of the subject."""

from __future__ import annotations

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Subject
from tritonguard.core.replay import drive
from tritonguard.lab.live_lab import engine_view

SUBJECT = Subject(namespace="prod", model="resnet", pod="triton-0")


def _engine(phases: list[Phase]) -> Engine:
    """Return an engine that replayed the phases at 2 s scrapes, evaluating at every one."""
    engine = Engine()
    series = triton_model(phases, interval=2.0)
    for _ in drive(engine, samples_of(series, interval=2.0), eval_interval_s=2.0):
        pass
    return engine


def test_a_subject_never_evaluated_says_so() -> None:
    """A subject the engine holds no evaluation of is named as such, not as healthy."""
    assert engine_view(Engine(), SUBJECT) == "no fresh evaluation of the subject"


def test_a_healthy_subject_shows_no_symptom_and_its_features() -> None:
    """Steady traffic: a baseline, no symptom, no finding, and the latency it was judged on."""
    view = engine_view(_engine([Phase(n=60, rps=50.0)]), SUBJECT)
    parts = view.split("; ")
    assert parts[:3] == ["no symptom", "baseline", "no finding"]
    assert "request_rate=50" in parts[3]
    assert "mean_latency_us=" in parts[3]


def test_a_queueing_subject_names_its_symptom_and_findings_most_confident_first() -> None:
    """Queueing that doubles latency: the symptom's reasons and each finding's confidence."""
    engine = _engine([Phase(n=60, rps=50.0), Phase(n=20, rps=50.0, queue_ms=40.0)])
    view = engine_view(engine, SUBJECT)
    symptom, based, findings = view.split("; ")[:3]
    assert symptom.startswith("symptom: ")
    assert based == "baseline"
    assert findings.startswith("findings: ")
    confidences = [float(item.rsplit(" ", 1)[1]) for item in findings[10:].split(", ")]
    assert confidences == sorted(confidences, reverse=True)
