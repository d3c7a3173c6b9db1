"""Approvals as the daemon decides them: a click checked, the step run or dropped, all recorded.

A step with ``approval: required`` waits in the audit database (the executor writes it
down). :class:`Approvals` takes each Approve or Reject click (``clients/slack_socket.py``),
checks that the person may decide (named directly, or a member of a named user group, asked
of Slack with ``usergroups.users.list``), records who decided and when, and then has the
stage run the step and the rest of its run, or drops them. Every outcome also goes to the
incident's Slack thread through the executor's ``on_approval`` hook (:func:`approval_view`).
Expiry is decided by each evaluation (``playbook_decisions.ExpireApproval``); a click that
arrives after the deadline expires the approval at once. With several replicas the leader
hands its waiting approvals over on the Lease (``leader_election``): the next leader keeps
them waiting until the same deadline and a click there decides them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from tritonguard.clients.slack_socket import ButtonClick, SlackSocket
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.playbook_decisions import (
    PendingApproval,
    groups_to_ask,
    refuse_approver,
)
from tritonguard.core.slack_message import (
    APPROVE_ACTION,
    REJECT_ACTION,
    ApprovalState,
    ApprovalView,
    describe,
)
from tritonguard.logs import get_logger
from tritonguard.runtime.playbook_stage import PlaybookStage, StepResult
from tritonguard.runtime.slack_threads import SlackThreads

Verdict = Literal["approve", "reject"]
Outcome = Literal["approved", "rejected", "expired", "refused", "unknown", "decided"]
VERDICTS: dict[str, Verdict] = {APPROVE_ACTION: "approve", REJECT_ACTION: "reject"}

GroupMembers = Callable[[str], Awaitable[frozenset[str]]]


@dataclass(slots=True)
class Decided:
    """What one click did: its outcome, the records it wrote, the work it started."""

    outcome: Outcome
    records: list[ActionRecord] = field(default_factory=list)
    work: StepResult | None = None

    async def all_records(self) -> list[ActionRecord]:
        """Return the click's records and, once it is done, those of the work it started."""
        out = list(self.records)
        if self.work is not None:
            for records in (await self.work.records()).values():
                out += records
        return out


_STATES: dict[str, ApprovalState] = {
    "pending": "pending",
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired",
}


def approval_view(
    pending: PendingApproval, state: str, decided_by: str = "", decided_at: float | None = None
) -> ApprovalView:
    """Return how the Slack thread shows an approval in ``state``."""
    rec = ActionRecord(
        at=pending.requested_at,
        incident_id=pending.incident.incident_id,
        event="updated",
        playbook=pending.playbook,
        subject=pending.incident.subject.key(),
        action=pending.action,
        params=dict(pending.params),
        dry_run=False,
        status="awaiting_approval",
    )
    return ApprovalView(
        approval_id=pending.approval_id,
        playbook=pending.playbook,
        action=pending.action,
        # The message names the action itself; ``what`` is the rest of the line.
        what=describe(rec).removeprefix(f"`{pending.action}`").removeprefix(" — ")
        or "as the playbook says",
        approvers=pending.approvers,
        expires_at=pending.expires_at,
        state=_STATES.get(state, "expired"),
        decided_by=decided_by,
        decided_at=decided_at,
    )


