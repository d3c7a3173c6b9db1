"""The audit file keeps which runs changed nothing and which raise a pending check relied on."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from tests.handed_rows import handed_verification
from tests.playbook_harness import incident
from tritonguard.core.guards import RunRecord
from tritonguard.runtime.audit_store import AuditStore

RUN = RunRecord("scale", "prod/triton-b/resnet", "prod/resnet", 5000.0, False, False)


def test_a_covered_mark_survives_a_restart(tmp_path: Path) -> None:
    """A run marked covered reads back covered from the same file in a new store."""
    db = tmp_path / "audit.sqlite3"
    store = AuditStore(db)
    run_id = store.record_run(RUN, incident_id="inc-b")
    store.record_run(dataclasses.replace(RUN, at=5001.0), incident_id="inc-c")
    store.mark_run_covered(run_id, "inc-a")
    store.close()
    again = AuditStore(db)
    assert [r.covered_by for r in again.history(0.0)] == ["inc-a", ""]


def test_adopting_a_run_the_leader_marked_covered_later_marks_the_copy(tmp_path: Path) -> None:
    """The leader published the run while it went, then covered: the follower's copy follows."""
    store = AuditStore(tmp_path / "audit.sqlite3")
    assert store.adopt_runs([RUN]) == 1
    assert store.adopt_runs([dataclasses.replace(RUN, covered_by="inc-a")]) == 0
    assert [r.covered_by for r in store.history(0.0)] == ["inc-a"]


def test_the_relied_on_raise_is_kept_with_an_adopted_verification(tmp_path: Path) -> None:
    """A verification handed over with ``leaning_on`` is pending with it, and handed on again."""
    store = AuditStore(tmp_path / "audit.sqlite3")
    handed = handed_verification(
        incident_id="inc-b", pod="triton-b", opened_at=4900.0, leaning_on="inc-a"
    )
    assert store.adopt_verifications([handed], "leader-1") == 1
    [pending] = store.pending_verifications()
    assert pending.leaning_on == "inc-a"
    assert store.handed_verifications() == [handed]


def test_an_intent_keeps_the_raise_its_run_relied_on(tmp_path: Path) -> None:
    """A change in flight is read back at the next start with the raise its run relied on."""
    db = tmp_path / "audit.sqlite3"
    store = AuditStore(db)
    event = incident(pod="triton-b", incident_id="inc-b")
    store.begin_intent(
        event, "scale", "triton.update_config", ("triton.load", {}), [], 5000.0, leaning_on="inc-a"
    )
    store.close()
    [pending] = AuditStore(db).pending_intents()
    assert pending.leaning_on == "inc-a"


def test_an_older_audit_file_gains_the_columns_and_counts_its_runs(tmp_path: Path) -> None:
    """Runs an older daemon wrote have no mark: they read back as changes (counted)."""
    db = tmp_path / "audit.sqlite3"
    with sqlite3.connect(db) as old:
        old.execute(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, playbook TEXT NOT NULL,"
            " subject_key TEXT NOT NULL, model_key TEXT NOT NULL, at REAL NOT NULL,"
            " dry_run INTEGER NOT NULL, reload INTEGER NOT NULL)"
        )
        old.execute(
            "INSERT INTO runs (playbook, subject_key, model_key, at, dry_run, reload)"
            " VALUES ('scale', 'prod/triton-b/resnet', 'prod/resnet', 5000.0, 0, 0)"
        )
    old.close()
    [run] = AuditStore(db).history(0.0)
    assert run == RUN and run.changed


def test_an_approval_keeps_the_raise_its_run_relied_on(tmp_path: Path) -> None:
    """A step waiting for approval is read back with the raise, and handed on with it."""
    db = tmp_path / "audit.sqlite3"
    store = AuditStore(db)
    event = incident(pod="triton-b", incident_id="inc-b")
    store.begin_approval(
        "apr-1",
        event,
        "scale",
        1,
        "kubernetes.scale",
        {"add": 1},
        (),
        5000.0,
        5900.0,
        [],
        leaning_on="inc-a",
    )
    store.close()
    again = AuditStore(db)
    [pending] = again.pending_approvals()
    assert pending.leaning_on == "inc-a"
    found = again.approval("apr-1")
    assert found is not None and found[1] == {
        "state": "pending",
        "decided_by": "",
        "decided_at": None,
    }
    [handed] = again.handed_approvals(lambda incident, approval: None)
    assert handed.leaning_on == "inc-a"
