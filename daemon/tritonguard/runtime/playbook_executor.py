"""Carry out playbook decisions: run or plan steps, verify, roll back, escalate, restore.

The executor is the only place that calls actions. It works against typed client protocols
(``tritonguard.clients.ports``) and writes each decision once, as an :class:`ActionRecord`,
through the audit store; undos go to the store's one undo ledger, dry-run plans included.
A step with ``approval: required`` suspends its run until a human decides
(``runtime/approvals.py``); an approval resumes the run at that step.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import ValidationError

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionResult,
    BoundsExceeded,
    RegisteredAction,
    UndoStep,
    load_all,
)
from tritonguard.clients.ports import KubeApi, SlackApi, TritonApi
from tritonguard.core.action_records import ActionRecord, Phase, Status
from tritonguard.core.config_patch import Change, reverse_patch
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import OWNER_ACTIONS
from tritonguard.core.guards import RunRecord, merge_bounds, model_key, scale_target
from tritonguard.core.playbook_decisions import (
    GroupReliance,
    PendingApproval,
    PendingIntent,
    PendingVerification,
    SkipPlaybook,
    approval_timeout,
    approvers_for,
    dropped_after,
)
from tritonguard.core.playbook_model import Playbook, Step
from tritonguard.core.run_handover import same_incident
from tritonguard.core.templating import TemplateError, incident_context, render_value
from tritonguard.runtime.audit_store import AuditStore, PendingUndo

# Who hears each decision as it is written, set by the stage around the work it chains: a
# run's records then reach Slack, Kubernetes Events and the log step by step, not once the
# whole run (a verify step waits a minute or more) is over.
RECORD_WRITTEN: contextvars.ContextVar[Callable[[ActionRecord], None] | None] = (
    contextvars.ContextVar("tritonguard_record_written", default=None)
)


class FeatureView(Protocol):
    """Current feature values of a subject, as the engine saw them (None: unknown or stale)."""

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return one feature's value."""
        ...

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Return whether the subject's data is recent enough to act on."""
        ...

    def recovered(self, subject: Subject, now: float) -> bool:
        """Return whether fresh data shows the subject recovered (no incident, symptom gone)."""
        ...


class NoFeatures:
    """A feature view with nothing in it (tests of single actions)."""

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return None: nothing is known."""
        return None

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Return True: freshness is not what such a test is about."""
        return True

    def recovered(self, subject: Subject, now: float) -> bool:
        """Return False: without data nothing shows a recovery."""
        return False


@dataclass(slots=True)
class ExecutorEnv:
    """The outside world as the executor sees it; every client is optional for dry-run."""

    triton_for: Callable[[Subject], TritonApi | None] = lambda s: None
    # Why no Triton endpoint is given for a subject, when one is withheld (pod discovery's
    # watch of its namespace is stale), or None: a failed step then says what to check.
    triton_withheld: Callable[[Subject], str | None] = lambda s: None
    kube: KubeApi | None = None
    slack: SlackApi | None = None
    slack_channel: str = "#tritonguard"
    features: FeatureView = field(default_factory=NoFeatures)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.time
    # Stand-ins for ``GET .../config`` when planning without a server (tests, replay).
    static_configs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Told about every real run and verdict, so the next leader learns of it at once.
    on_run: Callable[[], None] = lambda: None
    # Who may approve a step that names nobody, and how long an approval waits.
    approvers: tuple[str, ...] = ()
    approval_timeout_s: float = 900.0
    # Told when a step starts waiting for approval (state "pending") and how that ended:
    # (approval, state, decided_by, decided_at). The daemon updates the Slack thread.
    on_approval: Callable[[PendingApproval, str, str, float | None], None] = (
        lambda approval, state, by, at: None
    )


