"""The pure parts of Kubernetes Events and owner-aware scaling: notes, series, the workload."""

from __future__ import annotations

from dataclasses import replace

from tests.playbook_harness import incident, resolved
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.cluster_events import (
    NOTE_LIMIT,
    SeriesBook,
    note_for_incident,
    note_for_record,
)
from tritonguard.core.config_changes import ChangeTimeline
from tritonguard.core.findings import Subject
from tritonguard.core.fleet_groups import FleetGroup, GroupKey
from tritonguard.core.pod_targets import OwnerRef, workload_of


def _record(
    status: str, *, pod: str = "triton-0", action: str = "kubernetes.scale"
) -> ActionRecord:
    return ActionRecord(
        at=1.0,
        incident_id="inc-1",
        event="opened",
        playbook="cpu-bottleneck-scale-out",
        subject=Subject("prod", "team/resnet", pod).key(),
        action=action,
        params={},
        dry_run=False,
        status=status,  # type: ignore[arg-type]  # every status under test is a valid one
        guard="cooldown" if status == "skipped" else "",
    )


def test_incident_notes_say_cause_model_and_fix_and_skip_updates() -> None:
    """Opened is a Warning with the summary and fix; resolved is Normal; updates say nothing."""
    opened = incident(pod="triton-0", incident_id="inc-9", at=100.0, opened_at=100.0)
    note = note_for_incident(opened)
    assert note is not None
    assert (note.reason, note.type, note.action, note.pod) == (
        "IncidentOpened",
        "Warning",
        "Diagnose",
        "triton-0",
    )
    assert note.note.startswith("cpu_bottleneck on model resnet (confidence 0.80): ")
    assert "Fix: raise the CPU limit [incident inc-9]" in note.note
    done = note_for_incident(resolved(opened, at=400.0))
    assert done is not None
    assert (done.reason, done.type, done.topic) == ("IncidentResolved", "Normal", note.topic)
    assert "resolved after 5m: recovered" in done.note
    updated = incident(kind="updated", pod="triton-0")
    assert note_for_incident(updated) is None
    assert note_for_incident(incident(pod="")) is None


def test_record_notes_cover_ran_skipped_failed_rolled_back_only() -> None:
    """Decisions that touch or refuse a change become Events; plans and deferrals do not."""
    reasons = {s: note_for_record(_record(s)) for s in ("ran", "skipped", "failed", "rolled_back")}
    assert {s: (n.reason, n.type) for s, n in reasons.items() if n} == {
        "ran": ("ActionRan", "Normal"),
        "skipped": ("ActionSkipped", "Normal"),
        "failed": ("ActionFailed", "Warning"),
        "rolled_back": ("ActionRolledBack", "Warning"),
    }
    skipped = reasons["skipped"]
    assert skipped is not None and skipped.note.endswith("cooldown [incident inc-1]")
    assert "on model team/resnet" in skipped.note
    for status in ("planned", "deferred", "cancelled", "resumed"):
        assert note_for_record(_record(status)) is None
    assert note_for_record(_record("ran", pod="*")) is None
    whole = note_for_record(_record("skipped", action="*"))
    assert whole is not None and whole.action == "Playbook"
    follower = replace(_record("skipped", action="*"), guard="leader")
    assert note_for_record(follower) is None


def test_notes_are_clipped_to_the_api_limit() -> None:
    """A long summary is cut to the 1 KiB events.k8s.io/v1 allows."""
    long = incident(pod="p")
    long.summary = "x" * 5000
    note = note_for_incident(long)
    assert note is not None and len(note.note) == NOTE_LIMIT and note.note.endswith("…")


def test_series_book_creates_patches_holds_and_restarts() -> None:
    """First: create. Repeat: patch, or hold within the interval until due. Quiet: new Event."""
    book = SeriesBook(window_s=100.0, min_interval_s=10.0)
    key = ("Pod", "prod", "p", "IncidentOpened")
    assert book.observe(key, 0.0) == ("create", None)
    book.created(key, "p.1", 0.0)
    decision, entry = book.observe(key, 5.0)
    assert decision == "hold" and entry is not None and entry.count == 2
    assert book.due(9.0) == []
    [(due_key, due)] = book.due(10.0)
    assert due_key == key and due.count == 2
    book.written(due, 10.0)
    assert book.due(30.0) == []
    decision, entry = book.observe(key, 25.0)
    assert decision == "patch" and entry is not None and entry.count == 3
    assert book.observe(key, 200.0) == ("create", None)
    book.forget(key)
    assert book.observe(key, 201.0) == ("create", None)


def test_series_book_stays_bounded() -> None:
    """Past max_entries, the entry seen longest ago is let go."""
    book = SeriesBook(max_entries=2)
    for n in range(3):
        book.created((str(n),), f"e{n}", float(n))
    assert book.observe(("0",), 3.0)[0] == "create"
    assert book.observe(("2",), 3.0)[0] != "create"


def test_workload_is_the_top_of_the_chain_when_it_can_be_scaled() -> None:
    """Deployment and StatefulSet are scaled; a lone ReplicaSet, DaemonSet or nothing is not."""
    rs, deploy = OwnerRef("ReplicaSet", "r-1", True), OwnerRef("Deployment", "r", True)
    assert workload_of((rs, deploy)) == deploy
    assert workload_of((OwnerRef("StatefulSet", "bert", True),)) == OwnerRef(
        "StatefulSet", "bert", True
    )
    assert workload_of((rs,)) is None
    assert workload_of((OwnerRef("DaemonSet", "d", True),)) is None
    assert workload_of(()) is None


def test_an_opened_incident_event_names_the_change_it_followed() -> None:
    """`kubectl describe pod` shows what changed before the incident, ahead of the fix."""
    timeline = ChangeTimeline()
    key = ("prod", "triton-0", "resnet")
    timeline.read(key, {"instance_group": [{"count": 1}]}, 50.0)
    change = timeline.read(key, {"instance_group": [{"count": 4}]}, 90.0)
    opened = incident(pod="triton-0", at=100.0, opened_at=100.0)
    opened.change = change
    note = note_for_incident(opened)
    assert note is not None
    assert " After: instance_group[0].count: 1 → 4. Fix: " in note.note


def test_a_pod_of_a_fleet_group_says_so_and_its_group_skips_write_nothing() -> None:
    """A grouped pod's Event names its fleet group; steps skipped for the group stay silent.

    Each pod's ``kubectl describe`` tells its own incident, saying it is one of several; a
    notification, scale or reload the group already made is told once, by the pod that made
    it, not as a skip on every other pod.
    """
    group = FleetGroup(
        id="grp-1",
        key=GroupKey("team", "resnet", "cpu_bottleneck", "Deployment/triton"),
        lead="inc-1",
        opened_at=100.0,
        pods=("triton-0", "triton-1", "triton-2"),
        incidents=("inc-1", "inc-2", "inc-3"),
        of=4,
        affected=3,
    )
    opened = replace(incident(pod="triton-1", incident_id="inc-2"), group=group)
    note = note_for_incident(opened)
    assert note is not None
    assert "cpu_bottleneck on model resnet (fleet group grp-1: 3 of 4 pods)" in note.note
    alone = replace(group, pods=("triton-1",), incidents=("inc-2",), affected=1)
    single = note_for_incident(replace(opened, group=alone))
    assert single is not None and "fleet group" not in single.note
    for guard in ("grouped", "covered", "reload_cooldown"):
        assert note_for_record(replace(_record("skipped"), guard=guard)) is None
    assert note_for_record(replace(_record("skipped"), guard="cooldown")) is not None
