"""The next leader adopting a waiting approval keeps the raise its run relied on."""

from __future__ import annotations

from pathlib import Path

from tests.handed_rows import handed_approval
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.leader_election import adopt_approval


def test_an_adopted_approval_keeps_the_raise_it_relied_on(tmp_path: Path) -> None:
    """Approved on the next leader, its rollback must still spare the group's raise.

    The fact travels from the Lease row into the adopting replica's audit file, across a
    restart.
    """
    db = tmp_path / "audit.sqlite3"
    adopt_approval(AuditStore(db), handed_approval(leaning_on="inc-raise"))
    [waiting] = AuditStore(db).pending_approvals()
    assert waiting.leaning_on == "inc-raise"


def test_an_adopted_approval_of_a_run_that_relied_on_nothing_has_no_raise(tmp_path: Path) -> None:
    """A run of its own (no group raise) adopts with nothing to spare."""
    db = tmp_path / "audit.sqlite3"
    adopt_approval(AuditStore(db), handed_approval())
    [waiting] = AuditStore(db).pending_approvals()
    assert waiting.leaning_on == ""
