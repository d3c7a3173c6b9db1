"""Property tests of the guard invariants in the pure core: ``decide``, ``decide_step``, bounds.

Whatever the history, the clock and the incidents, a playbook never runs past a cooldown, a
reload cooldown, its ``max_runs_per_hour`` or the global budget, never twice for one incident,
never before ``held_for``, never on stale data, a busy subject or without the leader lease;
and a patched config never leaves its bounds.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
)

from tritonguard.core.config_patch import (
    DEFAULT_BOUNDS,
    Bound,
    ConfigPatch,
    PatchError,
    apply_patch,
    bound_for,
)
from tritonguard.core.findings import CAUSES, EventKind, Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import HOUR_S, GuardSettings, RunRecord, decide, model_key
from tritonguard.core.playbook_decisions import (
    Ledger,
    RunPlaybook,
    SkipPlaybook,
    StepContext,
    decide_step,
)
from tritonguard.core.playbook_model import Guards, Playbook

SUBJECTS = [
    Subject(ns, model, pod)
    for ns, model, pod in itertools.product(("prod", "staging"), ("resnet", "bert"), ("p0", ""))
]
BOOKS = ("a", "b", "c")
T0 = 1_700_000_000.0
DAY_S = 86400.0

subjects = st.sampled_from(SUBJECTS)
# Offsets from "now" that straddle every window the guards use (cooldowns, the hour, the
# day of history), including runs stamped after now (a clock that was set back).
offsets = st.one_of(
    st.floats(-2 * HOUR_S, 120.0, allow_nan=False),
    st.sampled_from([0.0, -1.0, -HOUR_S, -HOUR_S + 1e-6, -900.0, -899.999, 1.0]),
)


@st.composite
def run_records(draw: st.DrawFn, now: float) -> RunRecord:
    """Draw a past (or future) run on one of the subjects."""
    s = draw(subjects)
    return RunRecord(
        draw(st.sampled_from(BOOKS)),
        s.key(),
        model_key(s),
        now + draw(offsets),
        draw(st.booleans()),
        draw(st.booleans()),
    )


guard_specs = st.builds(
    Guards,
    dry_run=st.booleans(),
    cooldown=st.one_of(st.sampled_from([0.0, 1.0, 60.0, 900.0, 3600.0]), st.floats(0, 7200)),
    max_runs_per_hour=st.integers(1, 6),
)
guard_settings = st.builds(
    GuardSettings,
    dry_run=st.booleans(),
    action_budget_per_hour=st.integers(1, 8),
    require_fresh_data=st.booleans(),
)


@dataclass(frozen=True, slots=True)
class Situation:
    """Everything one guard decision depends on."""

    playbook: str
    guards: Guards
    subject: Subject
    now: float
    fresh: bool
    busy: frozenset[str]
    history: tuple[RunRecord, ...]
    settings: GuardSettings
    leader_elsewhere: str | None


@st.composite
def situations(draw: st.DrawFn) -> Situation:
    """Draw a decision's inputs: a history around ``now`` and every flag a guard reads."""
    now = draw(st.floats(0.0, 1e10, allow_nan=False))
    subject = draw(subjects)
    return Situation(
        playbook=draw(st.sampled_from(BOOKS)),
        guards=draw(guard_specs),
        subject=subject,
        now=now,
        fresh=draw(st.booleans()),
        busy=frozenset(draw(st.lists(st.sampled_from([s.key() for s in SUBJECTS]), max_size=2))),
        history=tuple(draw(st.lists(run_records(now), max_size=30))),
        settings=draw(guard_settings),
        leader_elsewhere=draw(st.none() | st.just("lease held by replica-b")),
    )


