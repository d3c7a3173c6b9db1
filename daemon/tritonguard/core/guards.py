"""Guard decisions: may a playbook act now on a subject, and if not, why (pure)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tritonguard.core.config_patch import DEFAULT_BOUNDS, Bound
from tritonguard.core.findings import Subject
from tritonguard.core.playbook_model import BoundSpec, Guards

HOUR_S = 3600.0

# Replica bounds when a playbook gives none: never scale to zero, never run away.
DEFAULT_REPLICA_BOUND = Bound(1, 20)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A past run (in dry-run: a planned run) of a playbook on a subject.

    ``covered_by`` names the incident whose change a finished run relied on, when the run
    changed nothing of its own: its scale was covered by that incident's raise, or held
    back (``playbook_decisions.GroupReliance``). Empty for every other run, including one
    still going and a plan: those count as changes.
    """

    playbook: str
    subject_key: str
    model_key: str
    at: float
    dry_run: bool
    reload: bool
    covered_by: str = ""

    @property
    def changed(self) -> bool:
        """Whether the run counts as a change: it made one, may have, or would have (a plan)."""
        return not self.covered_by


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """Daemon-wide guard settings; dry-run is on until the operator turns it off.

    ``dry_run`` sets both switches at once; ``notify_dry_run`` (steps that only tell people)
    and ``remediate_dry_run`` (every other step), when given, override it for their kind.
    """

    dry_run: bool = True
    action_budget_per_hour: int = 20
    require_fresh_data: bool = True
    notify_dry_run: bool | None = None
    remediate_dry_run: bool | None = None

    def dry_for(self, *, notify: bool) -> bool:
        """Return the daemon-wide dry-run switch for notification or remediation steps."""
        own = self.notify_dry_run if notify else self.remediate_dry_run
        return self.dry_run if own is None else own


def step_dry_run(settings: GuardSettings, guards: Guards, *, notify: bool) -> bool:
    """Return whether a step of this kind (notification or remediation) only plans."""
    # A playbook's ``dry_run: true`` forces a plan; its ``false`` never lifts the operator's
    # daemon-wide switch of the step's kind.
    return guards.dry_run or settings.dry_for(notify=notify)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome: act (really or as a plan) or skip, naming the guard that blocked."""

    allowed: bool
    dry_run: bool
    guard: str
    reason: str


def model_key(subject: Subject) -> str:
    """Return the key reloads are counted under: a reload hits the model on every pod."""
    return f"{subject.namespace}/{subject.model}"


def decide(
    *,
    playbook: str,
    guards: Guards,
    subject: Subject,
    now: float,
    fresh: bool,
    busy: Iterable[str],
    history: Sequence[RunRecord],
    settings: GuardSettings,
    leader_elsewhere: str | None = None,
    notify_only: bool = False,
    counted_covered: Collection[RunRecord] = (),
) -> Decision:
    """Decide whether ``playbook`` may run on ``subject`` at ``now``.

    Dry-run plans count against the guards of dry-run mode only, so a dry-run test sees the same
    cooldowns and budgets a live run would, while a week of dry-run does not block the first
    real action after dry-run is turned off. ``leader_elsewhere`` says why this replica does
    not lead (another holds the lease, or it cannot reach the API to renew it); it blocks every
    playbook, dry-run included, so replicas do not post the same plan twice.

    The run's mode is that of what it would change: a playbook with any remediation step
    follows the remediation switch, one of notifications only (``notify_only``) the
    notification switch; the executor then decides each step by its own kind.

    The rate and the budget count changes: a run that changed nothing, relying on another
    incident's raise (``RunRecord.covered_by``), counts toward neither, so the budget is a
    ceiling on the changes made in the hour whatever the fleet grouping. Only the rate of
    the pods of the run's own fleet group counts it (``counted_covered``,
    ``playbook_decisions``): a pod past it relies on its group's raise instead of raising
    again. Such a run still holds its own pod's cooldown.
    """
    dry = step_dry_run(settings, guards, notify=notify_only)
    skey, mkey = subject.key(), model_key(subject)
    if leader_elsewhere is not None:
        return Decision(
            False,
            dry,
            "leader",
            f"{leader_elsewhere}; only the replica holding the leader lease runs playbooks",
        )
    if settings.require_fresh_data and not fresh:
        return Decision(
            False, dry, "stale", "no fresh data for the subject; never act on stale data"
        )
    if skey in set(busy):
        return Decision(False, dry, "busy", f"another action is running on {skey}")
    same_mode = [r for r in history if r.dry_run == dry and r.at <= now]
    mine = [r for r in same_mode if r.playbook == playbook and r.subject_key == skey]
    if mine:
        last = max(r.at for r in mine)
        if now - last < guards.cooldown:
            return Decision(
                False,
                dry,
                "cooldown",
                f"ran on {skey} {now - last:.0f}s ago; cooldown {guards.cooldown:.0f}s",
            )
    reloads = [r for r in same_mode if r.reload and r.model_key == mkey]
    if reloads:
        last_reload = max(reloads, key=lambda r: r.at)
        if now - last_reload.at < guards.cooldown:
            return Decision(
                False,
                dry,
                "reload_cooldown",
                f"{mkey} was reloaded by {last_reload.playbook} {now - last_reload.at:.0f}s ago; "
                f"waiting out cooldown {guards.cooldown:.0f}s to avoid a reload loop",
            )
    hour = [r for r in same_mode if now - r.at < HOUR_S]
    changes = [r for r in hour if r.changed]
    own = set(counted_covered)
    runs = sum(1 for r in hour if r.playbook == playbook and (r.changed or r in own))
    if runs >= guards.max_runs_per_hour:
        return Decision(
            False,
            dry,
            "rate",
            f"{runs} runs in the last hour; max_runs_per_hour {guards.max_runs_per_hour}",
        )
    if len(changes) >= settings.action_budget_per_hour:
        return Decision(
            False,
            dry,
            "budget",
            f"{len(changes)} runs in the last hour; global budget "
            f"{settings.action_budget_per_hour}",
        )
    return Decision(True, dry, "", "dry-run: planned only" if dry else "guards passed")


def merge_bounds(playbook_bounds: Mapping[str, BoundSpec]) -> dict[str, Bound]:
    """Return the default bounds overlaid with the playbook's own."""
    merged = dict(DEFAULT_BOUNDS)
    merged["replicas"] = DEFAULT_REPLICA_BOUND
    for path, spec in playbook_bounds.items():
        merged[path] = Bound(spec.min, spec.max)
    return merged


# The count each scale undo puts back; every other parameter names the object it writes.
_RESTORED_COUNT = {
    "kubernetes.scale": "replicas",
    "kubernetes.hpa_min": "min_replicas",
    "kubernetes.scaledobject_min": "min_replica_count",
}


def scale_target(action: str, params: Mapping[str, object]) -> tuple[str, ...] | None:
    """Return what a scale undo writes (its action and object), or None for other undos.

    Incidents on different pods of one workload resolve to the same object; two undos with
    the same target put back the same count, so only one of them may stand for the value
    from before the first raise (docs/playbooks.md, ``kubernetes.scale``).
    """
    count = _RESTORED_COUNT.get(action)
    if count is None:
        return None
    return (action, *sorted(f"{k}={v}" for k, v in params.items() if k != count))