class _Failed(Exception):
    def __init__(self, status: Status, guard: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.guard, self.reason = status, guard, reason


class _Covered(ActionFailed):
    """A scale whose object another incident already raised: that incident's undo covers it.

    An ``ActionFailed`` so the action passes it on unchanged; the executor records a skip.
    """

    def __init__(self, incident_id: str, undo: PendingUndo, on_resolve: bool) -> None:
        super().__init__(f"already scaled by incident {incident_id}; its restore covers this one")
        self.incident_id, self.undo, self.on_resolve = incident_id, undo, on_resolve


class _HeldBack(ActionFailed):
    """A change a run relying on its fleet group's raise may not make (``GroupReliance``)."""

    def __init__(self, relies: GroupReliance) -> None:
        super().__init__(
            f"this run relies on the fleet group's raise by incident {relies.incident_id}, "
            f"which does not cover this change; a change of its own is held back by "
            f"{relies.guard}: {relies.held_back}"
        )
        self.guard = relies.guard


class _InFlight(ActionFailed):
    """A scale of an object another incident's step is writing now: wait for it, then retry.

    Its outcome decides: once its undo is on file the retry is skipped as covered by it; if
    it failed, the retry raises the object itself. An ``ActionFailed`` for the same reason
    as :class:`_Covered`.
    """

    def __init__(self, incident_id: str, settled: asyncio.Future[None]) -> None:
        super().__init__(f"incident {incident_id} is scaling the same object")
        self.settled = settled


@dataclass(slots=True)
class _Outcome:
    """What a run did, as far as the rate and the budget care (``RunRecord.covered_by``)."""

    # The incident whose raise the run relied on: it relies (``GroupReliance``) or one of
    # its scales was skipped as covered.
    leaning_on: str | None = None
    # Whether a step of it (or of its rollback or escalation) made a change, or may have.
    changed: bool = False
    # Whether it stopped at a step waiting for approval: what follows may change anything.
    suspended: bool = False

    def covered_by(self) -> str:
        """Return the incident the finished run relied on when it changed nothing, else ""."""
        if self.leaning_on is None or self.changed or self.suspended:
            return ""
        return self.leaning_on


# What a change step's record says when it made no change: held back, covered, refused by
# a bound, or planned in place. Any other outcome of a change step (ran, failed, rolled
# back, cancelled) may have changed the server, so it counts.
_UNCHANGED = frozenset({"skipped", "planned", "awaiting_approval"})


@dataclass(slots=True)
class _Raising:
    """A scale step writing its object now: whose, and when its outcome is on file."""

    incident_id: str
    task: asyncio.Task[Any] | None
    settled: asyncio.Future[None]


def _written(rec: ActionRecord) -> None:
    """Tell the stage's listener of a decision just written to the audit store, if one listens."""
    listener = RECORD_WRITTEN.get()
    if listener is not None:
        listener(rec)


def _short(params: dict[str, Any]) -> dict[str, Any]:
    """Keep records readable: a whole model config is summarised, not copied."""
    out = dict(params)
    if isinstance(out.get("config"), dict):
        out["config"] = "<previous config>"
    return out


class PlaybookExecutor:
    """Runs, plans, verifies, rolls back, escalates and restores; records every decision."""

    def __init__(
        self,
        store: AuditStore,
        env: ExecutorEnv | None = None,
        actions: Mapping[str, RegisteredAction] | None = None,
    ) -> None:
        self.store = store
        self.env = env or ExecutorEnv()
        self.actions = dict(actions) if actions is not None else load_all()
        # Verifications this process is waiting on: not pending, whatever the store says.
        self.verifying: set[int] = set()
        # Intents of change steps this process is running or restoring, and of steps it was
        # cancelled in: those are for the next start to settle, never for this process.
        self.intending: set[int] = set()
        # Scales being written now, by the object they write (``scale_target``): another
        # incident's scale of it waits for the outcome instead of raising it side by side.
        self._raising: dict[tuple[str, ...], _Raising] = {}
        # The rows of real runs begun and not yet over, by (incident, playbook): one that
        # changed nothing is marked covered when it ends.
        self._begun: dict[tuple[str, str], int] = {}

    def reloads(self, book: Playbook) -> bool:
        """Whether any step of the playbook reloads a model."""
        return any(
            self.actions[s.action].reloads_model
            for s in book.all_steps()
            if s.action in self.actions
        )

    # ---- recording ------------------------------------------------------------------------
    def record(  # noqa: PLR0917 - every record names these seven facts; the rest are keywords
        self,
        event: IncidentEvent,
        playbook: str,
        action: str,
        params: dict[str, Any],
        dry_run: bool,
        status: Status,
        now: float,
        *,
        guard: str = "",
        reason: str = "",
        detail: dict[str, Any] | None = None,
        phase: Phase = "step",
    ) -> ActionRecord:
        """Write one decision to the audit store and return it."""
        rec = ActionRecord(
            at=now,
            incident_id=event.incident_id,
            event=event.event,
            playbook=playbook,
            subject=event.subject.key(),
            action=action,
            params=params,
            dry_run=dry_run,
            status=status,
            guard=guard,
            reason=reason,
            detail=detail or {},
            phase=phase,
        )
        self.store.record(rec)
        _written(rec)
        return rec

    def skipped(self, skip: SkipPlaybook, now: float) -> ActionRecord:
        """Record that a guard blocked the whole playbook."""
        return self.record(
            skip.incident,
            skip.playbook,
            "*",
            {},
            skip.dry_run,
            "skipped",
            now,
            guard=skip.guard,
            reason=skip.reason,
        )

    # ---- running a playbook ---------------------------------------------------------------
    def begin(self, book: Playbook, event: IncidentEvent, dry_run: bool, now: float) -> None:
        """Record that ``book`` starts on ``event`` (cooldowns, rates, budget see it at once)."""
        subject = event.subject
        run_id = self.store.record_run(
            RunRecord(
                book.name, subject.key(), model_key(subject), now, dry_run, self.reloads(book)
            ),
            incident_id=event.incident_id,
        )
        if not dry_run:
            self._begun[(event.incident_id, book.name)] = run_id
            self.env.on_run()

    def notifies(self, step: Step) -> bool:
        """Whether the step's action only tells people (the notification dry-run switch)."""
        action = self.actions.get(step.action)
        return action is not None and action.kind == "notify"

    def notify_only(self, book: Playbook) -> bool:
        """Whether every step of the playbook only tells people."""
        return all(self.notifies(s) for s in book.all_steps())

    async def run(
        self,
        book: Playbook,
        event: IncidentEvent,
        dry_run: bool,
        now: float,
        notify_dry_run: bool | None = None,
        *,
        relies: GroupReliance | None = None,
    ) -> list[ActionRecord]:
        """Run (or plan) every step of ``book`` for ``event`` decided at ``now`` (after begin).

        ``dry_run`` is the mode of remediation steps, ``notify_dry_run`` (unset: the same)
        that of notification steps. A plan is dated ``now``; a real run dates each step when
        it finishes, since a verify step waits. A run that ``relies`` on its fleet group's
        raise changes nothing: its scales are covered by that raise, or skipped.

        A real run that changed nothing, relying on another incident's raise, is marked so
        in the trail once it is over (:meth:`AuditStore.mark_run_covered`): it then uses no
        budget and no other incident's rate. Until then, and if it changed anything or may
        have, it counts as a change.
        """
        begun = self._begun.pop((event.incident_id, book.name), None)
        notify_dry = dry_run if notify_dry_run is None else notify_dry_run
        if dry_run and notify_dry:
            return await self._plan(book, event, now)
        outcome = _Outcome()
        records = await self._execute(
            book,
            event,
            now,
            lambda step: notify_dry if self.notifies(step) else dry_run,
            relies=relies,
            outcome=outcome,
        )
        covered_by = outcome.covered_by()
        if begun is not None and covered_by:
            self.store.mark_run_covered(begun, covered_by)
            self.env.on_run()  # the next leader must not count it either
        return records

    def _context(self, book: Playbook, event: IncidentEvent, dry_run: bool) -> ActionContext:
        subject = event.subject
        features, clock = self.env.features, self.env.clock
        return ActionContext(
            subject=subject,
            event=event,
            playbook=book.name,
            bounds=merge_bounds(book.guards.bounds),
            dry_run=dry_run,
            triton=self.env.triton_for(subject),
            triton_withheld=self._withheld(subject),
            kube=self.env.kube,
            slack=self.env.slack,
            slack_channel=self.env.slack_channel,
            feature_value=lambda s, n: features.feature_value(s, n, clock()),
            sleep=self.env.sleep,
            static_configs=self.env.static_configs,
        )

    def _withheld(self, subject: Subject) -> str | None:
        """Return why ``subject`` has no Triton endpoint, when one is withheld; else None."""
        if self.env.triton_for(subject) is not None:
            return None
        return self.env.triton_withheld(subject)

    def _params(self, step: Step, event: IncidentEvent, now: float) -> tuple[dict[str, Any], Any]:
        if step.action not in self.actions:
            raise _Failed("failed", "", f"unknown action {step.action!r}")
        try:
            rendered = render_value(step.params, incident_context(event, now))
        except TemplateError as exc:
            raise _Failed("failed", "template", str(exc)) from None
        return self._validated(step, rendered)

    def _validated(self, step: Step, rendered: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """Return rendered parameters with the action's model of them; _Failed if invalid."""
        action = self.actions.get(step.action)
        if action is None:
            raise _Failed("failed", "", f"unknown action {step.action!r}")
        try:
            return rendered, action.params.model_validate(rendered)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise _Failed("failed", "params", f"{loc}: {first['msg']}") from None

    def _refused(  # noqa: PLR0917 - the facts of the record, as for record()
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        dry_run: bool,
        exc: _Failed,
        now: float,
    ) -> ActionRecord:
        """Record a step that could not start (bad template, parameters or a guard)."""
        return self.record(
            event,
            book.name,
            step.action,
            step.params,
            dry_run,
            exc.status,
            now,
            guard=exc.guard,
            reason=exc.reason,
        )

    async def _plan(self, book: Playbook, event: IncidentEvent, now: float) -> list[ActionRecord]:
        records: list[ActionRecord] = []
        ctx = self._context(book, event, True)
        for step in book.all_steps():
            rec, failed = await self._plan_step(book, event, step, ctx, now)
            records.append(rec)
            if failed is not None:
                break
        return records

    async def _plan_step(
        self, book: Playbook, event: IncidentEvent, step: Step, ctx: ActionContext, now: float
    ) -> tuple[ActionRecord, _Failed | None]:
        """Plan one step and record it; return why it could not be planned, if it could not."""
        try:
            rendered, params = self._params(step, event, now)
        except _Failed as exc:
            return self._refused(event, book, step, True, exc, now), exc
        action = self.actions[step.action]
        try:
            detail = await action.plan(ctx, params) if action.plan else {}
        except BoundsExceeded as exc:
            rec = self.record(
                event,
                book.name,
                step.action,
                rendered,
                True,
                "skipped",
                now,
                guard="bounds",
                reason=str(exc),
            )
            return rec, _Failed("skipped", "bounds", str(exc))
        except Exception as exc:  # planning reads at most; report why and keep planning
            detail = {"note": f"could not plan in detail: {exc}"}
        if step.needs_approval:
            # A plan changes nothing, so it waits for nobody; it says a real run would.
            detail = {
                **detail,
                "approval": {
                    "required": True,
                    "approvers": list(approvers_for(step, self.env.approvers)),
                    "timeout_s": approval_timeout(step, self.env.approval_timeout_s),
                },
            }
        rec = self.record(
            event,
            book.name,
            step.action,
            rendered,
            True,
            "planned",
            now,
            reason="dry-run",
            detail=detail,
        )
        if getattr(params, "restore_on_resolve", False):
            action_name, undo_params = self._planned_restore(detail)
            self.store.add_undo(
                event.incident_id, book.name, action_name, undo_params, True, dry_run=True
            )
        return rec, None

    def _planned_restore(self, detail: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Return the restore a live run would make for a planned change (as far as known)."""
        model = str(detail.get("model", ""))
        config = self.env.static_configs.get(model)
        changes = [
            Change(c["path"], c.get("old"), c.get("new"))
            for c in detail.get("changes") or []
            if isinstance(c, Mapping) and "path" in c
        ]
        reverse = reverse_patch(config, changes) if config is not None and changes else None
        if reverse is None:
            return "triton.load", {"model": model}
        return "triton.update_config", {
            "model": model,
            "set": dict(reverse.set),
            "remove": list(reverse.remove),
        }

    async def _execute(
        self,
        book: Playbook,
        event: IncidentEvent,
        now: float,
        planned: Callable[[Step], bool] = lambda step: False,
        *,
        undos: list[PendingUndo] | None = None,
        approved: PendingApproval | None = None,
        relies: GroupReliance | None = None,
        outcome: _Outcome | None = None,
    ) -> list[ActionRecord]:
        """Run the steps of ``book``, from the approved step on when ``approved`` is given.

        A step that needs approval ends the run here: it is written down as waiting and the
        run goes on from it once someone approves (:meth:`resume_approved`).

        A run that ``relies`` on its group's raise asks nobody: a scale in it is covered by
        that raise or skipped, never made. Any other change step ends it, skipped for the
        guard that held it back; notifications and checks run.

        ``outcome`` is told what the run relied on and whether it changed anything.
        """
        outcome = outcome if outcome is not None else _Outcome()
        records = await self._steps(book, event, now, planned, undos, approved, relies, outcome)
        outcome.changed = outcome.changed or any(
            self._changes(r) for r in records if r.status not in _UNCHANGED
        )
        return records

    def _changes(self, rec: ActionRecord) -> bool:
        """Whether a record is of a step that changes the server (an unknown action may)."""
        action = self.actions.get(rec.action)
        return action is None or action.kind == "change"

    async def _steps(  # noqa: PLR0917 - _execute's arguments, passed on whole
        self,
        book: Playbook,
        event: IncidentEvent,
        now: float,
        planned: Callable[[Step], bool],
        undos: list[PendingUndo] | None,
        approved: PendingApproval | None,
        relies: GroupReliance | None,
        outcome: _Outcome,
    ) -> list[ActionRecord]:
        """Run the steps for :meth:`_execute`, then roll back if one failed."""
        records: list[ActionRecord] = []
        ctx = self._context(book, event, False)
        undos = list(undos or [])
        failure: _Failed | None = None
        # The incident whose raise this run leans on: its rollback must not undo that raise.
        # A run resumed after approval goes on leaning on what it did before it waited.
        leaning_on = relies.incident_id if relies is not None else None
        if leaning_on is None and approved is not None:
            leaning_on = approved.leaning_on or None
        outcome.leaning_on = leaning_on
        start = approved.step_index if approved is not None else 0
        for index, step in enumerate(book.all_steps()):
            if index < start:
                continue
            if planned(step):
                # This step's kind is in dry-run while others act: plan it in place.
                rec, failed = await self._plan_step(
                    book, event, step, replace(ctx, dry_run=True), self.env.clock()
                )
                records.append(rec)
                if failed is None:
                    continue
                if undos:  # what already changed is rolled back, as after any failure
                    failure = failed
                break
            try:
                if approved is not None and index == approved.step_index:
                    # What the approver saw is what runs, not a new rendering.
                    rendered, params = self._validated(step, dict(approved.params))
                else:
                    rendered, params = self._params(step, event, now)
            except _Failed as exc:
                failure = exc
                records.append(self._refused(event, book, step, False, exc, now))
                break
            action = self.actions[step.action]
            if relies is not None and action.kind == "change" and step.action not in OWNER_ACTIONS:
                records.append(self._held_back(event, book, step, rendered, _HeldBack(relies)))
                break
            if (
                step.needs_approval
                and relies is None
                and (approved is None or index != approved.step_index)
            ):
                records.append(
                    self._ask_approval(event, book, index, step, rendered, undos, leaning_on)
                )
                outcome.suspended = True
                return records
            verification = (
                self._begin_verification(event, book, params, undos, leaning_on)
                if action.kind == "check"
                else None
            )
            intents: list[int] = []
            raising: list[tuple[str, ...]] = []
            step_ctx = replace(
                ctx,
                intend=functools.partial(
                    self._intend,
                    event,
                    book.name,
                    step.action,
                    list(undos),
                    intents,
                    raising,
                    relies,
                    leaning_on,
                ),
            )
            try:
                result = await self._run_action(action, step_ctx, params)
            except _Covered as exc:
                self._release(raising)
                records.append(self._covered(event, book, step, rendered, exc))
                leaning_on = leaning_on or exc.incident_id
                outcome.leaning_on = leaning_on
                continue
            except _HeldBack as exc:
                # Nothing changed, so nothing is rolled back and nothing escalates.
                records.append(self._held_back(event, book, step, rendered, exc))
                break
            except BoundsExceeded as exc:
                failure = _Failed("skipped", "bounds", str(exc))
            except ActionFailed as exc:
                failure = _Failed("failed", "", str(exc))
            except asyncio.CancelledError:
                outcome.changed = True
                # The intents stay pending and stay in ``intending``: the call may still land
                # on the server, and only the next start may settle that (reliability.md).
                self._cancelled(event, book, step, rendered, verification, intents)
                self._release(raising, cancelled=True)
                raise
            except Exception as exc:  # a client error or a bug: recorded, never fatal
                failure = _Failed("failed", "", f"{type(exc).__name__}: {exc}")
            finally:
                if verification is not None:
                    self.verifying.discard(verification)
                # A call that changes the server began: whatever came of it, it counts.
                outcome.changed = outcome.changed or bool(intents)
            if verification is not None:
                self.store.settle_verification(
                    verification, "passed" if failure is None else "failed"
                )
                self.env.on_run()  # the next leader must not judge it again
            if failure is not None:
                # The action judged a failed call (read back, or put the old state back
                # itself), so its intents are discarded with the failure's record.
                rec = self._step_record(event, book, step, rendered, failure=failure)
                self.store.settle_step(rec, intents)
                _written(rec)
                self._settled(intents)
                self._release(raising)
                records.append(rec)
                if self.actions[step.action].kind == "notify":
                    # A Slack outage must not stop (or undo) a remediation: record it, go on.
                    failure = None
                    continue
                break
            rec = self._step_record(event, book, step, rendered, detail=result.detail)
            undo = result.undo
            undo_id = self.store.settle_step(
                rec,
                intents,
                undo=(undo.action, undo.params, undo.on_resolve) if undo is not None else None,
            )
            _written(rec)
            self._settled(intents)
            # After settle_step: a scale waiting on this one finds its undo on file.
            self._release(raising)
            records.append(rec)
            if undo is not None and undo_id is not None:
                undos.append(
                    PendingUndo(
                        undo_id, book.name, undo.action, undo.params, on_resolve=undo.on_resolve
                    )
                )
        if failure is not None:
            records += await self._rollback(book, event, ctx, undos, failure, leaning_on=leaning_on)
        return records

    def _step_record(
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        rendered: dict[str, Any],
        *,
        failure: _Failed | None = None,
        detail: dict[str, Any] | None = None,
    ) -> ActionRecord:
        """Return (without writing) the record of a step that ran, or failed with ``failure``."""
        return ActionRecord(
            at=self.env.clock(),
            incident_id=event.incident_id,
            event=event.event,
            playbook=book.name,
            subject=event.subject.key(),
            action=step.action,
            params=rendered,
            dry_run=False,
            status="ran" if failure is None else failure.status,
            guard=failure.guard if failure is not None else "",
            reason=failure.reason if failure is not None else "",
            detail=detail or {},
        )

    async def _run_action(
        self, action: RegisteredAction, ctx: ActionContext, params: Any
    ) -> ActionResult:
        """Run a step's action; behind another incident's scale of the same object in flight.

        The retry reads the object again: by then the other scale's undo is on file (this
        one is covered) or it failed (this one may raise it).
        """
        while True:
            try:
                return await action.run(ctx, params)
            except _InFlight as exc:
                # Shielded: this step being cancelled must not cancel the other's outcome.
                await asyncio.shield(exc.settled)

    def _intend(  # noqa: PLR0917 - bound per step with partial; the action passes ``undo``
        self,
        event: IncidentEvent,
        playbook: str,
        action: str,
        earlier: list[PendingUndo],
        intents: list[int],
        raising: list[tuple[str, ...]],
        relies: GroupReliance | None,
        leaning_on: str | None,
        undo: UndoStep,
    ) -> None:
        """Write a change step's undo down before its call (``ActionContext.intend``).

        A step that cannot put its way back on file does not change anything: the action
        fails before its call, with the reason. A scale of an object another incident's
        pending undo already puts back changes nothing either (:class:`_Covered`), and one
        of an object another incident's scale is writing now waits for that (:class:`_InFlight`).
        A run relying on its group's raise makes no change that raise does not cover.
        ``leaning_on`` (the raise the run relied on so far) is written with the intent, so a
        restart's rollback of the run spares that raise too.
        """
        target = scale_target(undo.action, undo.params)
        if target is not None:
            for other, held in self.store.live_undos_elsewhere(undo.action, event.incident_id):
                if scale_target(held.action, held.params) == target:
                    raise _Covered(other, held, undo.on_resolve)
            busy = self._raising.get(target)
            # A writer whose task ended without settling (a bug) must not hold the object.
            live = busy is not None and (busy.task is None or not busy.task.done())
            if busy is not None and live and busy.incident_id != event.incident_id:
                raise _InFlight(busy.incident_id, busy.settled)
        if relies is not None:
            raise _HeldBack(relies)
        if target is not None and not live:
            self._raising[target] = _Raising(
                event.incident_id,
                asyncio.current_task(),
                asyncio.get_running_loop().create_future(),
            )
            raising.append(target)
        try:
            intent_id = self.store.begin_intent(
                event,
                playbook,
                action,
                (undo.action, undo.params),
                [u.undo_id for u in earlier],
                self.env.clock(),
                leaning_on=leaning_on or "",
            )
        except Exception as exc:  # sqlite3 errors (disk full, read-only file): say so, stop
            raise ActionFailed(
                f"cannot write the undo to the audit store before the change ({exc}); "
                "nothing was changed"
            ) from None
        intents.append(intent_id)
        self.intending.add(intent_id)
        self.env.on_run()  # the next leader must know about the change in flight

    def _covered(
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        rendered: dict[str, Any],
        covered: _Covered,
    ) -> ActionRecord:
        """Record a scale skipped because another incident's raise covers it; the run goes on.

        A restore on resolve is filed for this incident too, with the count from before the
        first raise: whichever incident resolves last puts it back (:meth:`resolve`), so the
        floor neither drops under an open incident nor stays raised for good.
        """
        rec = self._step_record(
            event, book, step, rendered, failure=_Failed("skipped", "covered", str(covered))
        )
        self.store.record(rec)
        _written(rec)
        if covered.on_resolve:
            held = covered.undo
            self.store.add_undo(event.incident_id, book.name, held.action, held.params, True)
        return rec

    def _release(self, raising: list[tuple[str, ...]], *, cancelled: bool = False) -> None:
        """End a step's scales in flight: scales of the same objects waiting on them go on.

        Cancelled (the daemon stops), the outcome is for the next start to settle, so the
        waiting steps are cancelled too rather than raising the object a second time.
        """
        for target in raising:
            entry = self._raising.pop(target, None)
            if entry is None or entry.settled.done():
                continue
            if cancelled:
                entry.settled.cancel()
            else:
                entry.settled.set_result(None)
        raising.clear()

    def _held_back(
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        rendered: dict[str, Any],
        held: _HeldBack,
    ) -> ActionRecord:
        """Record a change a run relying on its group's raise may not make, for its guard."""
        rec = self._step_record(
            event, book, step, rendered, failure=_Failed("skipped", held.guard, str(held))
        )
        self.store.record(rec)
        _written(rec)
        return rec

    def _settled(self, intents: list[int]) -> None:
        """Forget the intents of a step whose outcome is on file; tell the next leader."""
        if intents:
            self.intending.difference_update(intents)
            self.env.on_run()

    def _begin_verification(
        self,
        event: IncidentEvent,
        book: Playbook,
        params: Any,
        undos: list[PendingUndo],
        leaning_on: str | None,
    ) -> int:
        """Write the verification down before it waits: a restart resumes it (reliability.md).

        With it goes the raise the run relied on (``leaning_on``), so a failed verdict after
        a restart, or on the next leader, spares that raise as this run would.
        """
        spec = params.model_dump(mode="json", exclude_none=True)
        verification = self.store.begin_verification(
            event,
            book.name,
            list(spec.get("checks", [])),
            float(spec.get("wait", 0.0)),
            self.env.clock(),
            [u.undo_id for u in undos],
            leaning_on=leaning_on or "",
        )
        self.verifying.add(verification)
        return verification

    def _cancelled(  # noqa: PLR0917 - the step, and what it left waiting for the restart
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        rendered: dict[str, Any],
        verification: int | None,
        intents: list[int],
    ) -> None:
        """Record the step the daemon stopped in; a verification or intent waits for the restart."""
        if verification is not None:
            reason = (
                "the daemon stopped during the verification; the next start (or the next "
                "leader) resumes it, or rolls the change back if it cannot judge it"
            )
        elif intents:
            reason = (
                "the daemon stopped during this step; its outcome on the server is unknown, "
                "so the next start (or the next leader) puts back the state from before it "
                "and does not repeat it"
            )
        else:
            reason = "the daemon stopped during this step; its outcome on the server is unknown"
        self.record(
            event,
            book.name,
            step.action,
            _short(rendered),
            False,
            "cancelled",
            self.env.clock(),
            reason=reason,
        )

    async def resume_verification(
        self, pending: PendingVerification, books: Mapping[str, Playbook], now: float
    ) -> list[ActionRecord]:
        """Judge a verification a stopped daemon left, with fresh data; roll back on failure."""
        book = books.get(pending.playbook)
        ctx = self._left_context(pending.incident, pending.playbook, book)
        params = self.actions["verify"].params.model_validate(
            {"wait": 0, "checks": list(pending.checks)}
        )
        try:
            result = await self.actions["verify"].run(ctx, params)
        except ActionFailed as exc:
            why = _Failed("failed", "", f"resumed after a restart: {exc}")
            return await self._fail_left(pending, book, ctx, why, "failed", now)
        self.store.settle_verification(pending.verification_id, "passed")
        return [
            self.record(
                pending.incident,
                pending.playbook,
                "verify",
                {"checks": list(pending.checks)},
                False,
                "ran",
                now,
                reason="resumed after a restart",
                detail=result.detail,
            )
        ]

    async def abandon_verification(
        self, pending: PendingVerification, books: Mapping[str, Playbook], now: float
    ) -> list[ActionRecord]:
        """No fresh data to judge a left verification by: roll the unverified change back."""
        book = books.get(pending.playbook)
        why = _Failed(
            "failed",
            "stale",
            f"no fresh data for {pending.incident.subject.key()} to verify the change after a "
            "restart; an unverified change is rolled back",
        )
        ctx = self._left_context(pending.incident, pending.playbook, book)
        return await self._fail_left(pending, book, ctx, why, "abandoned", now)

    async def restore_intent(
        self, pending: PendingIntent, books: Mapping[str, Playbook], now: float
    ) -> list[ActionRecord]:
        """Put back the state from before a change a stopped daemon left in flight.

        Whether the change landed is unknown, and its undo is safe either way (the previous
        config loaded again, the previous count set again), so it runs without waiting for
        data; the change itself is never repeated. The rest of the run is then rolled back
        and escalated, as if the step had failed. The intent is marked before the call, so
        a daemon that dies during the restore does not restore again at its next start.
        """
        book = books.get(pending.playbook)
        ctx = self._left_context(pending.incident, pending.playbook, book)
        self.store.settle_intent(pending.intent_id, "restoring")
        self.env.on_run()  # the next leader must not restore it again
        why = (
            f"{pending.action} was in flight when the daemon stopped; its outcome on the "
            "server is unknown, so the state from before it was put back (the change is not "
            "repeated)"
        )
        step = Step(action=pending.undo_action, params=dict(pending.undo_params))
        # Like a restore on resolve: it puts back what the server had, which no bound limits.
        first = await self._run_one(
            pending.playbook,
            pending.incident,
            replace(ctx, restoring=True),
            step,
            ok_status="rolled_back",
            phase="rollback",
            reason=why,
        )
        ok = first.status == "rolled_back"
        self.store.settle_intent(pending.intent_id, "restored" if ok else "restore_failed")
        subject = pending.incident.subject
        self.store.record_run(
            RunRecord(
                pending.playbook,
                subject.key(),
                model_key(subject),
                now,
                False,
                self.actions[step.action].reloads_model if step.action in self.actions else False,
            ),
            incident_id=pending.incident.incident_id,
        )
        self.env.on_run()
        undos = self.store.undos_by_id(pending.undo_ids)
        failure = _Failed("failed", "", f"{pending.action} was in flight when the daemon stopped")
        rollback = await self._rollback(
            book, pending.incident, ctx, undos, failure, leaning_on=pending.leaning_on or None
        )
        return [first, *rollback]

    async def _fail_left(  # noqa: PLR0917 - the verification, its context and the verdict
        self,
        pending: PendingVerification,
        book: Playbook | None,
        ctx: ActionContext,
        failure: _Failed,
        state: str,
        now: float,
    ) -> list[ActionRecord]:
        """Record a left verification's failed verdict, then roll back and escalate."""
        self.store.settle_verification(pending.verification_id, state)
        first = self.record(
            pending.incident,
            pending.playbook,
            "verify",
            {"checks": list(pending.checks)},
            False,
            "failed",
            now,
            guard=failure.guard,
            reason=failure.reason,
        )
        undos = self.store.undos_by_id(pending.undo_ids)
        # The run's own reliance on another incident's raise, as it was when it began the
        # check: its rollback spares that raise as the live run's would.
        rollback = await self._rollback(
            book, pending.incident, ctx, undos, failure, leaning_on=pending.leaning_on or None
        )
        return [first, *rollback]

    def _left_context(
        self, incident: IncidentEvent, playbook: str, book: Playbook | None
    ) -> ActionContext:
        """Return the context for work a stopped daemon left, with or without its playbook."""
        if book is not None:
            return self._context(book, incident, False)
        return self._bare_context(incident, playbook)

    def _bare_context(self, event: IncidentEvent, playbook: str) -> ActionContext:
        """Return a context for work whose playbook is no longer loaded (default bounds)."""
        subject = event.subject
        features, clock = self.env.features, self.env.clock
        return ActionContext(
            subject=subject,
            event=event,
            playbook=playbook,
            bounds=merge_bounds({}),
            dry_run=False,
            triton=self.env.triton_for(subject),
            triton_withheld=self._withheld(subject),
            kube=self.env.kube,
            slack=self.env.slack,
            slack_channel=self.env.slack_channel,
            feature_value=lambda s, n: features.feature_value(s, n, clock()),
            sleep=self.env.sleep,
        )

    async def _rollback(
        self,
        book: Playbook | None,
        event: IncidentEvent,
        ctx: ActionContext,
        undos: list[PendingUndo],
        failure: _Failed,
        *,
        leaning_on: str | None = None,
    ) -> list[ActionRecord]:
        """Put back what the run changed: its undos, or the playbook's own ``rollback:``.

        A run that relies on another incident's raise, or whose change was skipped as
        covered by it (``leaning_on``), changed nothing of its own: the change steps of its
        ``rollback:`` are recorded skipped as covered, since they would undo the raise that
        incident still relies on. Its notifications and checks still run.
        """
        records: list[ActionRecord] = []
        name = book.name if book is not None else undos[0].playbook if undos else ""
        if book is None or book.rollback is None:
            steps = [(u.undo_id, Step(action=u.action, params=u.params)) for u in reversed(undos)]
        else:
            steps = [(0, s) for s in book.rollback]
            for undo in undos:
                self.store.mark_undo_done(undo.undo_id)
        for undo_id, step in steps:
            # A raise another open incident relies on stays: its restore puts it back later.
            kept = (
                self._still_relied_on(
                    PendingUndo(undo_id, name, step.action, dict(step.params)), event.incident_id
                )
                if undo_id
                else None
            )
            if kept is None and not undo_id and leaning_on is not None:
                action = self.actions.get(step.action)
                kept = leaning_on if action is not None and action.kind == "change" else None
            if kept is not None:
                records.append(
                    self.record(
                        event,
                        name,
                        step.action,
                        _short(dict(step.params)),
                        False,
                        "skipped",
                        self.env.clock(),
                        guard="covered",
                        reason=(
                            f"incident {kept} still relies on it; its restore puts it back"
                            if undo_id
                            else f"this run relies on the raise by incident {kept}, which "
                            "this rollback would undo; the change stays"
                        ),
                        phase="rollback",
                    )
                )
                if undo_id:
                    self.store.mark_undo_done(undo_id)
                continue
            records.append(
                await self._run_one(
                    name,
                    event,
                    ctx,
                    step,
                    ok_status="rolled_back",
                    phase="rollback",
                    reason=f"after: {failure.reason}",
                )
            )
            if undo_id:
                self.store.mark_undo_done(undo_id)
        for step in book.escalate if book is not None else []:
            records.append(
                await self._run_one(
                    name,
                    event,
                    ctx,
                    step,
                    ok_status="ran",
                    phase="escalate",
                    reason=f"escalated: {failure.reason}",
                )
            )
        return records

    async def _run_one(
        self,
        book: Playbook | str,
        event: IncidentEvent,
        ctx: ActionContext,
        step: Step,
        *,
        ok_status: Status,
        phase: Phase,
        reason: str,
    ) -> ActionRecord:
        name = book if isinstance(book, str) else book.name
        now = self.env.clock()
        try:
            rendered, params = self._params(step, event, now)
            result = await self.actions[step.action].run(ctx, params)
        except Exception as exc:  # rollback and escalation must never take the daemon down
            guard, why = (
                (exc.guard, exc.reason)
                if isinstance(exc, _Failed)
                else ("", f"{phase} failed: {exc}")
            )
            return self.record(
                event,
                name,
                step.action,
                step.params,
                False,
                "failed",
                now,
                guard=guard,
                reason=why,
                phase=phase,
            )
        return self.record(
            event,
            name,
            step.action,
            _short(rendered),
            False,
            ok_status,
            self.env.clock(),
            reason=reason,
            detail=result.detail,
            phase=phase,
        )

    # ---- approvals ------------------------------------------------------------------------
    def _ask_approval(  # noqa: PLR0917 - the step, where it stands in its run, what it would do
        self,
        event: IncidentEvent,
        book: Playbook,
        index: int,
        step: Step,
        rendered: dict[str, Any],
        undos: list[PendingUndo],
        leaning_on: str | None,
    ) -> ActionRecord:
        """Write the step down as waiting for approval (before anyone can click) and record it.

        With it goes the raise the run relied on so far (``leaning_on``): the run resumed
        once approved, after a restart too, rolls back sparing it as it would have.
        """
        now = self.env.clock()
        approvers = approvers_for(step, self.env.approvers)
        pending = self.store.begin_approval(
            f"apr-{secrets.token_hex(8)}",
            event,
            book.name,
            index,
            step.action,
            rendered,
            approvers,
            now,
            now + approval_timeout(step, self.env.approval_timeout_s),
            [u.undo_id for u in undos],
            leaning_on=leaning_on or "",
        )
        who = ", ".join(approvers) or "anyone in the channel"
        rec = self.record(
            event,
            book.name,
            step.action,
            _short(rendered),
            False,
            "awaiting_approval",
            now,
            guard="approval",
            reason=f"waits for approval by {who} for {pending.expires_at - now:.0f}s",
            detail={
                "approval_id": pending.approval_id,
                "approvers": list(approvers),
                "expires_at": round(pending.expires_at, 3),
            },
        )
        self.env.on_approval(pending, "pending", "", None)
        return rec

    async def resume_approved(
        self,
        pending: PendingApproval,
        books: Mapping[str, Playbook],
        now: float,
        planned: Callable[[Step], bool] = lambda step: False,
        incident: IncidentEvent | None = None,
    ) -> list[ActionRecord]:
        """Run an approved step and the rest of its run; earlier steps' undos roll back with it.

        ``incident`` is the incident as the engine knows it now, when it is still open (its
        evidence fills later steps' templates); else the approval's own record of it. A
        playbook removed, or changed at that step, since the approval was asked for runs
        nothing: the human approved a step that no longer exists.

        An approval handed over from another replica names that replica's incident id. The
        run keeps it, so its records go on in the thread the approval is in; its restores are
        then filed under this replica's own id, the one whose resolution restores them.
        """
        event = incident or pending.incident
        if event.incident_id != pending.incident.incident_id:
            local = event.incident_id
            event = replace(event, incident_id=pending.incident.incident_id)
            try:
                return await self._resume(pending, books, now, planned, event)
            finally:
                self.store.hand_over_undos(pending.incident.incident_id, local)
        return await self._resume(pending, books, now, planned, event)

    async def _resume(
        self,
        pending: PendingApproval,
        books: Mapping[str, Playbook],
        now: float,
        planned: Callable[[Step], bool],
        event: IncidentEvent,
    ) -> list[ActionRecord]:
        """Run the approved step of ``pending`` and the rest of its run under ``event``."""
        book = books.get(pending.playbook)
        steps = book.all_steps() if book is not None else []
        if book is None or pending.step_index >= len(steps):
            why = f"playbook {pending.playbook} is no longer loaded; nothing runs"
        elif steps[pending.step_index].action != pending.action:
            why = f"playbook {pending.playbook} changed at this step since approval; nothing runs"
        else:
            undos = self.store.undos_by_id(pending.undo_ids)
            if not all(planned(s) for s in steps[pending.step_index :]):
                self.env.on_run()  # the next leader must see the run go on
            return await self._execute(book, event, now, planned, undos=undos, approved=pending)
        return [
            self.record(
                event,
                pending.playbook,
                pending.action,
                dict(pending.params),
                False,
                "skipped",
                now,
                guard="approval",
                reason=why,
            )
        ]

    def settle_approval(
        self,
        pending: PendingApproval,
        state: Status,
        by: str,
        now: float,
        reason: str,
    ) -> ActionRecord | None:
        """Record how an approval ended (approved, rejected, expired) and who decided.

        Returns None when it had already ended (a second click, or a click racing the
        expiry): the first decision stands and nothing is recorded twice.
        """
        if not self.store.settle_approval(pending.approval_id, state, by, now):
            return None
        detail: dict[str, Any] = {"approval_id": pending.approval_id}
        if by:
            detail["decided_by"] = by
        rec = self.record(
            pending.incident,
            pending.playbook,
            pending.action,
            dict(pending.params),
            False,
            state,
            now,
            guard="approval",
            reason=reason,
            detail=detail,
        )
        self.env.on_approval(pending, state, by, now)
        return rec

    def drop_reason(self, pending: PendingApproval, books: Mapping[str, Playbook]) -> str:
        """Say what a refusal or an expiry drops: the step and the rest of its run."""
        book = books.get(pending.playbook)
        later = dropped_after(book, pending.step_index) if book is not None else []
        if not later:
            return "the step is dropped; the changes of earlier steps stay"
        return (
            f"the step and the {len(later)} after it ({', '.join(later)}) are dropped; "
            "the changes of earlier steps stay"
        )

    def drop_approvals(self, event: IncidentEvent, now: float) -> list[ActionRecord]:
        """Expire the approvals of a resolved incident: there is nothing left to fix.

        That includes one handed over from another replica under that replica's id for the
        same incident (``same_incident``).
        """
        out = []
        mine = [p for p in self.store.pending_approvals() if same_incident(p.incident, event)]
        for pending in mine:
            rec = self.settle_approval(
                pending,
                "expired",
                "",
                now,
                "the incident resolved before anyone decided; the step is dropped",
            )
            if rec is not None:
                out.append(rec)
        return out

    # ---- resolution -----------------------------------------------------------------------
    def hand_over(self, resolved: IncidentEvent, successor: IncidentEvent) -> list[ActionRecord]:
        """Give the restores of ``resolved`` to ``successor``: they run when that one resolves."""
        moved = self.store.hand_over_undos(resolved.incident_id, successor.incident_id)
        reason = (
            f"{successor.cause} opened on the subject as {resolved.cause} resolved; "
            f"the restore waits until {successor.incident_id} resolves"
        )
        return [
            self.record(
                resolved,
                undo.playbook,
                undo.action,
                _short(undo.params),
                undo.dry_run,
                "deferred",
                resolved.at,
                reason=reason,
                phase="restore",
            )
            for undo in moved
        ]

    async def resolve(
        self,
        event: IncidentEvent,
        books: Mapping[str, Playbook],
        now: float,
        leader_elsewhere: str | None = None,
    ) -> list[ActionRecord]:
        """Record the resolution and run (or, for dry-run plans, plan) the pending restores.

        A resolution without recovery evidence (the subject stopped reporting) lifts nothing:
        a shed stays until fresh data shows the subject recovered, and each restore is
        recorded as deferred.

        Restores on resolve another replica handed over (with a verification, a change in
        flight or an approval) are filed under that replica's id for the same incident
        (``same_incident``): this resolution takes them first, so they are put back too.

        A replica that does not lead (``leader_elsewhere``) takes none of them: the leader may
        still be verifying that change, so each is recorded skipped with guard ``leader`` and
        left pending for the leader's own resolution. Its own restores still run: only it
        holds what they put back.
        """
        self.store.resolve_incident(event.incident_id, now, recovered=event.recovered)
        held: list[ActionRecord] = []
        if leader_elsewhere is not None:
            held = self._leave_restores_to_leader(event, now, leader_elsewhere)
        else:
            for theirs in self.store.adopted_incidents():
                if same_incident(theirs, event):
                    self.store.hand_over_undos(theirs.incident_id, event.incident_id)
        dropped = held + self.drop_approvals(event, now)
        if not event.recovered:
            why = (
                f"closed without recovery evidence; the restore waits until "
                f"{event.subject.key()} reports again and has recovered"
            )
            return dropped + [
                self.record(
                    event,
                    undo.playbook,
                    undo.action,
                    _short(undo.params),
                    undo.dry_run,
                    "deferred",
                    now,
                    reason=why,
                    phase="restore",
                )
                for undo in self.store.pending_undos(event.incident_id, on_resolve=True)
            ]
        records: list[ActionRecord] = dropped
        for undo in self.store.pending_undos(event.incident_id, on_resolve=True, dry_run=True):
            records.append(
                self.record(
                    event,
                    undo.playbook,
                    undo.action,
                    undo.params,
                    True,
                    "planned",
                    now,
                    reason="restore on resolve",
                    phase="restore",
                )
            )
            self.store.mark_undo_done(undo.undo_id)
        for undo in self.store.pending_undos(event.incident_id, on_resolve=True, dry_run=False):
            kept = self._still_relied_on(undo, event.incident_id)
            if kept is not None:
                records.append(
                    self.record(
                        event,
                        undo.playbook,
                        undo.action,
                        _short(undo.params),
                        False,
                        "skipped",
                        now,
                        guard="covered",
                        reason=f"incident {kept} still relies on it; its restore puts it back",
                        phase="restore",
                    )
                )
                self.store.mark_undo_done(undo.undo_id)
                continue
            # A playbook removed since it acted still gets its change put back.
            book = books.get(undo.playbook)
            base = (
                self._context(book, event, False)
                if book is not None
                else self._bare_context(event, undo.playbook)
            )
            # Restores put back what the server had; bounds guard new values only.
            ctx = replace(base, restoring=True)
            step = Step(action=undo.action, params=undo.params)
            records.append(
                await self._run_one(
                    undo.playbook,
                    event,
                    ctx,
                    step,
                    ok_status="ran",
                    phase="restore",
                    reason="restore on resolve",
                )
            )
            self.store.mark_undo_done(undo.undo_id)
            self.store.record_run(
                RunRecord(
                    undo.playbook,
                    event.subject.key(),
                    model_key(event.subject),
                    now,
                    False,
                    self.actions[undo.action].reloads_model,
                ),
                incident_id=event.incident_id,
            )
        return records

    def _leave_restores_to_leader(
        self, event: IncidentEvent, now: float, leader_elsewhere: str
    ) -> list[ActionRecord]:
        """Record the restores the leader handed over for ``event`` as left to the leader."""
        ids = [
            theirs.incident_id
            for theirs in self.store.adopted_incidents()
            if same_incident(theirs, event) and theirs.incident_id != event.incident_id
        ]
        why = f"{leader_elsewhere}; the restore is left to the leader"
        return [
            self.record(
                event,
                undo.playbook,
                undo.action,
                _short(undo.params),
                undo.dry_run,
                "skipped",
                now,
                guard="leader",
                reason=why,
                phase="restore",
            )
            for incident_id in ids
            for undo in self.store.pending_undos(incident_id, on_resolve=True)
        ]

    def _still_relied_on(self, undo: PendingUndo, incident_id: str) -> str | None:
        """Return another incident whose pending restore puts back the same scale, if any.

        Every incident that relied on one raise holds a restore to the count from before it;
        only the last of them to resolve runs it. The incident's own earlier restores of the
        same object (two raises in one run) are not another incident: they run after it.
        """
        target = scale_target(undo.action, undo.params)
        if target is None:
            return None
        for other, held in self.store.live_undos_elsewhere(undo.action, incident_id):
            if held.undo_id != undo.undo_id and scale_target(held.action, held.params) == target:
                return other
        return None