def _limits(s: Situation) -> dict[str, bool]:
    """Return, per guard, whether it must block: the guards' contract, written out plainly."""
    dry = s.settings.dry_run or s.guards.dry_run
    skey, mkey = s.subject.key(), model_key(s.subject)
    past = [r for r in s.history if r.dry_run == dry and r.at <= s.now]
    recent = [r for r in past if s.now - r.at < HOUR_S]
    return {
        "leader": s.leader_elsewhere is not None,
        "stale": s.settings.require_fresh_data and not s.fresh,
        "busy": skey in s.busy,
        "cooldown": any(
            r.playbook == s.playbook and r.subject_key == skey and s.now - r.at < s.guards.cooldown
            for r in past
        ),
        "reload_cooldown": any(
            r.reload and r.model_key == mkey and s.now - r.at < s.guards.cooldown for r in past
        ),
        "rate": sum(r.playbook == s.playbook for r in recent) >= s.guards.max_runs_per_hour,
        "budget": len(recent) >= s.settings.action_budget_per_hour,
    }


@given(situations())
def test_a_guard_blocks_exactly_when_a_limit_would_be_passed(s: Situation) -> None:
    """Allowed iff no limit holds; a block names a guard whose limit really holds, in order.

    The order is the documented precedence (leader, stale, busy, cooldown, reload cooldown,
    rate, budget), so the reason an operator reads is the first that applies. The mode of the
    decision is dry-run whenever the daemon or the playbook says so, and the reason is one line.
    """
    verdict = decide(
        playbook=s.playbook,
        guards=s.guards,
        subject=s.subject,
        now=s.now,
        fresh=s.fresh,
        busy=s.busy,
        history=s.history,
        settings=s.settings,
        leader_elsewhere=s.leader_elsewhere,
    )
    limits = _limits(s)
    holding = [guard for guard, holds in limits.items() if holds]
    note(f"limits holding: {holding}; verdict: {verdict}")
    assert verdict.dry_run == (s.settings.dry_run or s.guards.dry_run)
    assert "\n" not in verdict.reason
    if holding:
        assert not verdict.allowed
        assert verdict.guard == holding[0]
    else:
        assert verdict.allowed
        assert verdict.guard == ""


@given(situations(), st.floats(0.0, 10 * DAY_S, allow_nan=False))
def test_waiting_never_turns_an_allowed_run_into_a_blocked_one_without_new_runs(
    s: Situation, wait: float
) -> None:
    """With no new runs, time only clears guards: what is allowed now is allowed later.

    History stamped after ``now`` is left out: it is what a clock set back would show, and it
    enters the windows as time passes.
    """
    history = tuple(r for r in s.history if r.at <= s.now)
    kwargs: dict[str, Any] = {
        "playbook": s.playbook,
        "guards": s.guards,
        "subject": s.subject,
        "fresh": s.fresh,
        "busy": s.busy,
        "history": history,
        "settings": s.settings,
        "leader_elsewhere": s.leader_elsewhere,
    }
    if decide(now=s.now, **kwargs).allowed:
        assert decide(now=s.now + wait, **kwargs).allowed


# ---- decide_step over a life of incidents -------------------------------------------------


def _playbook(
    index: int, causes: Sequence[str], guards: Guards, held_for: float, min_confidence: float
) -> Playbook:
    """Return a playbook for the pure core (its steps are not run here, only decided on)."""
    return Playbook.model_validate(
        {
            "name": f"pb-{index}",
            "when": {
                "causes": list(causes),
                "held_for": held_for,
                "min_confidence": min_confidence,
            },
            "guards": guards.model_dump(),
            "steps": [{"action": "slack.post", "params": {"text": "x"}}],
        }
    )


playbook_specs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(CAUSES[:3]), min_size=1, max_size=2, unique=True),
        guard_specs,
        st.sampled_from([0.0, 0.0, 30.0, 300.0]),
        st.sampled_from([0.0, 0.0, 0.5, 0.9]),
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
)
# Clock steps: mostly an evaluation interval, sometimes a long silence or a suspended host.
clock_steps = st.one_of(
    st.sampled_from([0.0, 1.0, 5.0, 15.0, 30.0, 60.0]),
    st.floats(0.0, 1200.0),
    st.sampled_from([HOUR_S, 2 * HOUR_S, DAY_S, 3 * DAY_S]),
)


