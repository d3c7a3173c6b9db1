"""Property tests of the playbook stage in dry-run, over any life of incidents and restarts.

The real stage, executor and SQLite audit store run as the daemon runs them: a step is not
awaited (a verify waits a minute in the daemon), the clock jumps, and the daemon restarts on
the same audit file, cleanly or killed mid-work. Whatever happens, the runs on record never
pass a cooldown, a reload cooldown, ``max_runs_per_hour`` or the global budget, no playbook
runs twice for one incident, no plan leaves its bounds, and no two actions are ever in flight
on one subject at once (the actions here hold their subject for a while and tell).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.playbook_harness import incident
from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    RegisteredAction,
    catalog,
    load_all,
)
from tritonguard.core.findings import CAUSES, EventKind, IncidentEvent, Subject
from tritonguard.core.guards import HOUR_S, GuardSettings
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_stage import PlaybookStage, StepResult

T = TypeVar("T")
SUBJECTS = [
    Subject(ns, model, pod)
    for ns, model, pod in itertools.product(("prod", "staging"), ("resnet", "bert"), ("p0", "p1"))
]
CAUSE_POOL = CAUSES[:3]
T0 = 1_700_000_000.0
# The live configs plans read: resnet has room for one more instance, bert is at its bound.
STATIC_CONFIGS = {
    "resnet": {"name": "resnet", "instance_group": [{"kind": "KIND_CPU", "count": 2}]},
    "bert": {"name": "bert", "instance_group": [{"kind": "KIND_CPU", "count": 3}]},
}
MAX_INSTANCES = 3


class HoldParams(ActionParams):
    """How long the action keeps its subject busy, in turns of the event loop.

    Turns, not seconds: the interleaving then depends on the rules alone, so a failure
    replays exactly.
    """

    turns: int = 0


@dataclass(slots=True)
class SubjectWatch:
    """Counts the actions in flight on each subject; any overlap is written down."""

    in_flight: dict[str, int]
    overlaps: list[str]
    started: int = 0

    async def hold(self, ctx: ActionContext, params: HoldParams) -> dict[str, Any]:
        """Hold the subject for a while, as a reload or a scale-out would."""
        key = ctx.subject.key()
        if self.in_flight.get(key, 0):
            self.overlaps.append(f"{ctx.playbook} started on {key} while another action ran")
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.started += 1
        try:
            for _ in range(params.turns):
                await asyncio.sleep(0)
        finally:
            self.in_flight[key] -= 1
        return {"turns": params.turns}


async def _not_in_dry_run(ctx: ActionContext, params: Any) -> ActionResult:
    raise ActionFailed("the stage runs in dry-run here; nothing is run for real")


def _probe_actions(watch: SubjectWatch) -> dict[str, RegisteredAction]:
    """Two actions that hold their subject; one of them reloads the model."""
    return {
        name: RegisteredAction(
            name=name,
            params=HoldParams,
            run=_not_in_dry_run,
            plan=watch.hold,
            reloads_model=reloads,
            kind="change",
            doc="hold the subject",
        )
        for name, reloads in (("probe.hold", False), ("probe.reload", True))
    }


STEP_KINDS = {
    "hold": [{"action": "probe.hold", "params": {"turns": 6}}],
    "reload": [{"action": "probe.reload", "params": {"turns": 3}}],
    "add-instance": [
        {"action": "probe.hold", "params": {"turns": 2}},
        {
            "action": "triton.update_config",
            "params": {"add": {"instance_group[0].count": 1}, "restore_on_resolve": True},
        },
    ],
}


@dataclass(frozen=True, slots=True)
class BookSpec:
    """What a drawn playbook looks like."""

    causes: tuple[str, ...]
    held_for: float
    cooldown: float
    max_runs_per_hour: int
    min_confidence: float
    steps: str


book_specs = st.builds(
    BookSpec,
    causes=st.lists(st.sampled_from(CAUSE_POOL), min_size=1, max_size=2, unique=True).map(tuple),
    held_for=st.sampled_from([0.0, 0.0, 20.0, 120.0]),
    cooldown=st.sampled_from([0.0, 30.0, 300.0, 900.0, 3600.0]),
    max_runs_per_hour=st.integers(1, 4),
    min_confidence=st.sampled_from([0.0, 0.0, 0.6]),
    steps=st.sampled_from(sorted(STEP_KINDS)),
)


def _load(specs: Sequence[BookSpec], watch: SubjectWatch) -> list[Playbook]:
    """Write the playbooks as a user would (YAML; JSON is YAML) and load them, checked."""
    docs = [
        json.dumps(
            {
                "name": f"pb-{i}",
                "when": {
                    "causes": list(spec.causes),
                    "held_for": spec.held_for,
                    "min_confidence": spec.min_confidence,
                },
                "guards": {
                    "cooldown": spec.cooldown,
                    "max_runs_per_hour": spec.max_runs_per_hour,
                    "bounds": {"instance_group[*].count": {"min": 1, "max": MAX_INSTANCES}},
                },
                "steps": STEP_KINDS[spec.steps],
            }
        )
        for i, spec in enumerate(specs)
    ]
    params = {**catalog(), **{n: a.params for n, a in _probe_actions(watch).items()}}
    return load_playbooks_text("\n---\n".join(docs), "drawn.yaml", params)


class Freshness:
    """A feature view whose subjects are fresh unless a rule made them stale."""

    def __init__(self, stale: set[str]) -> None:
        self.stale = stale

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return nothing: dry-run plans read no features."""
        return None

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Return whether the subject's data is fresh."""
        return subject.key() not in self.stale

    def recovered(self, subject: Subject, now: float) -> bool:
        """Return False: recovery of a vanished subject is not what this test is about."""
        return False