class Approvals:
    """Decides the approvals of one playbook stage from the clicks Slack delivers.

    ``members`` looks up a Slack user group's members (``SlackNotifier.group_members``);
    without it only people named directly may decide.
    """

    def __init__(
        self,
        stage: PlaybookStage,
        *,
        members: GroupMembers | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stage = stage
        self.members = members
        self.clock = clock
        self._log = get_logger("tritonguard.approvals")

    async def on_click(self, click: ButtonClick) -> None:
        """Take one button click from Socket Mode (other buttons are not ours)."""
        verdict = VERDICTS.get(click.action_id)
        if verdict is None:
            return
        decided = await self.decide(click.value, verdict, click.user)
        self._log.info(
            "approval click",
            approval=click.value,
            verdict=verdict,
            user=click.user,
            outcome=decided.outcome,
        )

    async def decide(
        self, approval_id: str, verdict: Verdict, user: str, now: float | None = None
    ) -> Decided:
        """Check ``user`` and carry out ``verdict`` on the approval; return what it did."""
        at = self.clock() if now is None else now
        store, ex = self.stage.store, self.stage.executor
        found = store.approval(approval_id)
        if found is None:
            return Decided("unknown")
        pending, state = found
        if state["state"] != "pending":
            return Decided("decided")
        books = {b.name: b for b in self.stage.playbooks}
        if pending.expired(at):
            waited = pending.expires_at - pending.requested_at
            why = f"nobody decided within {waited:.0f}s; " + ex.drop_reason(pending, books)
            return self._settled("expired", ex.settle_approval(pending, "expired", "", at, why))
        refusal = await self._refusal(pending, user)
        if refusal is not None:
            return self._refused(pending, user, verdict, refusal, at)
        # The user-group lookup awaited Slack: leadership may have moved meanwhile, and a
        # replica that does not lead settles nothing (the leader still holds the approval).
        elsewhere = self.stage.leader_elsewhere()
        if elsewhere is not None:
            return self._refused(
                pending, user, verdict, f"{elsewhere}; only the leader decides", at
            )
        if verdict == "reject":
            why = f"rejected by {user}; " + ex.drop_reason(pending, books)
            return self._settled("rejected", ex.settle_approval(pending, "rejected", user, at, why))
        # Up to the timeout may have passed since the step was asked for: what it would fix
        # must still be there, seen on fresh data.
        live = self.stage.open_incident_for(pending)
        late = self.stage.why_not_now(pending, at)
        if live is None or late is not None:
            why = f"approved by {user}, but {late}; " + ex.drop_reason(pending, books)
            return self._settled("expired", ex.settle_approval(pending, "expired", user, at, why))
        ok = ex.settle_approval(pending, "approved", user, at, f"approved by {user}; it runs now")
        decided = self._settled("approved", ok)
        if ok is not None:
            decided.work = self.stage.resume_approved(pending, at, live)
        return decided

    def _refused(
        self, pending: PendingApproval, user: str, verdict: Verdict, why: str, at: float
    ) -> Decided:
        """Record a click that may not decide; the step still waits."""
        rec = self.stage.executor.record(
            pending.incident,
            pending.playbook,
            pending.action,
            dict(pending.params),
            False,
            "awaiting_approval",
            at,
            guard="approver",
            reason=f"{verdict} by {user} refused: {why}; the step still waits",
            detail={"approval_id": pending.approval_id, "refused": user},
        )
        self.stage.report(rec.subject, [rec])
        return Decided("refused", [rec])

    def _settled(self, outcome: Outcome, rec: ActionRecord | None) -> Decided:
        """Report the record of an approval that ended; none means another click was first."""
        if rec is None:
            return Decided("decided")
        self.stage.report(rec.subject, [rec])
        return Decided(outcome, [rec])

    async def _refusal(self, pending: PendingApproval, user: str) -> str | None:
        """Return why ``user`` may not decide the approval, or None."""
        if not user:
            return "Slack did not say who clicked"
        elsewhere = self.stage.leader_elsewhere()
        if elsewhere is not None:  # checked again after the lookup, which awaits Slack
            return f"{elsewhere}; only the leader decides"
        members: dict[str, frozenset[str]] = {}
        for group in groups_to_ask(user, pending.approvers):
            if self.members is None:
                continue
            try:
                members[group] = await self.members(group)
            except Exception as exc:  # a Slack error admits nobody; say why
                self._log.warning("user group lookup failed", group=group, error=str(exc))
                continue
            if user in members[group]:
                break
        return refuse_approver(user, pending.approvers, members)


def thread_notice(
    threads: SlackThreads, held_elsewhere: Callable[[str], bool]
) -> Callable[[PendingApproval, str, str, float | None], None]:
    """Return the executor's ``on_approval`` hook: each approval's life told in its thread.

    An approval the leader holds (handed over on the Lease) is the leader's to tell: a
    replica that no longer leads records its own end of it but says nothing in Slack, so the
    thread never hears of one approval twice.
    """

    def tell(pending: PendingApproval, state: str, by: str, at: float | None) -> None:
        if state != "pending" and held_elsewhere(pending.approval_id):
            return
        view = approval_view(pending, state, by, at)
        threads.observe_approval(pending.incident.incident_id, view, pending.incident)

    return tell


async def hold_socket(
    socket: SlackSocket,
    may_connect: Callable[[], bool],
    *,
    poll_s: float = 1.0,
    start_timeout_s: float = 10.0,
) -> None:
    """Keep Socket Mode open while this replica may act (it leads), closed otherwise.

    Slack hands each click to one of an app's open connections, so a replica that does not
    lead stays off: every click reaches the replica that runs playbooks. ``start`` retries
    until Slack answers, so it is given ``start_timeout_s`` at a time and leadership asked
    again in between: a replica that lost the lease meanwhile gives up connecting.
    """
    try:
        while True:
            want = may_connect()
            if want and socket.client is None:
                try:
                    await asyncio.wait_for(socket.start(), timeout=start_timeout_s)
                except TimeoutError:
                    await socket.close()  # a half-open attempt is not kept
                    continue
            elif not want and socket.client is not None:
                await socket.close()
            await asyncio.sleep(poll_s)
    finally:
        await socket.close()