@dataclass(slots=True)
class _Run:
    incident_id: str
    playbook: Playbook
    record: RunRecord


@dataclass(slots=True)
class _Incident:
    event: IncidentEvent
    cause: str


@dataclass(slots=True)
class _World:
    """What the stage's ledger would hold, kept the way the audit store keeps it."""

    runs: list[_Run] = field(default_factory=list)
    done: set[tuple[str, str]] = field(default_factory=set)
    skipped: set[tuple[str, str, str]] = field(default_factory=set)


def _event(
    kind: EventKind, incident_id: str, *, cause: str, subject: Subject, at: float, opened_at: float
) -> IncidentEvent:
    return IncidentEvent(
        event=kind,
        incident_id=incident_id,
        cause=cause,
        subject=subject,
        at=at,
        confidence=0.8,
        summary=f"{cause} on {subject.key()}",
        evidence={"x": Evidence(1.0, "ratio", 60, "a number")},
        fix=Fix("fix it"),
        opened_at=opened_at,
    )


class DecideStepMachine(RuleBasedStateMachine):
    """Incidents open, update and resolve on a few subjects while the clock moves.

    After every evaluation the decisions are applied to a ledger the way the stage applies
    them (a run is recorded when it starts, a skip once per guard), and every run so far is
    checked against every guard.
    """

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.books: list[Playbook] = []
        self.reloading: set[str] = set()
        self.settings = GuardSettings()
        self.world = _World()
        self.open: dict[str, _Incident] = {}
        self.pending: list[IncidentEvent] = []
        self.ids = itertools.count(1)
        self.stale: set[str] = set()
        self.busy: set[str] = set()
        self.leader_elsewhere: str | None = None

    @initialize(specs=playbook_specs, settings=guard_settings)
    def load(
        self,
        specs: list[tuple[list[str], Guards, float, float, bool]],
        settings: GuardSettings,
    ) -> None:
        """Load the playbooks and the daemon-wide guard settings."""
        self.settings = settings
        for i, (causes, guards, held, confidence, reloads) in enumerate(specs):
            book = _playbook(i, causes, guards, held, confidence)
            self.books.append(book)
            if reloads:
                self.reloading.add(book.name)

    @rule(subject=subjects, cause=st.sampled_from(CAUSES[:3]), confidence=st.floats(0.0, 1.0))
    def open_incident(self, subject: Subject, cause: str, confidence: float) -> None:
        """Open an incident (the engine keeps at most one per subject)."""
        if any(i.event.subject == subject for i in self.open.values()):
            return
        incident_id = f"inc-{next(self.ids)}"
        event = _event(
            "opened", incident_id, cause=cause, subject=subject, at=self.now, opened_at=self.now
        )
        event.confidence = confidence
        self.open[incident_id] = _Incident(event, cause)
        self.pending.append(event)

    @precondition(lambda self: bool(self._announced()))
    @rule(data=st.data())
    def update_incident(self, data: st.DataObject) -> None:
        """Announce an open incident again (its evidence moved)."""
        incident_id = data.draw(st.sampled_from(self._announced()))
        held = self.open[incident_id].event
        event = _event(
            "updated",
            incident_id,
            cause=held.cause,
            subject=held.subject,
            at=self.now,
            opened_at=held.opened_at,
        )
        event.confidence = held.confidence
        self.open[incident_id] = _Incident(event, held.cause)
        self.pending.append(event)

    @precondition(lambda self: bool(self._announced()))
    @rule(data=st.data())
    def resolve_incident(self, data: st.DataObject) -> None:
        """Resolve an open incident."""
        incident_id = data.draw(st.sampled_from(self._announced()))
        held = self.open.pop(incident_id).event
        self.pending.append(
            _event(
                "resolved",
                incident_id,
                cause=held.cause,
                subject=held.subject,
                at=self.now,
                opened_at=held.opened_at,
            )
        )

    def _announced(self) -> list[str]:
        """Open incidents an evaluation has seen (the engine moves each once per evaluation)."""
        pending = {e.incident_id for e in self.pending}
        return sorted(i for i in self.open if i not in pending)

    @rule(dt=clock_steps)
    def tick(self, dt: float) -> None:
        """Let time pass (monotonically; sometimes a lot of it)."""
        self.now += dt

    @rule(subject=subjects, stale=st.booleans(), busy=st.booleans())
    def subject_state(self, subject: Subject, stale: bool, busy: bool) -> None:
        """Make a subject's data stale or fresh, and work on it start or end."""
        (self.stale.add if stale else self.stale.discard)(subject.key())
        (self.busy.add if busy else self.busy.discard)(subject.key())

    @rule(leader=st.none() | st.just("lease held by replica-b"))
    def leadership(self, leader: str | None) -> None:
        """Gain or lose the leader lease."""
        self.leader_elsewhere = leader

    @rule()
    def evaluate(self) -> None:
        """One evaluation: decide on its transitions and the open incidents, apply, check."""
        world = self.world
        ledger = Ledger(
            done=frozenset(world.done),
            skipped=frozenset(world.skipped),
            history=tuple(r.record for r in world.runs if r.record.at >= self.now - DAY_S),
            busy=frozenset(self.busy),
        )
        ctx = StepContext(
            playbooks=self.books,
            ledger=ledger,
            settings=self.settings,
            now=self.now,
            fresh=lambda s: s.key() not in self.stale,
            alerts_for=lambda e: frozenset(),
            reloads=lambda b: b.name in self.reloading,
            leader_elsewhere=self.leader_elsewhere,
        )
        transitions, self.pending = self.pending, []
        seen_skips: set[tuple[str, str, str]] = set()
        for decision in decide_step(transitions, [i.event for i in self.open.values()], ctx):
            if isinstance(decision, RunPlaybook):
                self._check_run(decision)
                key = (decision.incident.incident_id, decision.playbook.name)
                world.done.add(key)
                s = decision.incident.subject
                world.runs.append(
                    _Run(
                        decision.incident.incident_id,
                        decision.playbook,
                        RunRecord(
                            decision.playbook.name,
                            s.key(),
                            model_key(s),
                            self.now,
                            decision.dry_run,
                            decision.playbook.name in self.reloading,
                        ),
                    )
                )
            elif isinstance(decision, SkipPlaybook):
                skip = (decision.incident.incident_id, decision.playbook, decision.guard)
                assert skip not in world.skipped and skip not in seen_skips, "skip recorded twice"
                assert "\n" not in decision.reason
                seen_skips.add(skip)
                world.skipped.add(skip)
        self._check_accounted()

    def _check_run(self, decision: RunPlaybook) -> None:
        """Every guard holds for a run about to be recorded, against every run before it."""
        event, book = decision.incident, decision.playbook
        subject = event.subject
        guards = book.guards
        dry = self.settings.dry_run or guards.dry_run
        assert decision.dry_run == dry
        assert (event.incident_id, book.name) not in self.world.done, "ran twice for one incident"
        assert event.event != "resolved"
        assert event.incident_id in self.open, "ran for an incident that is not open"
        assert book.matches(event) is None
        assert self.now - event.opened_at >= book.when.held_for, "ran before held_for"
        if self.settings.require_fresh_data:
            assert subject.key() not in self.stale, "ran on stale data"
        assert subject.key() not in self.busy, "ran on a busy subject"
        assert self.leader_elsewhere is None, "ran without the leader lease"
        before = [r.record for r in self.world.runs if r.record.dry_run == dry]
        hour = [r for r in before if self.now - r.at < HOUR_S]
        for r in before:
            since = self.now - r.at
            if r.playbook == book.name and r.subject_key == subject.key():
                assert since >= guards.cooldown, f"cooldown {guards.cooldown}s passed: {since}s"
            if r.reload and r.model_key == model_key(subject):
                assert since >= guards.cooldown, f"reload {since}s ago; cooldown {guards.cooldown}"
        assert sum(r.playbook == book.name for r in hour) < guards.max_runs_per_hour
        assert len(hour) < self.settings.action_budget_per_hour, "global budget passed"

    def _check_accounted(self) -> None:
        """No silent no-op: each due, matching playbook ran or has a skip on record."""
        for held in self.open.values():
            event = held.event
            for book in self.books:
                if book.matches(event) is not None:
                    continue
                if self.now - event.opened_at < book.when.held_for:
                    continue
                key = (event.incident_id, book.name)
                skipped = any(s[:2] == key for s in self.world.skipped)
                assert key in self.world.done or skipped, (
                    f"{book.name} neither ran nor was skipped for {event.incident_id}"
                )


