"""Incident state machine: hold before opening, one primary per subject, hysteresis, staleness."""

from __future__ import annotations

from tritonguard.core.findings import Finding, Fix, Subject
from tritonguard.core.incidents import IncidentBook
from tritonguard.core.thresholds import Thresholds

S = Subject("prod", "resnet", "triton-0")


def finding(cause: str, conf: float) -> Finding:
    """Build a finding for the test subject."""
    return Finding(cause, S, conf, f"{cause} summary", {}, Fix("do something"))


def test_finding_must_hold_before_opening() -> None:
    """One evaluation never opens an incident; the second consecutive one does."""
    book = IncidentBook(Thresholds())
    assert book.observe(S, [finding("too_few_instances", 0.8)], 0.0, 5.0, recovered=False) == []
    evs = book.observe(S, [finding("too_few_instances", 0.8)], 5.0, 5.0, recovered=False)
    assert [e.event for e in evs] == ["opened"]


def test_a_settled_reading_opens_on_its_first_evaluation() -> None:
    """A reading whose evidence a later scrape already confirmed needs no second evaluation."""
    book = IncidentBook(Thresholds())
    settled = Finding("model_reload", S, 0.8, "reloads", {}, Fix("explicit mode"), settled=True)
    evs = book.observe(S, [settled], 0.0, 2.0, recovered=False)
    assert [(e.event, e.cause) for e in evs] == [("opened", "model_reload")]


def test_a_settled_reading_still_waits_for_a_stronger_one_forming() -> None:
    """A settled reading does not open past a stronger cause that is still on its hold."""
    book = IncidentBook(Thresholds())
    settled = Finding("model_reload", S, 0.7, "reloads", {}, Fix("explicit mode"), settled=True)
    both = [settled, finding("retry_storm", 0.85)]
    assert book.observe(S, both, 0.0, 2.0, recovered=False) == []
    evs = book.observe(S, both, 2.0, 2.0, recovered=False)
    assert [(e.event, e.cause) for e in evs] == [("opened", "retry_storm")]


def test_a_stronger_reading_forming_waits_out_its_hold_before_a_weaker_one_opens() -> None:
    """An overload read first, a retry storm a scrape later: the storm opens, not the overload."""
    book = IncidentBook(Thresholds())
    assert book.observe(S, [finding("too_few_instances", 0.85)], 0.0, 2.0, recovered=False) == []
    both = [finding("too_few_instances", 0.7), finding("retry_storm", 0.85)]
    assert book.observe(S, both, 2.0, 2.0, recovered=False) == []
    evs = book.observe(S, both, 4.0, 2.0, recovered=False)
    assert [(e.event, e.cause) for e in evs] == [("opened", "retry_storm")]


def test_flapping_finding_does_not_open() -> None:
    """A finding that comes and goes between evaluations restarts its hold timer."""
    book = IncidentBook(Thresholds())
    for t in range(0, 60, 10):
        f = [finding("batching_delay", 0.8)] if t % 20 == 0 else []
        assert book.observe(S, f, float(t), 5.0, recovered=False) == []


def test_low_confidence_never_opens() -> None:
    """Below the open threshold a finding is a hint, not an incident."""
    book = IncidentBook(Thresholds())
    for t in range(0, 60, 5):
        assert (
            book.observe(S, [finding("node_contention", 0.4)], float(t), 5.0, recovered=False) == []
        )


def test_primary_is_highest_confidence_and_others_are_secondary() -> None:
    """Several causes matching one symptom open one incident for the strongest."""
    book = IncidentBook(Thresholds())
    both = [finding("too_few_instances", 0.7), finding("retry_storm", 0.9)]
    evs = []
    for t in (0.0, 5.0, 10.0):
        evs += book.observe(S, both, t, 5.0, recovered=False)
    assert [(e.event, e.cause, e.secondary) for e in evs] == [
        ("opened", "retry_storm", ["too_few_instances"])
    ]


def test_resolution_needs_absence_and_recovery_for_the_hold_time() -> None:
    """Hysteresis: the finding must be gone and latency recovered for resolve_after_s."""
    t = Thresholds()
    book = IncidentBook(t)
    for now in (0.0, 5.0, 10.0):
        book.observe(S, [finding("too_few_instances", 0.8)], now, 5.0, recovered=False)
    # Gone but latency not recovered: stays open however long.
    for now in range(15, 200, 5):
        assert book.observe(S, [], float(now), 5.0, recovered=False) == []
    evs = []
    for now in range(200, 300, 5):
        evs += book.observe(S, [], float(now), 5.0, recovered=True)
    assert [e.event for e in evs] == ["resolved"]
    assert evs[0].at - 200 >= 0


def test_weak_finding_keeps_incident_open() -> None:
    """Between the close and open thresholds an open incident stays open (hysteresis band)."""
    book = IncidentBook(Thresholds())
    for now in (0.0, 5.0, 10.0):
        book.observe(S, [finding("memory_copy", 0.8)], now, 5.0, recovered=False)
    for now in range(15, 300, 5):
        assert book.observe(S, [finding("memory_copy", 0.4)], float(now), 5.0, recovered=True) == []
    assert book.is_open(S)


def test_clearly_stronger_cause_supersedes_the_open_incident() -> None:
    """Overload that turns into a retry storm: the storm replaces the weaker first diagnosis."""
    book = IncidentBook(Thresholds())
    evs = []
    for now in (0.0, 5.0, 10.0):
        evs += book.observe(S, [finding("too_few_instances", 0.7)], now, 5.0, recovered=False)
    both = [finding("too_few_instances", 0.6), finding("retry_storm", 0.95)]
    for now in (15.0, 20.0, 25.0, 30.0):
        evs += book.observe(S, both, now, 5.0, recovered=False)
    kinds = [(e.event, e.cause) for e in evs]
    assert kinds == [
        ("opened", "too_few_instances"),
        ("resolved", "too_few_instances"),
        ("opened", "retry_storm"),
    ]
    assert evs[1].summary.startswith("Superseded by retry_storm")


def test_slightly_stronger_cause_does_not_flip_the_incident() -> None:
    """Within the margin the first diagnosis stays; others remain secondary evidence."""
    book = IncidentBook(Thresholds())
    evs = []
    for now in range(0, 60, 5):
        fs = [finding("too_few_instances", 0.7)]
        if now >= 15:
            fs.append(finding("retry_storm", 0.8))
        evs += book.observe(S, fs, float(now), 5.0, recovered=False)
    assert [(e.event, e.cause) for e in evs if e.event != "updated"] == [
        ("opened", "too_few_instances")
    ]


def test_a_subject_that_stops_reporting_closes_without_recovery_evidence() -> None:
    """forget() resolves the open incident with recovered=False, which the JSON line says."""
    book = IncidentBook(Thresholds())
    for t in (0.0, 5.0, 10.0):
        book.observe(S, [finding("too_few_instances", 0.8)], t, 5.0, recovered=False)
    assert book.is_open(S)
    [closed] = book.forget(S, 900.0)
    assert closed.event == "resolved" and closed.recovered is False
    assert closed.as_dict()["recovered"] is False
