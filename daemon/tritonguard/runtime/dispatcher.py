"""Dispatcher: incident events → playbooks → guards → steps (or plans), verify, rollback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    BoundsExceeded,
    RegisteredAction,
    TritonLike,
    UndoStep,
    load_all,
)
from tritonguard.core.config_patch import Change, reverse_patch
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings, RunRecord, decide, merge_bounds, model_key
from tritonguard.core.playbook_model import (
    Playbook,
    PlaybookError,
    Step,
    check_unique,
    load_playbooks_text,
)
from tritonguard.core.templating import TemplateError, incident_context, render_value
from tritonguard.runtime.audit_store import AuditStore

Record = dict[str, Any]
HISTORY_S = 86400.0


@dataclass(slots=True)
class DispatchEnv:
    """The outside world as the dispatcher sees it; every part is optional for dry-run."""

    triton_for: Callable[[Subject], TritonLike | None] = lambda s: None
    kube: Any = None
    slack: Any = None
    slack_channel: str = "#tritonguard"
    feature_value: Callable[[Subject, str, float], float | None] = lambda s, n, t: None
    is_fresh: Callable[[Subject, float], bool] = lambda s, t: True
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.time
    static_configs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    alerts_for: Callable[[IncidentEvent], frozenset[str]] = lambda e: frozenset()
    # Leader election (tritonguard.runtime.leader_election): why this replica may not act, if so;
    # and a hook told about every real run so the next leader learns of it at once.
    leader_elsewhere: Callable[[], str | None] = lambda: None
    on_run: Callable[[], None] = lambda: None


class _Failed(Exception):
    def __init__(self, status: str, guard: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.guard, self.reason = status, guard, reason


class Dispatcher:
    """Runs playbooks for incident events; every decision goes to the audit store.

    ``handle`` awaits the whole playbook (including a verify wait), so the daemon runs it in a
    task of its own; replay and ``tritonguard test`` await it inline because in dry-run nothing
    waits.
    """

    def __init__(
        self,
        playbooks: list[Playbook],
        store: AuditStore,
        *,
        settings: GuardSettings | None = None,
        env: DispatchEnv | None = None,
    ) -> None:
        self.playbooks = playbooks
        self.store = store
        self.settings = settings or GuardSettings()
        self.env = env or DispatchEnv()
        self.actions: dict[str, RegisteredAction] = load_all()
        self._open: dict[str, IncidentEvent] = {}
        self._done: set[tuple[str, str]] = set()
        self._skips: set[tuple[str, str, str]] = set()
        self._busy: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._dry_undos: dict[str, list[tuple[str, UndoStep]]] = {}

    async def handle(self, event: IncidentEvent, now: float | None = None) -> list[Record]:
        """Process one incident transition and return its action records."""
        at = event.at if now is None else now
        s = event.subject
        if event.event == "resolved":
            self._open.pop(event.incident_id, None)
            self.store.resolve_incident(event.incident_id, at)
            return await self._restore_on_resolve(event, at)
        self.store.record_incident(
            incident_id=event.incident_id,
            cause=event.cause,
            namespace=s.namespace,
            model=s.model,
            pod=s.pod,
            opened_at=event.opened_at,
        )
        self._open[event.incident_id] = event
        return await self._consider(event, at)

    async def tick(self, now: float) -> dict[str, list[Record]]:
        """Re-check open incidents whose playbooks wait for ``held_for``; return new records."""
        out: dict[str, list[Record]] = {}
        for incident_id in list(self._open):
            records = await self.reconsider(incident_id, now)
            if records:
                out[incident_id] = records
        return out

    async def reconsider(self, incident_id: str, now: float) -> list[Record]:
        """Re-check one open incident (``held_for`` reached, a guard cleared); [] if not open."""
        event = self._open.get(incident_id)
        if event is None:
            return []
        return await self._consider(event, now)

    def open_incidents(self) -> list[IncidentEvent]:
        """Return the latest event of every open incident."""
        return list(self._open.values())

    async def _consider(self, event: IncidentEvent, now: float) -> list[Record]:
        records: list[Record] = []
        alerts = self.env.alerts_for(event)
        for book in self.playbooks:
            key = (event.incident_id, book.name)
            if key in self._done or book.matches(event, alerts) is not None:
                continue
            if now - event.opened_at < book.when.held_for:
                continue
            decision = decide(
                playbook=book.name,
                guards=book.guards,
                subject=event.subject,
                now=now,
                fresh=self.env.is_fresh(event.subject, now),
                busy=self._busy,
                history=self.store.history(now - HISTORY_S),
                settings=self.settings,
                leader_elsewhere=self.env.leader_elsewhere(),
            )
            if not decision.allowed:
                skip_key = (event.incident_id, book.name, decision.guard)
                if skip_key in self._skips:
                    continue
                self._skips.add(skip_key)
                records.append(
                    self._record(
                        event,
                        book,
                        "*",
                        {},
                        decision.dry_run,
                        "skipped",
                        now,
                        guard=decision.guard,
                        reason=decision.reason,
                    )
                )
                continue
            self._done.add(key)
            records += await self._run(book, event, now, decision.dry_run)
        return records

    def _refused(  # noqa: PLR0917 - the same seven facts as _record
        self,
        event: IncidentEvent,
        book: Playbook,
        step: Step,
        dry_run: bool,
        exc: _Failed,
        now: float,
    ) -> Record:
        """Record a step that could not start (bad template, parameters or a guard)."""
        return self._record(
            event,
            book,
            step.action,
            step.params,
            dry_run,
            exc.status,
            now,
            guard=exc.guard,
            reason=exc.reason,
        )

    def _record(  # noqa: PLR0917 - every record names these seven; the rest are keywords
        self,
        event: IncidentEvent,
        book: Playbook | str,
        action: str,
        params: dict[str, Any],
        dry_run: bool,
        status: str,
        now: float,
        *,
        guard: str = "",
        reason: str = "",
        detail: dict[str, Any] | None = None,
        phase: str = "step",
    ) -> Record:
        name = book if isinstance(book, str) else book.name
        self.store.record_decision(
            at=now,
            incident_id=event.incident_id,
            event=event.event,
            playbook=name,
            subject=event.subject.key(),
            action=action,
            params=params,
            dry_run=dry_run,
            status=status,
            guard=guard,
            reason=reason,
            detail=detail,
        )
        record: Record = {
            "playbook": name,
            "action": action,
            "params": params,
            "dry_run": dry_run,
            "status": status,
            "reason": reason,
            "at": round(now, 3),
            "phase": phase,
        }
        if guard:
            record["guard"] = guard
        if detail:
            record["detail"] = detail
        return record

    def _context(self, book: Playbook, event: IncidentEvent, dry_run: bool) -> ActionContext:
        subject = event.subject
        return ActionContext(
            subject=subject,
            event=event,
            playbook=book.name,
            bounds=merge_bounds(book.guards.bounds),
            dry_run=dry_run,
            triton=self.env.triton_for(subject),
            kube=self.env.kube,
            slack=self.env.slack,
            slack_channel=self.env.slack_channel,
            feature_value=lambda s, n: self.env.feature_value(s, n, self.env.clock()),
            sleep=self.env.sleep,
            static_configs=self.env.static_configs,
        )

    def _params(self, step: Step, event: IncidentEvent, now: float) -> tuple[dict[str, Any], Any]:
        action = self.actions.get(step.action)
        if action is None:
            raise _Failed("failed", "", f"unknown action {step.action!r}")
        try:
            rendered = render_value(step.params, incident_context(event, now))
        except TemplateError as exc:
            raise _Failed("failed", "template", str(exc)) from None
        try:
            return rendered, action.params.model_validate(rendered)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise _Failed("failed", "params", f"{loc}: {first['msg']}") from None

    async def _run(
        self, book: Playbook, event: IncidentEvent, now: float, dry_run: bool
    ) -> list[Record]:
        subject = event.subject
        reload = any(
            self.actions[s.action].reloads_model
            for s in book.all_steps()
            if s.action in self.actions
        )
        self.store.record_run(
            RunRecord(book.name, subject.key(), model_key(subject), now, dry_run, reload)
        )
        if not dry_run:
            self.env.on_run()
        lock = self._locks.setdefault(subject.key(), asyncio.Lock())
        self._busy.add(subject.key())
        try:
            async with lock:
                if dry_run:
                    return await self._plan(book, event, now)
                return await self._execute(book, event, now)
        finally:
            self._busy.discard(subject.key())

    async def _plan(self, book: Playbook, event: IncidentEvent, now: float) -> list[Record]:
        records: list[Record] = []
        ctx = self._context(book, event, True)
        for step in book.all_steps():
            try:
                rendered, params = self._params(step, event, now)
            except _Failed as exc:
                records.append(self._refused(event, book, step, True, exc, now))
                break
            action = self.actions[step.action]
            try:
                detail = await action.plan(ctx, params) if action.plan else {}
            except BoundsExceeded as exc:
                records.append(
                    self._record(
                        event,
                        book,
                        step.action,
                        rendered,
                        True,
                        "skipped",
                        now,
                        guard="bounds",
                        reason=str(exc),
                    )
                )
                break
            except Exception as exc:  # planning reads at most; report why and keep planning
                detail = {"note": f"could not plan in detail: {exc}"}
            records.append(
                self._record(
                    event,
                    book,
                    step.action,
                    rendered,
                    True,
                    "planned",
                    now,
                    reason="dry-run",
                    detail=detail,
                )
            )
            if getattr(params, "restore_on_resolve", False):
                self._dry_undos.setdefault(event.incident_id, []).append(
                    (book.name, self._planned_restore(detail))
                )
        return records

    def _planned_restore(self, detail: Mapping[str, Any]) -> UndoStep:
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
            return UndoStep("triton.load", {"model": model}, True)
        params = {"model": model, "set": dict(reverse.set), "remove": list(reverse.remove)}
        return UndoStep("triton.update_config", params, True)

    @staticmethod
    def successors(events: list[IncidentEvent]) -> dict[str, IncidentEvent]:
        """Map each incident that resolves as another opens on its subject (same batch) to it."""
        opened = {e.subject.key(): e for e in events if e.event == "opened"}
        return {
            e.incident_id: opened[e.subject.key()]
            for e in events
            if e.event == "resolved" and e.subject.key() in opened
        }

    def hand_over(self, resolved: IncidentEvent, successor: IncidentEvent) -> list[Record]:
        """Give the restores of ``resolved`` to ``successor``: they run when that one resolves.

        The subject has not recovered, only its diagnosis moved (a retry storm held off by
        shedding is still an overload): lifting a shed now would restart the storm. Call before
        handling ``resolved``, in the same order of work on the subject.
        """
        moved = self.store.hand_over_undos(resolved.incident_id, successor.incident_id)
        dry = self._dry_undos.pop(resolved.incident_id, [])
        if dry:
            self._dry_undos.setdefault(successor.incident_id, []).extend(dry)
        reason = (
            f"{successor.cause} opened on the subject as {resolved.cause} resolved; "
            f"the restore waits until {successor.incident_id} resolves"
        )
        items = [(b, a, p, False) for b, a, p in moved] + [
            (b, u.action, u.params, True) for b, u in dry
        ]
        return [
            self._record(
                resolved,
                book_name,
                action,
                _short(params),
                dry_run,
                "deferred",
                resolved.at,
                reason=reason,
                phase="restore",
            )
            for book_name, action, params, dry_run in items
        ]

    async def _execute(self, book: Playbook, event: IncidentEvent, now: float) -> list[Record]:
        records: list[Record] = []
        ctx = self._context(book, event, False)
        undos: list[tuple[int, UndoStep]] = []
        failure: _Failed | None = None
        for step in book.all_steps():
            try:
                rendered, params = self._params(step, event, now)
            except _Failed as exc:
                failure = exc
                records.append(self._refused(event, book, step, False, exc, now))
                break
            try:
                result = await self.actions[step.action].run(ctx, params)
            except BoundsExceeded as exc:
                failure = _Failed("skipped", "bounds", str(exc))
            except ActionFailed as exc:
                failure = _Failed("failed", "", str(exc))
            except Exception as exc:  # a client error or a bug: recorded, never fatal
                failure = _Failed("failed", "", f"{type(exc).__name__}: {exc}")
            if failure is not None:
                records.append(
                    self._record(
                        event,
                        book,
                        step.action,
                        rendered,
                        False,
                        failure.status,
                        self.env.clock(),
                        guard=failure.guard,
                        reason=failure.reason,
                    )
                )
                if self.actions[step.action].kind == "notify":
                    # A Slack outage must not stop (or undo) a remediation: record it, go on.
                    failure = None
                    continue
                break
            records.append(
                self._record(
                    event,
                    book,
                    step.action,
                    rendered,
                    False,
                    "ran",
                    self.env.clock(),
                    detail=result.detail,
                )
            )
            if result.undo is not None:
                undo_id = self.store.add_undo(
                    event.incident_id,
                    book.name,
                    result.undo.action,
                    result.undo.params,
                    result.undo.on_resolve,
                )
                undos.append((undo_id, result.undo))
        if failure is not None:
            records += await self._rollback(book, event, ctx, undos, failure)
        return records

    async def _rollback(
        self,
        book: Playbook,
        event: IncidentEvent,
        ctx: ActionContext,
        undos: list[tuple[int, UndoStep]],
        failure: _Failed,
    ) -> list[Record]:
        records: list[Record] = []
        if book.rollback is None:
            steps = [
                (undo_id, Step(action=u.action, params=u.params)) for undo_id, u in reversed(undos)
            ]
        else:
            steps = [(0, s) for s in book.rollback]
            for undo_id, _ in undos:
                self.store.mark_undo_done(undo_id)
        for undo_id, step in steps:
            records.append(
                await self._run_one(
                    book,
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
        for step in book.escalate:
            records.append(
                await self._run_one(
                    book,
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
        book: Playbook,
        event: IncidentEvent,
        ctx: ActionContext,
        step: Step,
        *,
        ok_status: str,
        phase: str,
        reason: str,
    ) -> Record:
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
            return self._record(
                event,
                book,
                step.action,
                step.params,
                False,
                "failed",
                now,
                guard=guard,
                reason=why,
                phase=phase,
            )
        return self._record(
            event,
            book,
            step.action,
            _short(rendered),
            False,
            ok_status,
            self.env.clock(),
            reason=reason,
            detail=result.detail,
            phase=phase,
        )

    async def _restore_on_resolve(self, event: IncidentEvent, now: float) -> list[Record]:
        records: list[Record] = []
        for book_name, undo in self._dry_undos.pop(event.incident_id, []):
            records.append(
                self._record(
                    event,
                    book_name,
                    undo.action,
                    undo.params,
                    True,
                    "planned",
                    now,
                    reason="restore on resolve",
                    phase="restore",
                )
            )
        pending = self.store.pending_undos(event.incident_id, on_resolve=True)
        if not pending:
            return records
        book_by_name = {b.name: b for b in self.playbooks}
        for undo_id, book_name, action, params in pending:
            book = book_by_name.get(book_name)
            if book is None:
                continue
            # Restores put back what the server had; bounds guard new values only.
            ctx = replace(self._context(book, event, False), restoring=True)
            step = Step(action=action, params=params)
            records.append(
                await self._run_one(
                    book,
                    event,
                    ctx,
                    step,
                    ok_status="ran",
                    phase="restore",
                    reason="restore on resolve",
                )
            )
            self.store.mark_undo_done(undo_id)
            self.store.record_run(
                RunRecord(
                    book_name,
                    event.subject.key(),
                    model_key(event.subject),
                    now,
                    False,
                    self.actions[action].reloads_model,
                )
            )
        return records


def _short(params: dict[str, Any]) -> dict[str, Any]:
    """Keep records readable: a whole model config is summarised, not copied."""
    out = dict(params)
    if isinstance(out.get("config"), dict):
        out["config"] = "<previous config>"
    return out


def playbook_paths(paths: list[Path]) -> list[Path]:
    """Expand directories into their ``*.yaml``/``*.yml`` files (not recursing into tests/)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(
                p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()
            )
        else:
            out.append(path)
    return out