clock_steps = st.one_of(
    st.sampled_from([0.0, 1.0, 5.0, 15.0, 60.0]),
    st.floats(0.0, 1500.0),
    st.sampled_from([HOUR_S, 3 * HOUR_S, 86400.0, 2 * 86400.0]),
)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One row of the runs table, read back independently of the store."""

    row_id: int
    playbook: str
    subject_key: str
    model_key: str
    at: float
    dry_run: bool
    reload: bool
    incident_id: str


class StageMachine(RuleBasedStateMachine):
    """The daemon's playbook stage, in dry-run, driven through a random life."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="stage-props-"))
        self.db_path = self.dir / "audit.sqlite3"
        self.loop = asyncio.new_event_loop()
        self.watch = SubjectWatch({}, [])
        self.stale: set[str] = set()
        self.leader_elsewhere: str | None = None
        self.now = T0
        self.ids = itertools.count(1)
        self.open: dict[str, IncidentEvent] = {}
        # Each incident's subject, opening time, cause and confidence.
        self.meta: dict[str, tuple[Subject, float, str, float]] = {}
        self.pending: list[IncidentEvent] = []
        self.books: list[Playbook] = []
        self.settings = GuardSettings()
        self.store: AuditStore | None = None
        self.stage: PlaybookStage | None = None
        self.seen_rows = 0
        self.killed_runs: set[int] = set()

    # ---- the daemon's life --------------------------------------------------------------
    @initialize(specs=st.lists(book_specs, min_size=1, max_size=4), budget=st.integers(1, 6))
    def boot(self, specs: list[BookSpec], budget: int) -> None:
        """Load the playbooks and start the daemon, dry-run, on a fresh audit file."""
        self.books = _load(specs, self.watch)
        self.settings = GuardSettings(dry_run=True, action_budget_per_hour=budget)
        self._start()

    def _start(self) -> None:
        self.store = AuditStore(self.db_path)
        env = ExecutorEnv(
            features=Freshness(self.stale),
            clock=lambda: self.now,
            static_configs=STATIC_CONFIGS,
        )
        executor = PlaybookExecutor(
            self.store, env, actions={**load_all(), **_probe_actions(self.watch)}
        )
        self.stage = PlaybookStage(
            self.books,
            executor,
            settings=self.settings,
            open_incidents=lambda: list(self.open.values()),
            leader_elsewhere=lambda: self.leader_elsewhere,
        )

    def _stop(self, *, kill: bool) -> None:
        """Stop the daemon: let its work finish, or cancel it (killed mid-work)."""
        stage, store = self.stage, self.store
        assert stage is not None and store is not None
        if kill:
            in_flight = stage.in_flight()
            if in_flight:
                self.killed_runs |= {r.row_id for r in self._rows()}
            for task in in_flight:
                task.cancel()
        self._run(stage.settle())
        store.close()
        self.stage = self.store = None

    def _run(self, aw: Awaitable[T]) -> T:
        return self.loop.run_until_complete(aw)

    @staticmethod
    async def _in_loop(fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn`` from inside the loop, as the daemon's evaluator does (it starts tasks)."""
        return fn(*args)

    def teardown(self) -> None:
        """Stop the daemon and remove its files."""
        try:
            if self.stage is not None:
                self._stop(kill=True)
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(kill=st.booleans())
    def restart(self, kill: bool) -> None:
        """Restart the daemon on the same audit file (the engine keeps its incidents)."""
        self._stop(kill=kill)
        self._start()
        self._check_rows()

    # ---- the world ------------------------------------------------------------------------
    def _event(self, kind: EventKind, incident_id: str) -> IncidentEvent:
        subject, opened_at, cause, confidence = self.meta[incident_id]
        return incident(
            cause,
            subject.model,
            kind,
            namespace=subject.namespace,
            pod=subject.pod,
            at=self.now,
            opened_at=opened_at,
            confidence=confidence,
            incident_id=incident_id,
        )

    @rule(
        subject=st.sampled_from(SUBJECTS),
        cause=st.sampled_from(CAUSE_POOL),
        confidence=st.sampled_from([0.3, 0.7, 0.95]),
    )
    def open_incident(self, subject: Subject, cause: str, confidence: float) -> None:
        """Open an incident on a subject that has none."""
        if any(e.subject == subject for e in self.open.values()):
            return
        incident_id = f"inc-{next(self.ids)}"
        self.meta[incident_id] = (subject, self.now, cause, confidence)
        event = self._event("opened", incident_id)
        self.open[incident_id] = event
        self.pending.append(event)

    def _announced(self) -> list[str]:
        pending = {e.incident_id for e in self.pending}
        return sorted(i for i in self.open if i not in pending)

    @precondition(lambda self: bool(self._announced()))
    @rule(data=st.data(), resolve=st.booleans())
    def move_incident(self, data: st.DataObject, resolve: bool) -> None:
        """Update an announced incident, or resolve it."""
        incident_id = data.draw(st.sampled_from(self._announced()))
        event = self._event("resolved" if resolve else "updated", incident_id)
        if resolve:
            del self.open[incident_id]
        else:
            self.open[incident_id] = event
        self.pending.append(event)

    @rule(dt=clock_steps)
    def tick(self, dt: float) -> None:
        """Let time pass, monotonically, sometimes hours or days at once."""
        self.now += dt

    @rule(subject=st.sampled_from(SUBJECTS), stale=st.booleans())
    def freshness(self, subject: Subject, stale: bool) -> None:
        """Make a subject's data stale (a scrape fails) or fresh again."""
        (self.stale.add if stale else self.stale.discard)(subject.key())

    @rule(lost=st.booleans())
    def leadership(self, lost: bool) -> None:
        """Let another replica take the leader lease, or give it back."""
        self.leader_elsewhere = "replica-b holds the lease" if lost else None

    # ---- evaluations ----------------------------------------------------------------------
    @rule(wait=st.booleans())
    def evaluate(self, wait: bool) -> None:
        """One evaluation; ``replay`` awaits its work, the daemon does not."""
        stage = self.stage
        assert stage is not None
        stale = set(self.stale)
        transitions, self.pending = self.pending, []

        def step() -> tuple[frozenset[str], StepResult]:
            # What is busy is read in the same turn of the loop as the step reads it: work
            # in flight may finish in the turns before.
            return stage.busy(), stage.step(transitions, self.now)

        busy, result = self._run(self._in_loop(step))
        new = self._rows()[self.seen_rows :]
        for row in new:
            assert row.subject_key not in busy, f"{row.playbook} ran on busy {row.subject_key}"
            assert row.subject_key not in stale, f"{row.playbook} ran on stale data"
            assert self.leader_elsewhere is None, "a run without the leader lease"
            assert row.at == self.now
        if wait:
            self._run(result.records())
        self._check_rows()

    @rule(turns=st.sampled_from([1, 2, 5, 20]))
    def let_work_run(self, turns: int) -> None:
        """Run the event loop for a few turns: work in flight moves on."""
        self._run(self._turns(turns))

    @staticmethod
    async def _turns(turns: int) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)

    # ---- what must always hold ------------------------------------------------------------
    def _rows(self) -> list[RunRow]:
        with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT id, playbook, subject_key, model_key, at, dry_run, reload, incident_id"
                " FROM runs ORDER BY id"
            ).fetchall()
        db.close()
        return [
            RunRow(int(r[0]), r[1], r[2], r[3], float(r[4]), bool(r[5]), bool(r[6]), r[7])
            for r in rows
        ]

    def _check_rows(self) -> None:
        """Every run on record honours every guard against the runs recorded before it."""
        rows = self._rows()
        books = {b.name: b for b in self.books}
        once: set[tuple[str, str]] = set()
        for i, row in enumerate(rows):
            book = books[row.playbook]
            guards = book.guards
            key = (row.incident_id, row.playbook)
            assert key not in once, f"{row.playbook} ran twice for {row.incident_id}"
            once.add(key)
            assert row.dry_run, "a real run in dry-run"
            _, opened_at, cause, confidence = self.meta[row.incident_id]
            assert cause in book.when.causes and confidence >= book.when.min_confidence
            assert row.at - opened_at >= book.when.held_for, "ran before held_for"
            earlier = [r for r in rows[:i] if r.dry_run == row.dry_run and r.at <= row.at]
            hour = [r for r in earlier if row.at - r.at < HOUR_S]
            for r in earlier:
                since = row.at - r.at
                if r.playbook == row.playbook and r.subject_key == row.subject_key:
                    assert since >= guards.cooldown, f"{row.playbook} again after {since}s"
                if r.reload and r.model_key == row.model_key:
                    assert since >= guards.cooldown, f"{row.model_key} reloaded {since}s ago"
            assert sum(r.playbook == row.playbook for r in hour) < guards.max_runs_per_hour
            assert len(hour) < self.settings.action_budget_per_hour, "global budget passed"
        self.seen_rows = len(rows)

    @invariant()
    def one_action_at_a_time_per_subject(self) -> None:
        """No action started on a subject while another was in flight there."""
        assert not self.watch.overlaps, self.watch.overlaps

    @invariant()
    def plans_stay_within_bounds(self) -> None:
        """Every planned config change is within its bound; the others were refused as such."""
        if self.store is None:
            return
        for rec in self.store.decisions(limit=100_000):
            if rec.action != "triton.update_config" or rec.phase != "step":
                continue
            if rec.status == "planned":
                for change in rec.detail.get("changes", []):
                    assert 1 <= float(change["new"]) <= MAX_INSTANCES, change
            else:
                assert (rec.status, rec.guard) == ("skipped", "bounds"), rec

    @invariant()
    def every_finished_run_has_its_records(self) -> None:
        """Check that a run not cut short by a kill left records of the steps it reached."""
        if self.store is None or (self.stage is not None and self.stage.in_flight()):
            return
        decided = {(r.incident_id, r.playbook) for r in self.store.decisions(limit=100_000)}
        for row in self._rows():
            if row.row_id not in self.killed_runs:
                assert (row.incident_id, row.playbook) in decided, row


test_the_stage_keeps_every_guard_over_any_life_and_restarts = StageMachine.TestCase
