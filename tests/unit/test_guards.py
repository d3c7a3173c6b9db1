"""Guard decisions: stale data, busy subject, cooldown, reload loops, rate, budget, dry-run."""

from __future__ import annotations

from dataclasses import replace

from tritonguard.core.findings import Subject
from tritonguard.core.guards import Decision, GuardSettings, RunRecord, decide, model_key
from tritonguard.core.playbook_model import Guards

S = Subject("prod", "resnet", "triton-0")
LIVE = GuardSettings(dry_run=False, action_budget_per_hour=3)


def run(
    playbook: str, at: float, *, subject: Subject = S, dry: bool = False, reload: bool = False
) -> RunRecord:
    """Return a past run record."""
    return RunRecord(playbook, subject.key(), model_key(subject), at, dry, reload)


def ask(
    history: list[RunRecord],
    *,
    now: float = 10_000.0,
    fresh: bool = True,
    busy: tuple[str, ...] = (),
    settings: GuardSettings = LIVE,
    guards: Guards | None = None,
    playbook: str = "p",
) -> Decision:
    """Return the decision for playbook ``p`` on S."""
    return decide(
        playbook=playbook,
        guards=guards or Guards(dry_run=False, cooldown=600),
        subject=S,
        now=now,
        fresh=fresh,
        busy=busy,
        history=history,
        settings=settings,
    )


def test_allowed_when_nothing_blocks() -> None:
    """A fresh subject with no history may act, for real when dry-run is off everywhere."""
    d = ask([])
    assert d.allowed and not d.dry_run and d.guard == ""


def test_dry_run_is_the_default() -> None:
    """Default settings and default playbook guards only plan."""
    d = decide(
        playbook="p",
        guards=Guards(),
        subject=S,
        now=0.0,
        fresh=True,
        busy=(),
        history=[],
        settings=GuardSettings(),
    )
    assert d.allowed and d.dry_run


def test_stale_data_and_busy_subject_block() -> None:
    """Never act on stale data; never two actions at once on one subject."""
    assert ask([], fresh=False).guard == "stale"
    assert ask([], busy=(S.key(),)).guard == "busy"


def test_cooldown_per_playbook_and_subject() -> None:
    """A run 5 min ago blocks (cooldown 10 min); 11 min ago it does not; other subjects are free."""
    assert ask([run("p", 10_000 - 300)]).guard == "cooldown"
    assert ask([run("p", 10_000 - 660)]).allowed
    other = Subject("prod", "bert", "triton-0")
    assert ask([run("p", 10_000 - 300, subject=other)]).allowed


def test_reload_by_another_playbook_counts_toward_cooldown() -> None:
    """A reload of the model by any playbook (any pod) blocks reloading it again too soon."""
    elsewhere = Subject("prod", "resnet", "triton-1")
    d = ask([run("other", 10_000 - 120, subject=elsewhere, reload=True)])
    assert d.guard == "reload_cooldown" and "other" in d.reason
    assert ask([run("other", 10_000 - 120, subject=elsewhere, reload=False)]).allowed


def test_rate_and_global_budget() -> None:
    """max_runs_per_hour per playbook, then the global hourly budget across playbooks."""
    subjects = [Subject("prod", f"m{i}") for i in range(3)]
    two = [run("p", 10_000 - 1000 - i, subject=subjects[i]) for i in range(2)]
    assert ask(two, guards=Guards(dry_run=False, cooldown=60, max_runs_per_hour=2)).guard == "rate"
    three = [run(f"q{i}", 10_000 - 1000, subject=subjects[i]) for i in range(3)]
    assert ask(three).guard == "budget"
    assert ask([run("q", 10_000 - 3700, subject=subjects[0])] * 3).allowed


def test_the_budget_counts_changes_and_runs_that_changed_nothing_use_none() -> None:
    """A run marked covered (it relied on another incident's raise) uses neither guard.

    Three covered runs under a budget of three leave room; so do they under a rate of one.
    An unmarked run counts whatever else is true of it, so two changes and a third covered
    run leave one more change in the budget, and three changes none.
    """
    subjects = [Subject("prod", f"m{i}") for i in range(4)]
    covered = [
        replace(run("p", 10_000 - 1000, subject=subjects[i]), covered_by="inc-raise")
        for i in range(3)
    ]
    once = Guards(dry_run=False, cooldown=60, max_runs_per_hour=1)
    assert ask(covered).allowed
    assert ask(covered, guards=once).allowed
    changes = [run(f"q{i}", 10_000 - 1000, subject=subjects[i]) for i in range(2)]
    assert ask([*changes, covered[2]]).allowed
    third = run("q3", 10_000 - 900, subject=subjects[3])
    budget = ask([*changes, covered[2], third])
    assert budget.guard == "budget" and budget.reason.startswith("3 runs")


def test_covered_runs_of_the_pods_own_group_still_count_toward_its_rate() -> None:
    """``counted_covered`` runs (the group's own) meet the rate, never the budget."""
    other = Subject("prod", "resnet", "triton-1")
    mine = replace(run("p", 10_000 - 1000, subject=other), covered_by="inc-raise")
    d = decide(
        playbook="p",
        guards=Guards(dry_run=False, cooldown=60, max_runs_per_hour=1),
        subject=S,
        now=10_000.0,
        fresh=True,
        busy=(),
        history=[mine],
        settings=replace(LIVE, action_budget_per_hour=1),
        counted_covered=[mine],
    )
    assert d.guard == "rate"
    assert ask([mine], settings=replace(LIVE, action_budget_per_hour=1)).allowed


def test_dry_run_history_does_not_block_real_runs() -> None:
    """Plans made in dry-run count for dry-run only, so turning dry-run off starts clean."""
    assert ask([run("p", 10_000 - 10, dry=True)]).allowed
    planned = ask([run("p", 10_000 - 10, dry=True)], settings=GuardSettings(dry_run=True))
    assert planned.guard == "cooldown"


def test_a_follower_replica_never_acts_not_even_in_dry_run() -> None:
    """Without the leader lease every playbook is skipped with guard 'leader' and the reason."""
    for settings in (LIVE, GuardSettings(dry_run=True)):
        d = decide(
            playbook="p",
            guards=Guards(dry_run=False, cooldown=600),
            subject=S,
            now=10_000.0,
            fresh=True,
            busy=(),
            history=[],
            settings=settings,
            leader_elsewhere="replica tg-1 holds the leader lease",
        )
        assert not d.allowed and d.guard == "leader"
        assert d.reason.startswith("replica tg-1 holds the leader lease")
