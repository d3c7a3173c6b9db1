"""What the end-to-end tests demand of one way of watching the lab (shared by both tests)."""

from __future__ import annotations

from tritonguard.lab.live_lab import Outcome, evidence_view


def describe(outcome: Outcome, way: str) -> str:
    """One line saying what the daemon concluded about a scenario, for assertion messages."""
    found = outcome.detections.get(way)
    seen = ", ".join(
        f"{e.event} {e.cause} at {e.at - (outcome.onset_at or e.at):+.0f}s ({evidence_view(e)})"
        for e in outcome.other.get(way, [])
    )
    head = f"{outcome.name} ({way}): "
    head += f"detected after {found.delay_s:.0f}s" if found else "not detected"
    view = outcome.undiagnosed.get(way)
    unsent = ", ".join(f"{n} x {kind}" for kind, n in outcome.client_errors.items())
    return (
        head
        + (f"; other incidents: {seen}" if seen else "")
        + (f"; the engine at the fault's end: {view}" if view and not found else "")
        + (f"; requests no server answered: {unsent}" if unsent else "")
    )


def check_fault(outcome: Outcome, way: str, max_delay_s: float) -> None:
    """Demand the fault's cause on its model within ``max_delay_s`` of onset, no false alarm."""
    found = outcome.detections.get(way)
    assert found is not None, describe(outcome, way)
    assert found.event.cause == outcome.cause
    assert found.event.subject.model == outcome.model
    assert found.event.subject.namespace == outcome.namespace
    assert 0 <= found.delay_s <= max_delay_s, describe(outcome, way)
    assert outcome.onset_at is not None
    early = [e for e in outcome.other.get(way, []) if e.at < outcome.onset_at]
    assert not early, describe(outcome, way)
    wrong_first = [e for e in outcome.other.get(way, []) if e.at < found.at]
    assert not wrong_first, describe(outcome, way)
    assert found.event.evidence, "a diagnosis carries its evidence"
    assert found.event.fix.text, "a diagnosis carries its fix"


def check_control(outcome: Outcome, way: str) -> None:
    """Demand that a healthy control opened nothing at all."""
    assert outcome.cause is None
    assert not outcome.detections.get(way)
    assert not outcome.other.get(way), describe(outcome, way)