def load_playbook_files(paths: list[Path]) -> list[Playbook]:
    """Load and validate playbooks from files and directories; PlaybookError lists every problem."""
    books: list[Playbook] = []
    problems: list[str] = []
    cat = {name: a.params for name, a in load_all().items()}
    for path in playbook_paths(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}:1:1: cannot read: {exc}; check the path")
            continue
        try:
            books += load_playbooks_text(text, str(path), cat)
        except PlaybookError as exc:
            problems += exc.problems
    if not problems:
        try:
            check_unique(books)
        except PlaybookError as exc:
            problems += exc.problems
    if problems:
        raise PlaybookError(problems)
    return books


class DryRunPlanner:
    """Synchronous dry-run planning for replay: what the playbooks would do, and when."""

    def __init__(self, directory: Path) -> None:
        """Load the playbooks; raises PlaybookError (a ValueError) when they do not load."""
        books = load_playbook_files([directory])
        self._disp = Dispatcher(books, AuditStore(), settings=GuardSettings(dry_run=True))
        self._loop = asyncio.new_event_loop()

    def plan(self, event: IncidentEvent, successor: IncidentEvent | None = None) -> list[Record]:
        """Plan one incident transition: steps due now, or skipped and why.

        ``successor`` is the incident that opened on the subject as this one resolved (see
        ``Dispatcher.successors``); restores then wait for it.
        """
        handed = self._disp.hand_over(event, successor) if successor is not None else []
        records = handed + self._loop.run_until_complete(self._disp.handle(event, event.at))
        late = self._loop.run_until_complete(self._disp.tick(event.at))
        return records + late.get(event.incident_id, [])

    def tick(self, now: float) -> dict[str, list[Record]]:
        """Plan playbooks that became due at ``now`` (``held_for``), by incident id."""
        return self._loop.run_until_complete(self._disp.tick(now))

    def close(self) -> None:
        """Release the private event loop."""
        self._loop.close()


def dry_run_planner(directory: Path) -> DryRunPlanner:
    """Return a dry-run planner over the playbooks in ``directory``."""
    return DryRunPlanner(directory)
