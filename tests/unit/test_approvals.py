"""Approvals: who may decide, when they expire, what the model accepts, what a test can assert."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests import playbook_harness
from tests.playbook_harness import StaticFeatures
from tritonguard.actions.registry import catalog
from tritonguard.cli import cmd_playbooks
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_decisions import (
    ExpireApproval,
    Ledger,
    PendingApproval,
    StepContext,
    decide_step,
    groups_to_ask,
    refuse_approver,
)
from tritonguard.core.playbook_model import PlaybookError, load_playbooks_text
from tritonguard.runtime.approvals import Approvals
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "approvals"


def pending(expires_at: float = 1000.0, approvers: tuple[str, ...] = ()) -> PendingApproval:
    """Return an approval asked for at 100 s."""
    return PendingApproval(
        approval_id="apr-1",
        incident=playbook_harness.incident(at=100.0),
        playbook="p",
        step_index=1,
        action="kubernetes.scale",
        params={"add": 1},
        approvers=approvers,
        requested_at=100.0,
        expires_at=expires_at,
    )


def test_a_named_user_or_a_member_of_a_named_group_may_decide() -> None:
    """Users are matched by ID, groups through their members; anyone else is refused, saying why."""
    approvers = ("U0LEAD0001", "S0ONCALL01")
    members = {"S0ONCALL01": frozenset({"U0ALICE001"})}
    assert refuse_approver("U0LEAD0001", approvers, {}) is None
    assert refuse_approver("U0ALICE001", approvers, members) is None
    why = refuse_approver("U0EVE00003", approvers, members)
    assert why == "U0EVE00003 is not among the approvers (U0LEAD0001, S0ONCALL01)"


def test_a_group_that_could_not_be_looked_up_admits_nobody() -> None:
    """A failed membership lookup never lets someone through, and the refusal names the group."""
    why = refuse_approver("U0ALICE001", ("S0ONCALL01",), {})
    assert why is not None and "members of S0ONCALL01 could not be looked up" in why


def test_without_approvers_anyone_may_decide_and_nothing_is_looked_up() -> None:
    """No approvers anywhere: anyone who can click in the channel decides (documented)."""
    assert refuse_approver("U0EVE00003", (), {}) is None
    assert groups_to_ask("U0EVE00003", ()) == ()
    assert groups_to_ask("U0LEAD0001", ("U0LEAD0001", "S0ONCALL01")) == ()
    assert groups_to_ask("U0EVE00003", ("U0LEAD0001", "S0ONCALL01")) == ("S0ONCALL01",)


def _ctx(now: float, approval: PendingApproval, leader_elsewhere: str | None) -> StepContext:
    return StepContext(
        playbooks=[],
        ledger=Ledger(approvals=(approval,)),
        settings=GuardSettings(),
        now=now,
        fresh=lambda s: True,
        alerts_for=lambda e: frozenset(),
        reloads=lambda b: False,
        leader_elsewhere=leader_elsewhere,
    )


@pytest.mark.parametrize("leader_elsewhere", [None, "b holds the lease"])
def test_an_approval_expires_at_its_deadline_and_not_before(leader_elsewhere: str | None) -> None:
    """The evaluation at the deadline expires it, on a replica that no longer leads too."""
    a = pending(expires_at=1000.0)
    assert decide_step([], [], _ctx(999.9, a, leader_elsewhere)) == []
    assert decide_step([], [], _ctx(1000.0, a, leader_elsewhere)) == [ExpireApproval(a)]


def _load(text: str) -> list[str]:
    try:
        load_playbooks_text(text, "book.yaml", catalog())
    except PlaybookError as exc:
        return exc.problems
    return []


BOOK = """name: p
when: {causes: [cpu_bottleneck]}
steps:
  - action: kubernetes.scale
    params: {add: 1}