test_decide_step_keeps_every_guard_over_any_life_of_incidents = DecideStepMachine.TestCase


# ---- bounds -------------------------------------------------------------------------------

_PATHS = (
    "instance_group[0].count",
    "max_batch_size",
    "dynamic_batching.max_queue_delay_microseconds",
    "dynamic_batching.default_queue_policy.max_queue_size",
    "dynamic_batching.priority_levels",
)
numbers = st.one_of(
    st.integers(-10, 20_000_000),
    st.floats(-1e7, 1e7, allow_nan=False),
    st.integers(0, 5000).map(str),  # Triton writes 64-bit integers as strings
)


@st.composite
def model_configs(draw: st.DrawFn) -> dict[str, Any]:
    """Draw a model config with the numeric leaves playbooks change."""
    return {
        "name": "resnet",
        "max_batch_size": draw(st.integers(0, 64)),
        "instance_group": [{"kind": "KIND_CPU", "count": draw(st.integers(1, 20))}],
        "dynamic_batching": {
            "max_queue_delay_microseconds": draw(st.integers(0, 2_000_000).map(str)),
            "default_queue_policy": {"max_queue_size": draw(st.integers(0, 200_000))},
        },
    }


patches = st.builds(
    ConfigPatch,
    set=st.dictionaries(st.sampled_from(_PATHS), numbers, max_size=3),
    add=st.dictionaries(st.sampled_from(_PATHS), st.integers(-5, 5).map(float), max_size=2),
    remove=st.lists(st.sampled_from(_PATHS), max_size=1).map(tuple),
)
bound_overrides = st.dictionaries(
    st.sampled_from([*_PATHS[:3], "instance_group[*].count"]),
    st.tuples(st.none() | st.integers(-5, 10), st.none() | st.integers(0, 100)).map(
        lambda mm: Bound(mm[0], mm[1])
    ),
    max_size=2,
)


@given(model_configs(), patches, bound_overrides)
def test_a_patched_config_never_leaves_its_bounds(
    config: dict[str, Any], patch: ConfigPatch, overrides: dict[str, Bound]
) -> None:
    """Either the patch is refused (PatchError, one line) or every numeric change is bounded.

    An unbounded numeric change is refused too, and the input config is never modified.
    """
    bounds = {**DEFAULT_BOUNDS, **overrides}
    original = copy.deepcopy(config)
    try:
        _, changes = apply_patch(config, patch, bounds)
    except PatchError as exc:
        assert "\n" not in str(exc)
        assert config == original
        return
    assert config == original
    for change in changes:
        if isinstance(change.new, bool) or change.new is None:
            continue
        try:
            value = float(change.new)
        except (TypeError, ValueError):
            continue
        bound = bound_for(change.path, bounds)
        assert bound is not None, f"{change.path} changed without a bound"
        assert bound.min is None or value >= bound.min
        assert bound.max is None or value <= bound.max
