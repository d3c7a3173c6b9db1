"""What the playbook stage should do after one evaluation: typed decisions, no I/O (pure).

The daemon, ``replay`` and ``tritonguard test`` all call :func:`decide_step` with the
evaluation's incident transitions and the engine's open incidents; the runtime executes what it
returns. Matching, ``held_for``, the guards, hand-over of restores and restore-on-resolve are
decided here, against a :class:`Ledger` read once per evaluation from the audit store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import OWNER_ACTIONS
from tritonguard.core.guards import Decision as GuardDecision
from tritonguard.core.guards import GuardSettings, RunRecord, decide, model_key, step_dry_run
from tritonguard.core.playbook_model import Playbook, Step


@dataclass(frozen=True, slots=True)
class GroupReliance:
    """A pod's run that relies on its fleet group's change of owner, made by another pod.

    The rate limit (or the budget) would have skipped it; it runs only so that its scale is
    skipped as covered by the group's raise and holds that raise's restore until it resolves
    too. It may make no change of its own: a scale the raise does not cover, and every other
    change step, is skipped for ``held_back`` (the guard's reason).
    """

    incident_id: str
    guard: str
    held_back: str


@dataclass(frozen=True, slots=True)
class RunPlaybook:
    """Run (or, in dry-run, plan) ``playbook`` for ``incident``.

    ``dry_run`` is the run's mode (that of what it would change) and the mode of its
    remediation steps; ``notify_dry_run`` is the mode of its notification steps.
    ``relies`` is set for a pod that relies on its group's raise (:class:`GroupReliance`).
    """

    incident: IncidentEvent
    playbook: Playbook
    dry_run: bool
    notify_dry_run: bool | None = None
    relies: GroupReliance | None = None


@dataclass(frozen=True, slots=True)
class SkipPlaybook:
    """A guard blocked ``playbook`` for ``incident``; recorded once per guard."""

    incident: IncidentEvent
    playbook: str
    dry_run: bool
    guard: str
    reason: str


@dataclass(frozen=True, slots=True)
class NoteOpen:
    """Remember the incident in the audit trail (idempotent)."""

    incident: IncidentEvent


@dataclass(frozen=True, slots=True)
class HandOver:
    """``resolved`` gave way to ``successor`` on the same subject: its restores wait for that one.

    The subject has not recovered, only its diagnosis moved (a retry storm held off by shedding
    is still an overload): lifting a shed now would restart the storm.
    """

    resolved: IncidentEvent
    successor: IncidentEvent


@dataclass(frozen=True, slots=True)
class Resolve:
    """The incident resolved: record it and restore what its playbooks changed on resolve."""

    incident: IncidentEvent


@dataclass(frozen=True, slots=True)
class PendingVerification:
    """A verify step that started and has no verdict: its daemon stopped or was killed.

    ``incident`` is the incident as the verification knew it; ``undo_ids`` are the ledger's
    undos of the steps before it, rolled back if the verdict is a failure. ``wait_s`` is the
    step's wait: the check is due at ``started_at + wait_s``. ``leaning_on`` names the
    incident whose raise the run relied on (its scale covered by it, or held back), or is
    empty: a failed verdict then skips the change steps of the playbook's ``rollback:``,
    which would undo that raise, as the run itself would have.
    """

    verification_id: int
    incident: IncidentEvent
    playbook: str
    checks: tuple[dict[str, object], ...]
    wait_s: float
    started_at: float
    undo_ids: tuple[int, ...]
    leaning_on: str = ""

    @property
    def due_at(self) -> float:
        """When the fix was meant to be judged."""
        return self.started_at + self.wait_s

    def give_up_at(self) -> float:
        """After this, without fresh data to judge by, the unverified change is rolled back.

        One more wait (at least a minute) past the due time: long enough for a restarted
        daemon to scrape the subject again, short enough that an unjudged change does not
        linger.
        """
        return self.due_at + max(self.wait_s, 60.0)


@dataclass(frozen=True, slots=True)
class ResumeVerify:
    """Judge a pending verification now, with the subject's fresh data."""

    verification: PendingVerification


@dataclass(frozen=True, slots=True)
class AbandonVerify:
    """A pending verification cannot be judged (no fresh data): roll the change back."""

    verification: PendingVerification


@dataclass(frozen=True, slots=True)
class PendingIntent:
    """A change step that began and has no outcome on file: its daemon stopped or was killed.

    The step's action wrote ``undo_action``/``undo_params`` (the state just before its call
    that changes the server) before making that call; ``undo_ids`` are the ledger's undos of
    the steps before it in the same run. Whether the change landed is unknown.
    ``leaning_on`` is as for :class:`PendingVerification`: the run's rollback must not undo
    the raise of the incident named.
    """

    intent_id: int
    incident: IncidentEvent
    playbook: str
    action: str
    undo_action: str
    undo_params: Mapping[str, object]
    undo_ids: tuple[int, ...]
    started_at: float
    leaning_on: str = ""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A step that waits for a human's approval in Slack (persisted; survives a restart).

    ``step_index`` is the step's place in the playbook's ``all_steps()``; ``params`` are its
    parameters rendered when the approval was asked for, which are what the human sees and
    what runs once approved. ``undo_ids`` are the ledger's undos of the run's earlier steps,
    rolled back if the approved step (or one after it) fails. An empty ``approvers`` lets
    anyone who can click in the channel decide. ``leaning_on`` is as for
    :class:`PendingVerification`: the run goes on relying on that incident's raise.
    """

    approval_id: str
    incident: IncidentEvent
    playbook: str
    step_index: int
    action: str
    params: Mapping[str, object]
    approvers: tuple[str, ...]
    requested_at: float
    expires_at: float
    undo_ids: tuple[int, ...] = ()
    leaning_on: str = ""

    def expired(self, now: float) -> bool:
        """Whether nobody may decide any more: the deadline has passed."""
        return now >= self.expires_at


@dataclass(frozen=True, slots=True)
class ExpireApproval:
    """Nobody decided in time: drop the waiting step (and the rest of its run), record it."""

    approval: PendingApproval


@dataclass(frozen=True, slots=True)
class RestoreIntent:
    """Put back the state from before a change whose outcome is unknown, and never repeat it.

    Then the rest of its run is rolled back and escalated, as if the step had failed.
    """

    intent: PendingIntent


Decision = (
    RunPlaybook
    | SkipPlaybook
    | NoteOpen
    | HandOver
    | Resolve
    | ResumeVerify
    | AbandonVerify
    | RestoreIntent
    | ExpireApproval
)


@dataclass(frozen=True, slots=True)
class Ledger:
    """What the audit store already holds about the incidents in view, read once per step."""

    # (incident_id, playbook) pairs that already ran or were planned.
    done: frozenset[tuple[str, str]] = frozenset()
    # (incident_id, playbook, guard) skips already recorded.
    skipped: frozenset[tuple[str, str, str]] = frozenset()
    # Runs of the last day, for cooldowns, rates, the budget and reload loops.
    history: tuple[RunRecord, ...] = ()
    # Subjects with playbook work in flight.
    busy: frozenset[str] = frozenset()
    # Incidents closed without recovery evidence (their subject stopped reporting) whose
    # restores wait: as the resolution that releases them once the subject has recovered.
    awaiting: tuple[IncidentEvent, ...] = ()
    # Verifications a stopped or killed daemon left without a verdict (this replica's, or
    # adopted from the leader before it).
    verifications: tuple[PendingVerification, ...] = ()
    # Change steps a stopped or killed daemon left without an outcome (this replica's, or
    # adopted from the leader before it).
    intents: tuple[PendingIntent, ...] = ()
    # Steps waiting for a human's approval, expired or not.
    approvals: tuple[PendingApproval, ...] = ()


def successors(events: Sequence[IncidentEvent]) -> dict[str, IncidentEvent]:
    """Map each incident that resolves as another opens on its subject (same batch) to it."""
    opened = {e.subject.key(): e for e in events if e.event == "opened"}
    return {
        e.incident_id: opened[e.subject.key()]
        for e in events
        if e.event == "resolved" and e.subject.key() in opened
    }


@dataclass(frozen=True, slots=True)
class StepContext:
    """Everything a step decides against besides the incidents themselves."""

    playbooks: Sequence[Playbook]
    ledger: Ledger
    settings: GuardSettings
    now: float
    fresh: Callable[[Subject], bool]
    alerts_for: Callable[[IncidentEvent], frozenset[str]]
    # Whether a playbook reloads a model (counts toward every playbook's reload cooldown).
    reloads: Callable[[Playbook], bool]
    # Whether every step of a playbook only tells people (it follows the notify switch).
    notify_only: Callable[[Playbook], bool] = lambda b: False
    # Whether fresh data shows the subject recovered (no open incident, symptom gone).
    recovered: Callable[[Subject], bool] = lambda s: False
    # Why this replica may not act (another holds the leader lease), or None.
    leader_elsewhere: str | None = None


@dataclass(slots=True)
class _Working:
    """The ledger as this step's earlier decisions change it."""

    done: set[tuple[str, str]]
    skipped: set[tuple[str, str, str]]
    history: list[RunRecord]

    def counted_covered(self, event: IncidentEvent) -> frozenset[RunRecord]:
        """Return the runs that changed nothing yet count toward ``event``'s rate.

        A run covered by another incident's raise, or relying on it, made no change: it
        counts toward no budget and no other incident's rate (``guards.decide``). The pods
        of its own fleet group still count it toward the rate, so a pod of the group past
        it relies on the group's raise (:func:`_relies_on_group`) rather than raising the
        workload again. Those are the group's pods' runs since the group opened.
        """
        g = event.group
        if g is None:
            return frozenset()
        pods = {Subject(g.key.namespace, g.key.model, pod).key() for pod in g.pods}
        return frozenset(
            r
            for r in self.history
            if not r.changed and r.subject_key in pods and r.at >= g.opened_at
        )


def decide_step(
    transitions: Sequence[IncidentEvent],
    open_incidents: Iterable[IncidentEvent],
    ctx: StepContext,
) -> list[Decision]:
    """Return the decisions for one evaluation, in the order they must be carried out.

    Transitions come first, in the engine's order: a resolution hands its restores to the
    incident that replaced it on the subject, then resolves; an opening or update considers
    every playbook. Then every other open incident is considered again (``held_for`` reached, a
    guard cleared). Each decision sees the runs the earlier ones started, so two playbooks in
    one step honour each other's reload cooldown and the budget.

    Restores of an incident closed without recovery evidence wait for fresh evidence: a new
    incident on its subject takes them over (it is still broken), and a subject that reports
    again and has recovered releases them.

    A change a stopped daemon left in flight comes before everything else on its subject: the
    state from before it is put back at once, fresh data or not (undoing an unknown change
    is safe either way), by the leader only, and the subject counts as busy for this step.

    An approval past its deadline expires, by its original deadline after a restart too. A
    step waiting for approval does not make its subject busy: other playbooks (the
    notification that opens the thread with the buttons) go on meanwhile.
    """
    restores = [
        RestoreIntent(p)
        for p in ctx.ledger.intents
        if p.incident.subject.key() not in ctx.ledger.busy and ctx.leader_elsewhere is None
    ]
    if restores:
        restoring = frozenset(r.intent.incident.subject.key() for r in restores)
        ctx = replace(ctx, ledger=replace(ctx.ledger, busy=ctx.ledger.busy | restoring))
    out: list[Decision] = list(restores)
    ledger = ctx.ledger
    open_now = list(open_incidents)
    work = _Working(set(ledger.done), set(ledger.skipped), list(ledger.history))
    handed = successors(transitions)
    waiting = {e.subject.key(): e for e in ledger.awaiting}
    seen: set[str] = set()
    for event in transitions:
        seen.add(event.incident_id)
        if event.event == "resolved":
            successor = handed.get(event.incident_id)
            if successor is not None:
                out.append(HandOver(event, successor))
            out.append(Resolve(event))
            continue
        stranded = waiting.pop(event.subject.key(), None) if event.event == "opened" else None
        if stranded is not None:
            out.append(HandOver(stranded, event))
        out.append(NoteOpen(event))
        out += _consider(event, ctx, work)
    for event in open_now:
        if event.incident_id not in seen:
            out += _consider(event, ctx, work)
    for stranded in waiting.values():
        if ctx.recovered(stranded.subject):
            out.append(Resolve(replace(stranded, at=ctx.now)))
    for pending in ledger.verifications:
        subject = pending.incident.subject
        if ctx.now < pending.due_at or subject.key() in ledger.busy:
            continue
        if ctx.leader_elsewhere is not None:
            continue  # only the leader acts; it inherits the verification
        if ctx.fresh(subject):
            out.append(ResumeVerify(pending))
        elif ctx.now >= pending.give_up_at():
            out.append(AbandonVerify(pending))
    # Expiry changes nothing on a server, so a replica that no longer leads still records the
    # end of the approvals it asked for.
    out += [ExpireApproval(a) for a in ledger.approvals if a.expired(ctx.now)]
    return out


def _consider(event: IncidentEvent, ctx: StepContext, work: _Working) -> list[Decision]:
    out: list[Decision] = []
    alerts = ctx.alerts_for(event)
    subject = event.subject
    for book in ctx.playbooks:
        key = (event.incident_id, book.name)
        if key in work.done or book.matches(event, alerts) is not None:
            continue
        if ctx.now - event.opened_at < book.when.held_for:
            continue
        told = _told_for_group(event, book, work) if ctx.notify_only(book) else None
        if told is not None:
            # The group's notification ran for another of its pods and tells of this one.
            skip = (event.incident_id, book.name, "grouped")
            if skip not in work.skipped:
                work.skipped.add(skip)
                dry = step_dry_run(ctx.settings, book.guards, notify=True)
                out.append(SkipPlaybook(event, book.name, dry, "grouped", told))
            continue
        if _waits_for_group(event, book, ctx, work):
            continue
        verdict = decide(
            playbook=book.name,
            guards=book.guards,
            subject=subject,
            now=ctx.now,
            fresh=ctx.fresh(subject),
            busy=ctx.ledger.busy,
            history=work.history,
            settings=ctx.settings,
            leader_elsewhere=ctx.leader_elsewhere,
            notify_only=ctx.notify_only(book),
            counted_covered=work.counted_covered(event),
        )
        relies = _relies_on_group(event, book, verdict, work)
        if relies is not None:
            verdict = replace(verdict, allowed=True, guard="", reason=relies.held_back)
        if not verdict.allowed:
            skip = (event.incident_id, book.name, verdict.guard)
            if skip not in work.skipped:
                work.skipped.add(skip)
                out.append(
                    SkipPlaybook(event, book.name, verdict.dry_run, verdict.guard, verdict.reason)
                )
            continue
        work.done.add(key)
        work.history.append(
            RunRecord(
                book.name,
                subject.key(),
                model_key(subject),
                ctx.now,
                verdict.dry_run,
                ctx.reloads(book),
            )
        )
        notify_dry = step_dry_run(ctx.settings, book.guards, notify=True)
        out.append(RunPlaybook(event, book, verdict.dry_run, notify_dry, relies))
    return out


# Guards that count runs: a group's pods share one raise, so these must not starve them.
_SHARED_GUARDS = frozenset({"rate", "budget"})


def _relies_on_group(
    event: IncidentEvent, book: Playbook, verdict: GuardDecision, work: _Working
) -> GroupReliance | None:
    """Return how a pod relies on its group's raise when only a counting guard stops it.

    Pods of a fleet group each run a playbook that scales the owner, one at a time; after
    the first raise each later run is covered by it and changes nothing, yet every run
    counts toward ``max_runs_per_hour``. A pod the rate (or the budget) stops while another
    pod of its group ran the playbook still relies on that raise: without a restore of its
    own filed, the raise would be put back when the pods that ran resolve, under this one.
    So it runs, held to changing nothing (:class:`GroupReliance`). In dry-run nothing is
    raised and nothing covers, so a plan keeps its guards.
    """
    g = event.group
    if (
        g is None
        or verdict.allowed
        or verdict.dry_run
        or verdict.guard not in _SHARED_GUARDS
        or not any(s.action in OWNER_ACTIONS for s in book.all_steps())
    ):
        return None
    ran = next(
        (i for i in g.incidents if i != event.incident_id and (i, book.name) in work.done),
        None,
    )
    if ran is None:
        return None
    return GroupReliance(ran, verdict.guard, verdict.reason)


def _told_for_group(event: IncidentEvent, book: Playbook, work: _Working) -> str | None:
    """Return why a notification playbook is not run for this pod, if another pod ran it.

    A playbook of notifications only runs once per fleet group: its thread tells of every
    pod. One that changes anything runs per pod, behind its guards: a scale of the owner
    another pod's run already made is skipped as covered and holds its restore until the
    last pod relying on it resolves (:func:`_waits_for_group` orders the runs for that).
    """
    group = event.group
    if group is None:
        return None
    told = next(
        (i for i in group.incidents if i != event.incident_id and (i, book.name) in work.done),
        None,
    )
    if told is None:
        return None
    return (
        f"incident {told} tells this pod's fleet group ({event.cause} on "
        f"{event.subject.model}); its thread lists this pod"
    )


def _waits_for_group(
    event: IncidentEvent, book: Playbook, ctx: StepContext, work: _Working
) -> bool:
    """Whether the pod waits while another pod of its group runs ``book``'s change of owner.

    Each pod runs a playbook that scales its owner (pods of two workloads may share a group
    when discovery does not name the owner), and the executor skips a scale another open
    incident already made as covered; but it sees that scale only once it is made. So the
    group's pods run such a playbook one at a time: a pod waits (nothing is recorded; the
    next evaluation considers it again) while another's run was decided in this step or is
    still in flight. Once covered, a run changes nothing and takes an evaluation.
    """
    g = event.group
    if g is None or not any(s.action in OWNER_ACTIONS for s in book.all_steps()):
        return False
    return any(
        (other, book.name) in work.done
        and (
            (other, book.name) not in ctx.ledger.done
            or Subject(g.key.namespace, g.key.model, pod).key() in ctx.ledger.busy
        )
        for other, pod in zip(g.incidents, g.pods, strict=True)
        if other != event.incident_id
    )


# ---- approvals (pure parts) ------------------------------------------------------------------


def approvers_for(step: Step, defaults: Sequence[str]) -> tuple[str, ...]:
    """Return who may approve ``step``: its own ``approvers``, else the daemon's defaults."""
    return tuple(step.approvers) if step.approvers else tuple(defaults)


def approval_timeout(step: Step, default_s: float) -> float:
    """Return how long an approval of ``step`` waits: its own timeout, else the default."""
    return step.approval_timeout if step.approval_timeout is not None else default_s


def is_group(approver: str) -> bool:
    """Whether an approver ID names a Slack user group (``S…``) rather than a user."""
    return approver.startswith("S")


def groups_to_ask(user: str, approvers: Sequence[str]) -> tuple[str, ...]:
    """Return the user groups whose members must be looked up to judge ``user``.

    None when the user is named directly (or anyone may decide): no lookup is needed then.
    """
    if not approvers or user in approvers:
        return ()
    return tuple(a for a in approvers if is_group(a))


def refuse_approver(
    user: str, approvers: Sequence[str], members: Mapping[str, frozenset[str]]
) -> str | None:
    """Return why ``user`` may not decide, or None when they may.

    ``members`` holds the members of the groups among ``approvers`` that could be looked up;
    a group missing from it (its lookup failed) admits nobody, so a Slack error never lets
    an unknown person through.
    """
    if not approvers or user in approvers:
        return None
    for group in approvers:
        if is_group(group) and user in members.get(group, frozenset()):
            return None
    unknown = [g for g in approvers if is_group(g) and g not in members]
    why = f"{user} is not among the approvers ({', '.join(approvers)})"
    if unknown:
        why += f"; the members of {', '.join(unknown)} could not be looked up"
    return why


def dropped_after(book: Playbook, step_index: int) -> list[str]:
    """Return the actions of the steps after ``step_index`` that a refusal drops with it."""
    return [s.action for s in book.all_steps()[step_index + 1 :]]
