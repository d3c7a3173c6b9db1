"""Change steps left in flight by a stopped daemon: the pure decisions and the lease handover."""

from __future__ import annotations

import json

import pytest

from tests import handed_rows
from tests.playbook_harness import incident
from tritonguard.actions.registry import catalog
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_decisions import (
    Decision,
    Ledger,
    PendingIntent,
    RestoreIntent,
    RunPlaybook,
    SkipPlaybook,
    StepContext,
    decide_step,
)
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.core.run_handover import (
    MAX_VERIFICATIONS_BYTES,
    Handed,
    HandedIntent,
    HandedVerification,
    decode_verifications,
    encode_verifications,
)

RELOAD = """
name: lower
when: {causes: [cpu_bottleneck]}
steps:
  - action: triton.update_config
    params: {set: {dynamic_batching.max_queue_delay_microseconds: 500}}
"""


def books(text: str = RELOAD) -> list[Playbook]:
    """Return the playbooks of ``text``."""
    return load_playbooks_text(text, "inline.yaml", catalog())


def pending(pod: str = "triton-0", intent_id: int = 7) -> PendingIntent:
    """Return a reload left in flight on ``pod``, with one earlier undo."""
    return PendingIntent(
        intent_id=intent_id,
        incident=incident(pod=pod, kind="updated", at=4000.0),
        playbook="lower",
        action="triton.update_config",
        undo_action="triton.load",
        undo_params={"model": "resnet", "config": {"name": "resnet"}},
        undo_ids=(3,),
        started_at=4000.0,
    )


def ctx(
    playbooks: list[Playbook], ledger: Ledger, *, leader_elsewhere: str | None = None
) -> StepContext:
    """Return a step context at t=5000 where nothing is fresh (restores need no data)."""
    return StepContext(
        playbooks=playbooks,
        ledger=ledger,
        settings=GuardSettings(dry_run=False),
        now=5000.0,
        fresh=lambda s: False,
        alerts_for=lambda e: frozenset(),
        reloads=lambda b: True,
        leader_elsewhere=leader_elsewhere,
    )


def kinds(decisions: list[Decision]) -> list[str]:
    """Name each decision by its type."""
    return [type(d).__name__ for d in decisions]


def test_a_change_left_in_flight_is_restored_first_even_without_fresh_data() -> None:
    """Outcome unknown: the state from before it is put back at once, before anything else.

    Nothing about the subject is fresh: an undo of an unknown change is safe either way,
    so it does not wait for data the way a verification does.
    """
    left = pending()
    out = decide_step([], [], ctx([], Ledger(intents=(left,))))
    assert out == [RestoreIntent(left)]


def test_the_subject_being_restored_counts_as_busy_for_every_playbook_in_that_step() -> None:
    """A playbook due on the subject in the same step is skipped (busy), not run after it.

    Another subject's playbook is not held up.
    """
    left = pending(pod="triton-0")
    here = incident(pod="triton-0")
    there = incident(pod="triton-1", model="bert")
    playbooks = books(RELOAD)
    fresh = StepContext(
        playbooks=playbooks,
        ledger=Ledger(intents=(left,)),
        settings=GuardSettings(dry_run=False),
        now=5000.0,
        fresh=lambda s: True,
        alerts_for=lambda e: frozenset(),
        reloads=lambda b: True,
    )
    out = decide_step([here, there], [], fresh)
    assert kinds(out)[0] == "RestoreIntent"
    skips = [d for d in out if isinstance(d, SkipPlaybook)]
    assert {(d.incident.subject.pod, d.guard) for d in skips} == {("triton-0", "busy")}
    runs = [d for d in out if isinstance(d, RunPlaybook)]
    assert [d.incident.subject.pod for d in runs] == ["triton-1"]


def test_a_follower_leaves_the_change_to_the_leader() -> None:
    """Only the leader acts: a follower holding the handed intent decides nothing about it."""
    out = decide_step([], [], ctx([], Ledger(intents=(pending(),)), leader_elsewhere="b leads"))
    assert out == []


def test_a_subject_still_busy_waits_for_its_work_to_finish() -> None:
    """Work in flight on the subject (its restore already running) is never overtaken."""
    left = pending()
    ledger = Ledger(intents=(left,), busy=frozenset({left.incident.subject.key()}))
    assert decide_step([], [], ctx([], ledger)) == []


def handed_intent(started_at: float = 4000.0, size: int = 10) -> HandedIntent:
    """Return a reload in flight as the leader publishes it."""
    return handed_rows.handed_intent(
        playbook="lower",
        cause="batching_delay",
        opened_at=3900.0,
        started_at=started_at,
        undo=("triton.load", {"model": "resnet", "config": {"name": "resnet", "pad": "x" * size}}),
        undos=(("kubernetes.scale", {"name": "triton", "replicas": 2}),),
    )


def handed_check(started_at: float = 4100.0) -> HandedVerification:
    """Return a pending verification as the leader publishes it."""
    return handed_rows.handed_verification(
        incident_id="inc-2", pod="triton-1", started_at=started_at
    )


def test_changes_in_flight_travel_with_the_verifications_and_come_back_whole() -> None:
    """Both kinds round-trip through one annotation; intents sit under their own key."""
    items: list[Handed] = [handed_check(), handed_intent()]
    text, left_out = encode_verifications(items)
    assert left_out == 0
    assert set(json.loads(text)) == {"v", "verifications", "intents"}
    back = decode_verifications(text)
    assert sorted(back, key=lambda h: h.started_at) == [handed_intent(), handed_check()]


def test_an_annotation_from_before_intents_still_reads() -> None:
    """An older leader's annotation has no ``intents`` key: its verifications still arrive."""
    text, _ = encode_verifications([handed_check()])
    assert "intents" not in json.loads(text)
    assert decode_verifications(text) == [handed_check()]


def test_changes_in_flight_are_kept_before_verifications_within_the_byte_cap() -> None:
    """Past the cap, verifications are left out before any change in flight is."""
    big = handed_intent(size=MAX_VERIFICATIONS_BYTES // 2)
    checks = [handed_check(4100.0 + i) for i in range(3000)]
    text, left_out = encode_verifications([*checks, big])
    assert left_out > 0
    assert len(text.encode()) < 256 * 1024  # what Kubernetes allows for all annotations
    assert big in decode_verifications(text)


@pytest.mark.parametrize(
    ("intents", "says"),
    [
        ({}, "'intents' must be a list"),
        ([{"incident": "i"}], "change in flight 0 is malformed"),
    ],
)
def test_a_malformed_change_in_flight_is_refused_with_the_reason(
    intents: object, says: str
) -> None:
    """Another replica's change in flight is never guessed at: a bad one raises, naming it."""
    text = json.dumps({"v": 1, "verifications": [], "intents": intents})
    with pytest.raises(ValueError, match=says):
        decode_verifications(text)
