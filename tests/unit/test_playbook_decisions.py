"""The pure playbook decisions: what one evaluation's incidents should make the stage do."""

from __future__ import annotations

from tests.playbook_harness import incident, resolved
from tritonguard.actions.registry import catalog
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings, RunRecord, model_key
from tritonguard.core.playbook_decisions import (
    Decision,
    HandOver,
    Ledger,
    NoteOpen,
    Resolve,
    RunPlaybook,
    SkipPlaybook,
    StepContext,
    decide_step,
)
from tritonguard.core.playbook_model import Playbook, load_playbooks_text

RELOAD = """
name: {name}
when: {{causes: [{cause}], held_for: {held}}}
steps:
  - action: triton.update_config
    params: {{set: {{dynamic_batching.max_queue_delay_microseconds: 500}}}}
"""


def book(name: str = "lower", cause: str = "cpu_bottleneck", held: str = "0s") -> Playbook:
    """Return a playbook that reloads the model."""
    text = RELOAD.format(name=name, cause=cause, held=held)
    return load_playbooks_text(text, "inline.yaml", catalog())[0]


def ctx(books: list[Playbook], ledger: Ledger | None = None, **kw: object) -> StepContext:
    """Return a step context at t=5000 with fresh data and the given playbooks."""
    values: dict[str, object] = {
        "playbooks": books,
        "ledger": ledger or Ledger(),
        "settings": GuardSettings(dry_run=True),
        "now": 5000.0,
        "fresh": lambda s: True,
        "alerts_for": lambda e: frozenset(),
        "reloads": lambda b: True,
    }
    values.update(kw)
    return StepContext(**values)  # type: ignore[arg-type]  # the test's own literal overrides


def kinds(decisions: list[Decision]) -> list[str]:
    """Name each decision by its type."""
    return [type(d).__name__ for d in decisions]


def test_an_opening_notes_the_incident_and_runs_each_matching_playbook() -> None:
    """NoteOpen first, then one RunPlaybook per playbook whose cause and guards allow it."""
    ev = incident()
    out = decide_step([ev], [], ctx([book(), book("other", "batching_delay")]))
    assert kinds(out) == ["NoteOpen", "RunPlaybook"]
    assert isinstance(out[1], RunPlaybook) and out[1].playbook.name == "lower"
    assert out[1].dry_run is True


def test_a_resolution_replaced_on_its_subject_hands_its_restores_over_then_resolves() -> None:
    """A resolution and an opening on one subject in one batch: HandOver to the new incident, Resolve."""
    old = incident("too_few_instances")
    new = incident("retry_storm", pod=old.subject.pod)
    out = decide_step([resolved(old), new], [], ctx([]))
    assert kinds(out) == ["HandOver", "Resolve", "NoteOpen"]
    hand = out[0]
    assert isinstance(hand, HandOver) and hand.successor.incident_id == new.incident_id
    assert isinstance(out[1], Resolve) and out[1].incident.incident_id == old.incident_id


def test_a_plain_resolution_restores() -> None:
    """Without a successor, a resolution is a Resolve (restore-on-resolve runs there)."""
    out = decide_step([resolved(incident())], [], ctx([]))
    assert kinds(out) == ["Resolve"]


def test_held_for_runs_the_playbook_on_a_later_evaluation_of_the_open_incident() -> None:
    """A playbook held for 60 s does nothing at opening and runs once the incident is old enough."""
    ev = incident(at=5000.0)
    held = [book(held="60s")]
    assert kinds(decide_step([ev], [], ctx(held))) == ["NoteOpen"]
    assert kinds(decide_step([], [ev], ctx(held, now=5030.0))) == []
    later = decide_step([], [ev], ctx(held, now=5061.0))
    assert kinds(later) == ["RunPlaybook"]


def test_a_playbook_done_for_an_incident_is_not_run_again() -> None:
    """The ledger's done pairs keep later evaluations from repeating a run."""
    ev = incident()
    ledger = Ledger(done=frozenset({(ev.incident_id, "lower")}))
    assert decide_step([], [ev], ctx([book()], ledger)) == []


def test_a_guard_skip_is_decided_once_per_guard() -> None:
    """A cooldown blocks the playbook: one SkipPlaybook, then silence while the reason holds."""
    ev = incident()
    subject = ev.subject
    earlier = RunRecord("lower", subject.key(), model_key(subject), 4900.0, True, True)
    first = decide_step([ev], [], ctx([book()], Ledger(history=(earlier,))))
    assert kinds(first) == ["NoteOpen", "SkipPlaybook"]
    skip = first[1]
    assert isinstance(skip, SkipPlaybook) and skip.guard == "cooldown"
    recorded = Ledger(
        history=(earlier,), skipped=frozenset({(ev.incident_id, "lower", "cooldown")})
    )
    assert decide_step([], [ev], ctx([book()], recorded)) == []