%s
"""


def test_approval_fields_are_checked_at_load_with_file_and_line() -> None:
    """Bad approvers, approvers without approval and approvals in a rollback name their line."""
    assert _load(BOOK % "    approval: required\n    approvers: [S0ONCALL01]") == []
    [bad_id] = _load(BOOK % "    approval: required\n    approvers: ['@oncall']")
    assert bad_id.startswith("book.yaml:7:") and "is not a Slack user" in bad_id
    [orphan] = _load(BOOK % "    approvers: [U0LEAD0001]")
    assert orphan.startswith("book.yaml:4:") and "need approval: required" in orphan
    [other] = _load(BOOK % "    approval: maybe")
    assert other.startswith("book.yaml:6:") and "approval" in other
    rollback = BOOK % "rollback:\n  - action: slack.post\n    approval: required"
    [in_rollback] = _load(rollback)
    assert in_rollback.startswith("book.yaml:8:5:") and "rollback steps run at once" in in_rollback


def test_a_playbook_test_asserts_that_a_step_waits_for_approval(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``approval: required`` in an expectation matches the plan of a step that would wait.

    The same expectation on the step that needs none fails, and shows which steps would wait.
    """
    parser = argparse.ArgumentParser()
    cmd_playbooks.register(parser.add_subparsers())
    test_file = FIXTURES / "tests" / "cpu_scale_approval.test.yaml"
    args = parser.parse_args(["test", str(test_file)])
    assert args.handler(args) == 0
    wrong = tmp_path / "tests" / "wrong.test.yaml"
    wrong.parent.mkdir()
    (tmp_path / "cpu_scale_approval.yaml").write_text(
        (FIXTURES / "cpu_scale_approval.yaml").read_text()
    )
    text = test_file.read_text()
    assert text.count("approval: none") == 1
    wrong.write_text(text.replace("approval: none", "approval: required"))
    capsys.readouterr()
    args = parser.parse_args(["test", str(wrong)])
    assert args.handler(args) == 1
    out = capsys.readouterr().out
    assert "expected action [action=slack.post, status=planned, approval=required]" in out
    assert "kubernetes.scale on resnet" in out and "approval=required by S0ONCALL01" in out


VERIFY_WITH_APPROVAL = """name: checked-by-a-human
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false}
steps:
  - action: verify
    approval: required
    approvers: [U0LEAD0001]
    params: {wait: 0, checks: [{feature: queue_share, below: 1}]}
"""


async def test_a_waiting_step_runs_once_approved_and_a_resolution_drops_another() -> None:
    """The stage suspends the run at the step; approval resumes it there; resolving expires it."""
    store = AuditStore()
    books = load_playbooks_text(VERIFY_WITH_APPROVAL, "b.yaml", catalog())
    env = ExecutorEnv(features=StaticFeatures(value=0.2), clock=lambda: 5000.0)
    first = playbook_harness.incident()
    stage = playbook_harness.stage(
        books,
        store,
        settings=GuardSettings(dry_run=False),
        env=env,
        open_incidents=lambda: [first],
    )
    [waiting] = await playbook_harness.handle(stage, first)
    assert (waiting.status, waiting.detail["approvers"]) == ("awaiting_approval", ["U0LEAD0001"])
    approvals = Approvals(stage, clock=lambda: 5010.0)
    decided = await approvals.decide(waiting.detail["approval_id"], "approve", "U0LEAD0001")
    assert [(r.action, r.status) for r in await decided.all_records()] == [
        ("verify", "approved"),
        ("verify", "ran"),
    ]
    again = await approvals.decide(waiting.detail["approval_id"], "reject", "U0LEAD0001")
    assert again.outcome == "decided" and not again.records

    second = playbook_harness.incident(pod="triton-5d9c7b-k8k2z")
    await playbook_harness.handle(stage, second)
    records = await playbook_harness.handle(stage, playbook_harness.resolved(second))
    assert [(r.status, r.reason) for r in records] == [
        ("expired", "the incident resolved before anyone decided; the step is dropped")
    ]
    assert store.pending_approvals() == []
    store.close()
