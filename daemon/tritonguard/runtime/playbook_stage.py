"""The playbook stage: one driver from an evaluation's incidents to the audit trail.

The daemon, ``replay`` and ``tritonguard test`` all feed it the same way: after each
evaluation, :meth:`PlaybookStage.step` reads the ledger once, asks the pure core what to do
(:func:`tritonguard.core.playbook_decisions.decide_step`) and hands the work to the executor.
Work on one subject is chained, so a resolution never overtakes the playbook still acting on
its incident and no two actions run on a subject at once; playbooks for other subjects run
side by side. The daemon does not wait for the work (a verify step waits a minute);
``replay`` and ``test`` await :meth:`settle` after every step, where nothing waits. A step
waiting for approval ends its run's work; :meth:`resume_approved` chains the rest once a
human approves, and an evaluation past the deadline expires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings, step_dry_run
from tritonguard.core.playbook_decisions import (
    AbandonVerify,
    ExpireApproval,
    HandOver,
    NoteOpen,
    PendingApproval,
    Resolve,
    RestoreIntent,
    ResumeVerify,
    RunPlaybook,
    SkipPlaybook,
    StepContext,
    decide_step,
)
from tritonguard.core.playbook_model import Guards, Playbook, Step
from tritonguard.core.run_handover import same_incident
from tritonguard.logs import get_logger
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import RECORD_WRITTEN, PlaybookExecutor

# The guards look back a day (rates are per hour, cooldowns shorter).
HISTORY_S = 86400.0

OnRecords = Callable[[str, list[ActionRecord]], None]


@dataclass(slots=True)
class _Work:
    """One piece of chained work and the incident its records belong to."""

    incident_id: str
    task: asyncio.Task[list[ActionRecord]]


@dataclass(slots=True)
class StepResult:
    """What one step recorded at once, and the work it started (records when it finishes)."""

    immediate: list[tuple[str, ActionRecord]] = field(default_factory=list)
    started: list[_Work] = field(default_factory=list)

    async def records(self) -> dict[str, list[ActionRecord]]:
        """Wait for the started work; return every record by incident, in decision order."""
        out: dict[str, list[ActionRecord]] = {}
        for incident_id, rec in self.immediate:
            out.setdefault(incident_id, []).append(rec)
        for work in self.started:
            out.setdefault(work.incident_id, []).extend(await work.task)
        return {k: v for k, v in out.items() if v}


class PlaybookStage:
    """Turns each evaluation's incidents into playbook decisions and carries them out.

    ``open_incidents`` is the engine's incident book (``Engine.open_incidents``): the stage
    keeps no copy of it. ``alerts_for`` names the Alertmanager alerts firing for an incident;
    ``leader_elsewhere`` says why this replica may not act, if it may not.
    """

    def __init__(
        self,
        playbooks: Sequence[Playbook],
        executor: PlaybookExecutor,
        *,
        settings: GuardSettings | None = None,
        open_incidents: Callable[[], Iterable[IncidentEvent]] = list,
        alerts_for: Callable[[IncidentEvent], frozenset[str]] = lambda e: frozenset(),
        leader_elsewhere: Callable[[], str | None] = lambda: None,
        on_records: OnRecords | None = None,
    ) -> None:
        self.playbooks = list(playbooks)
        self.executor = executor
        self.settings = settings or GuardSettings()
        self.open_incidents = open_incidents
        self.alerts_for = alerts_for
        self.leader_elsewhere = leader_elsewhere
        self.on_records = on_records
        self._chains: dict[str, asyncio.Task[list[ActionRecord]]] = {}
        self._tasks: set[asyncio.Task[list[ActionRecord]]] = set()
        self._log = get_logger("tritonguard.playbooks")

    @property
    def store(self) -> AuditStore:
        """The audit store the executor writes to."""
        return self.executor.store

    def busy(self) -> frozenset[str]:
        """Subjects with playbook work in flight."""
        return frozenset(k for k, t in self._chains.items() if not t.done())

    def step(self, events: Sequence[IncidentEvent], now: float) -> StepResult:
        """Decide and start the work for one evaluation's ``events`` at ``now``; return at once."""
        open_now = list(self.open_incidents())
        ids = {e.incident_id for e in events} | {e.incident_id for e in open_now}
        ledger = self.store.ledger(
            ids,
            since=now - HISTORY_S,
            busy=self.busy(),
            in_flight=self.executor.verifying,
            intents_in_flight=self.executor.intending,
        )
        features = self.executor.env.features
        ctx = StepContext(
            playbooks=self.playbooks,
            ledger=ledger,
            settings=self.settings,
            now=now,
            fresh=lambda subject: features.is_fresh(subject, now),
            recovered=lambda subject: features.recovered(subject, now),
            alerts_for=self.alerts_for,
            reloads=self.executor.reloads,
            notify_only=self.executor.notify_only,
            leader_elsewhere=self.leader_elsewhere(),
        )
        result = StepResult()
        books = {b.name: b for b in self.playbooks}
        ex = self.executor
        for decision in decide_step(events, open_now, ctx):
            match decision:
                case NoteOpen(incident=e):
                    self.store.record_incident(
                        incident_id=e.incident_id,
                        cause=e.cause,
                        namespace=e.subject.namespace,
                        model=e.subject.model,
                        pod=e.subject.pod,
                        opened_at=e.opened_at,
                    )
                case SkipPlaybook(incident=e):
                    rec = ex.skipped(decision, now)
                    result.immediate.append((e.incident_id, rec))
                    self._report(e.subject, [rec])
                case RunPlaybook(incident=e, playbook=book, dry_run=dry):
                    ex.begin(book, e, dry, now)
                    run = functools.partial(
                        ex.run, book, e, dry, now, decision.notify_dry_run, relies=decision.relies
                    )
                    self._chain(result, e, run)
                case HandOver(resolved=old, successor=new):
                    self._chain(result, old, functools.partial(_at_once, ex.hand_over, old, new))
                case Resolve(incident=e):
                    resolve = functools.partial(ex.resolve, e, books, now, ctx.leader_elsewhere)
                    self._chain(result, e, resolve)
                case ResumeVerify(verification=v):
                    ex.verifying.add(v.verification_id)
                    work = functools.partial(ex.resume_verification, v, books, now)
                    self._chain(result, v.incident, _owning(ex.verifying, v.verification_id, work))
                case AbandonVerify(verification=v):
                    ex.verifying.add(v.verification_id)
                    work = functools.partial(ex.abandon_verification, v, books, now)
                    self._chain(result, v.incident, _owning(ex.verifying, v.verification_id, work))
                case RestoreIntent(intent=i):
                    ex.intending.add(i.intent_id)
                    work = functools.partial(ex.restore_intent, i, books, now)
                    self._chain(result, i.incident, _owning(ex.intending, i.intent_id, work))
                case ExpireApproval(approval=a):
                    timeout = a.expires_at - a.requested_at
                    why = f"nobody decided within {timeout:.0f}s; " + ex.drop_reason(a, books)
                    ended = ex.settle_approval(a, "expired", "", now, why)
                    if ended is not None:
                        result.immediate.append((a.incident.incident_id, ended))
                        self._report(a.incident.subject, [ended])
        return result

    def open_incident_for(self, pending: PendingApproval) -> IncidentEvent | None:
        """Return the open incident an approval still serves, or None when it is over.

        An approval handed over from another replica names that replica's incident id (ids
        hash each replica's own evaluation time): there it is the open incident on the same
        subject with the same cause, opened at about the same time (``same_incident``).
        """
        asked = pending.incident
        matching = [e for e in self.open_incidents() if same_incident(asked, e)]
        own = [e for e in matching if e.incident_id == asked.incident_id]
        return next(iter(own or matching), None)

    def why_not_now(self, pending: PendingApproval, now: float) -> str | None:
        """Return why an approved step must not run now (incident over, stale data), or None."""
        live = self.open_incident_for(pending)
        if live is None:
            return (
                f"the incident ({pending.incident.cause} on {pending.incident.subject.key()}) "
                "is no longer open"
            )
        if self.settings.require_fresh_data and not self.executor.env.features.is_fresh(
            live.subject, now
        ):
            return f"no fresh data for {live.subject.key()}; never act on stale data"
        return None

    def resume_approved(
        self, pending: PendingApproval, now: float, incident: IncidentEvent
    ) -> StepResult:
        """Run an approved step and the rest of its run, after any work on its subject.

        ``incident`` is the open incident it serves (:meth:`open_incident_for`), checked
        by the caller at the click. Each step follows its kind's dry-run switch as it stands
        now: a switch turned on while the step waited makes it a plan.
        """
        books = {b.name: b for b in self.playbooks}
        book = books.get(pending.playbook)
        ex = self.executor

        def planned(step: Step) -> bool:
            guards = book.guards if book is not None else Guards()
            return step_dry_run(self.settings, guards, notify=ex.notifies(step))

        result = StepResult()
        work = functools.partial(ex.resume_approved, pending, books, now, planned, incident)
        self._chain(result, pending.incident, work)
        return result

    async def run_step(
        self, events: Sequence[IncidentEvent], now: float
    ) -> dict[str, list[ActionRecord]]:
        """Step and wait for the work it started (replay and tests, where nothing waits)."""
        return await self.step(events, now).records()

    def _chain(
        self,
        result: StepResult,
        event: IncidentEvent,
        work: Callable[[], Awaitable[list[ActionRecord]]],
    ) -> None:
        key = event.subject.key()
        previous = self._chains.get(key)

        async def run() -> list[ActionRecord]:
            if previous is not None and not previous.done():
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.shield(previous)
            # Each record is reported as it is written: the thread's root must not wait for
            # the run's verify step (a minute) to say what was done, nor a Kubernetes Event.
            heard: set[int] = set()

            def hear(rec: ActionRecord) -> None:
                heard.add(id(rec))
                try:
                    self._report(event.subject, [rec])
                except Exception as exc:  # telling people must never stop a remediation
                    self._log.error(
                        "reporting a playbook record failed",
                        subject=key,
                        incident=event.incident_id,
                        exc_info=exc,
                    )

            token = RECORD_WRITTEN.set(hear)
            try:
                records = await work()
            except Exception as exc:  # a bug must not take the daemon down; log it loudly
                self._log.error(
                    "playbook work failed", subject=key, incident=event.incident_id, exc_info=exc
                )
                return []
            finally:
                RECORD_WRITTEN.reset(token)
            # Records the work returned without writing them (none today) are reported now.
            self._report(event.subject, [r for r in records if id(r) not in heard])
            return records

        task = asyncio.create_task(run(), name=f"playbooks:{key}")
        self._chains[key] = task
        self._tasks.add(task)
        task.add_done_callback(self._done)
        result.started.append(_Work(event.incident_id, task))

    def _done(self, task: asyncio.Task[list[ActionRecord]]) -> None:
        self._tasks.discard(task)
        for key, chained in list(self._chains.items()):
            if chained is task:
                del self._chains[key]

    def _report(self, subject: Subject, records: list[ActionRecord]) -> None:
        self.report(subject.key(), records)

    def report(self, subject_key: str, records: list[ActionRecord]) -> None:
        """Hand records written outside a step (an approval decided) to ``on_records``."""
        if self.on_records is not None and records:
            self.on_records(subject_key, records)

    def in_flight(self) -> list[asyncio.Task[list[ActionRecord]]]:
        """Return the work not yet finished."""
        return [t for t in self._tasks if not t.done()]

    async def settle(self) -> None:
        """Wait until nothing is in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _at_once(
    fn: Callable[[IncidentEvent, IncidentEvent], list[ActionRecord]],
    resolved: IncidentEvent,
    successor: IncidentEvent,
) -> list[ActionRecord]:
    """Run a synchronous step of the chain when the chain reaches it."""
    return fn(resolved, successor)


def _owning(
    in_flight: set[int],
    item_id: int,
    work: Callable[[], Awaitable[list[ActionRecord]]],
) -> Callable[[], Awaitable[list[ActionRecord]]]:
    """Keep a resumed verification (or a restored intent) marked in flight until it is done."""

    async def run() -> list[ActionRecord]:
        try:
            return await work()
        finally:
            in_flight.discard(item_id)

    return run