def test_two_reloading_playbooks_in_one_step_honour_each_others_reload_cooldown() -> None:
    """The second sees the run the first just started: the model is not reloaded twice."""
    ev = incident()
    both = [book("first"), book("second")]
    out = decide_step([ev], [], ctx(both))
    assert kinds(out) == ["NoteOpen", "RunPlaybook", "SkipPlaybook"]
    assert isinstance(out[2], SkipPlaybook) and out[2].guard == "reload_cooldown"


def test_busy_subject_leader_elsewhere_and_stale_data_block() -> None:
    """Work in flight on the subject, another replica leading, or stale data: a skip, and why."""
    ev = incident()

    def guard(**kw: object) -> str:
        out = decide_step([ev], [], ctx([book()], None, **kw))
        skip = out[-1]
        assert isinstance(skip, SkipPlaybook)
        return skip.guard

    busy = ctx([book()], Ledger(busy=frozenset({ev.subject.key()})))
    skip = decide_step([ev], [], busy)[-1]
    assert isinstance(skip, SkipPlaybook) and skip.guard == "busy"
    assert guard(leader_elsewhere="replica b holds the leader lease") == "leader"
    assert guard(fresh=lambda s: False) == "stale"


def test_other_open_incidents_are_reconsidered_after_the_transitions() -> None:
    """An incident with a transition is considered once; other open ones after it."""
    a = incident(model="resnet")
    b = incident(model="bert")
    out = decide_step([a], [a, b], ctx([book()]))
    runs = [d for d in out if isinstance(d, RunPlaybook)]
    assert [r.incident.subject.model for r in runs] == ["resnet", "bert"]
    assert isinstance(out[0], NoteOpen)


def test_alert_matched_playbooks_follow_the_alert_book() -> None:
    """when.alerts matches only while the named alert fires for the incident's subject."""
    text = """
name: page
when: {alerts: [SLOBurn]}
steps:
  - action: slack.post
"""
    page = load_playbooks_text(text, "inline.yaml", catalog())[0]
    ev = incident(model="resnet")

    def firing(event: IncidentEvent) -> frozenset[str]:
        return (
            frozenset({"SLOBurn"})
            if event.subject == Subject("prod", "resnet", ev.subject.pod)
            else frozenset()
        )

    assert kinds(decide_step([ev], [], ctx([page]))) == ["NoteOpen"]
    assert kinds(decide_step([ev], [], ctx([page], alerts_for=firing))) == [
        "NoteOpen",
        "RunPlaybook",
    ]


def test_restores_of_an_incident_closed_without_evidence_wait_for_recovery() -> None:
    """A subject that went silent: nothing until fresh data shows it recovered, then Resolve."""
    gone = resolved(incident())
    ledger = Ledger(awaiting=(gone,))
    assert decide_step([], [], ctx([], ledger)) == []
    back = decide_step([], [], ctx([], ledger, recovered=lambda s: s == gone.subject))
    assert kinds(back) == ["Resolve"]
    assert isinstance(back[0], Resolve) and back[0].incident.incident_id == gone.incident_id
    assert back[0].incident.recovered is True


def test_a_new_incident_on_a_silent_subject_takes_its_restores_over() -> None:
    """The subject came back still broken: the new incident inherits the waiting restores."""
    gone = resolved(incident("retry_storm"))
    again = incident("too_few_instances", pod=gone.subject.pod)
    out = decide_step([again], [], ctx([], Ledger(awaiting=(gone,))))
    assert kinds(out) == ["HandOver", "NoteOpen"]
    hand = out[0]
    assert isinstance(hand, HandOver)
    assert (hand.resolved.incident_id, hand.successor.incident_id) == (
        gone.incident_id,
        again.incident_id,
    )


def test_a_verification_left_without_verdict_is_judged_when_due_or_abandoned_when_blind() -> None:
    """Due with fresh data: ResumeVerify; no data: wait one more wait, then AbandonVerify."""
    from tritonguard.core.playbook_decisions import (
        AbandonVerify,
        PendingVerification,
        ResumeVerify,
    )

    ev = incident()
    pending = PendingVerification(
        7, ev, "lower", ({"feature": "queue_share", "below": 0.5},), 60.0, 4990.0, (1,)
    )
    ledger = Ledger(verifications=(pending,))
    assert decide_step([], [], ctx([], ledger, now=5000.0)) == []  # not due before 5050
    [resume] = decide_step([], [], ctx([], ledger, now=5051.0))
    assert isinstance(resume, ResumeVerify) and resume.verification is pending
    blind = {"fresh": lambda s: False}
    assert decide_step([], [], ctx([], ledger, now=5100.0, **blind)) == []
    [give_up] = decide_step([], [], ctx([], ledger, now=5111.0, **blind))
    assert isinstance(give_up, AbandonVerify)
    elsewhere = decide_step([], [], ctx([], ledger, now=5051.0, leader_elsewhere="b leads"))
    assert elsewhere == []  # only the leader judges it
