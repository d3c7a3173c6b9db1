"""A fleet group's pod past the rate relies on its group's raise instead of being skipped."""

from __future__ import annotations

from dataclasses import replace

from tests.playbook_harness import incident
from tests.unit.test_playbook_decisions import ctx
from tritonguard.actions.registry import catalog
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings, RunRecord, model_key
from tritonguard.core.playbook_decisions import (
    Ledger,
    RunPlaybook,
    SkipPlaybook,
    decide_step,
)
from tritonguard.core.playbook_model import Playbook, load_playbooks_text

LIVE = GuardSettings(dry_run=False)

SCALE = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, cooldown: 30m, max_runs_per_hour: 1}
steps:
  - action: kubernetes.scale
    params: {add: 1}
"""


def _book(text: str = SCALE) -> Playbook:
    return load_playbooks_text(text, "inline.yaml", catalog())[0]


def _group(pods: list[str]) -> list[IncidentEvent]:
    """Return the pods' openings of one group (one model, cause and unnamed workload)."""
    return FleetGroups().observe(
        [incident(pod=p, at=5000.0, opened_at=4900.0, incident_id=f"inc-{p}") for p in pods]
    )


def _ran(event: IncidentEvent, at: float = 4990.0, *, dry: bool = False) -> RunRecord:
    return RunRecord("scale", event.subject.key(), model_key(event.subject), at, dry, False)


def test_a_pod_past_the_rate_relies_on_the_pod_of_its_group_that_ran() -> None:
    """The rate would skip pod b; pod a of its group ran, so b runs relying on a's raise."""
    a, b = _group(["a", "b"])
    ledger = Ledger(done=frozenset({(a.incident_id, "scale")}), history=(_ran(a),))
    out = decide_step([], [a, b], ctx([_book()], ledger, settings=LIVE))
    [run] = [d for d in out if isinstance(d, RunPlaybook)]
    assert run.incident.incident_id == b.incident_id
    assert run.relies is not None and run.relies.incident_id == a.incident_id
    assert run.relies.guard == "rate"
    assert "max_runs_per_hour 1" in run.relies.held_back


def test_a_group_whose_no_pod_ran_keeps_the_rate() -> None:
    """Runs on other workloads used the rate: no pod of this group relies on anything."""
    a, b = _group(["a", "b"])
    elsewhere = RunRecord("scale", "prod/resnet/other-0", "prod/resnet", 4990.0, False, False)
    ledger = Ledger(history=(elsewhere,))
    out = decide_step([], [a, b], ctx([_book()], ledger, settings=LIVE))
    assert [(d.incident.incident_id, d.guard) for d in out if isinstance(d, SkipPlaybook)] == [
        (a.incident_id, "rate"),
        (b.incident_id, "rate"),
    ]
    assert not [d for d in out if isinstance(d, RunPlaybook)]


def test_a_plan_keeps_the_rate() -> None:
    """In dry-run nothing is raised, so nothing covers: the rate skips the plan as before."""
    a, b = _group(["a", "b"])
    ledger = Ledger(done=frozenset({(a.incident_id, "scale")}), history=(_ran(a, dry=True),))
    dry = _book(SCALE.replace("dry_run: false", "dry_run: true"))
    out = decide_step([], [a, b], ctx([dry], ledger, settings=LIVE))
    [skip] = [d for d in out if isinstance(d, SkipPlaybook)]
    assert (skip.incident.incident_id, skip.guard) == (b.incident_id, "rate")
    assert not [d for d in out if isinstance(d, RunPlaybook)]


def test_the_cooldown_of_the_pod_itself_still_holds() -> None:
    """Only the guards that count runs give way: a pod in its own cooldown stays skipped."""
    a, b = _group(["a", "b"])
    ledger = Ledger(
        done=frozenset({(a.incident_id, "scale")}), history=(_ran(a), _ran(b, at=4000.0))
    )
    out = decide_step([], [a, b], ctx([_book()], ledger, settings=LIVE))
    [skip] = [d for d in out if isinstance(d, SkipPlaybook)]
    assert (skip.incident.incident_id, skip.guard) == (b.incident_id, "cooldown")


def test_a_playbook_without_a_change_of_owner_relies_on_nothing() -> None:
    """A reload per pod is no shared raise: the rate skips it."""
    text = """
name: scale
when: {causes: [cpu_bottleneck]}
guards: {dry_run: false, max_runs_per_hour: 1}
steps:
  - action: triton.update_config
    params: {set: {dynamic_batching.max_queue_delay_microseconds: 500}}
"""
    a, b = _group(["a", "b"])
    ledger = Ledger(done=frozenset({(a.incident_id, "scale")}), history=(_ran(a),))
    out = decide_step([], [a, b], ctx([_book(text)], ledger, settings=LIVE))
    [skip] = [d for d in out if isinstance(d, SkipPlaybook)]
    assert (skip.incident.incident_id, skip.guard) == (b.incident_id, "rate")
    assert not [d for d in out if isinstance(d, RunPlaybook)]


def _named_group(pods: list[str]) -> list[IncidentEvent]:
    """Return the pods' openings of one group whose workload discovery names."""
    groups = FleetGroups(workload_of=lambda ns, pod: "Deployment/triton")
    return groups.observe(
        [incident(pod=p, at=5000.0, opened_at=4900.0, incident_id=f"inc-{p}") for p in pods]
    )


def _covered(event: IncidentEvent, by: IncidentEvent, at: float) -> RunRecord:
    """Return a finished run of ``event`` that changed nothing, relying on ``by``'s raise."""
    return replace(_ran(event, at), covered_by=by.incident_id)


def _guards_of_a_lone_incident(
    history: tuple[RunRecord, ...], group: list[IncidentEvent], max_runs: int, budget: int = 20
) -> list[str]:
    """Return the guards that skip a lone incident on another model after ``history``."""
    text = SCALE.replace("max_runs_per_hour: 1", f"max_runs_per_hour: {max_runs}")
    lone = incident(model="bert", pod="bert-0", at=5000.0, incident_id="inc-bert")
    ledger = Ledger(done=frozenset((e.incident_id, "scale") for e in group), history=history)
    settings = replace(LIVE, action_budget_per_hour=budget)
    out = decide_step([], [*group, lone], ctx([_book(text)], ledger, settings=settings))
    return [d.guard for d in out if isinstance(d, SkipPlaybook) and d.incident is lone]


def _one_raise(group: list[IncidentEvent]) -> tuple[RunRecord, ...]:
    """Return the group's runs: the first pod's raise, the others covered by it."""
    first, *rest = group
    return (_ran(first), *(_covered(e, first, 4991.0 + i) for i, e in enumerate(rest)))


def test_runs_covered_by_a_raise_count_for_no_other_incidents_rate() -> None:
    """Three runs of one group that made one raise count as one for a lone incident."""
    for group in (_named_group(["a", "b", "c"]), _group(["a", "b", "c"])):
        assert _guards_of_a_lone_incident(_one_raise(group), group, 2) == []
        assert _guards_of_a_lone_incident(_one_raise(group), group, 1) == ["rate"]


def test_runs_covered_by_a_raise_use_no_budget() -> None:
    """Covered runs changed nothing: a budget of two still lets a second change through."""
    group = _named_group(["a", "b", "c"])
    assert _guards_of_a_lone_incident(_one_raise(group), group, 10, budget=2) == []
    assert _guards_of_a_lone_incident(_one_raise(group), group, 10, budget=1) == ["budget"]


def test_a_groups_runs_that_changed_something_count_for_everyone() -> None:
    """A raise the group repeated (after a rollback) is a change: it uses rate and budget.

    Without a covered mark a run counts, whatever its group, so the global budget stays a
    ceiling on the changes made in the hour: two raises of the open group exhaust a budget
    of two, and a max of two runs of the playbook.
    """
    group = _named_group(["a", "b", "c"])
    a, b, c = group
    twice = (_ran(a), _ran(b, at=4995.0), _covered(c, b, 4996.0))
    assert _guards_of_a_lone_incident(twice, group, 10, budget=2) == ["budget"]
    assert _guards_of_a_lone_incident(twice, group, 2) == ["rate"]
    assert _guards_of_a_lone_incident(twice, group, 3) == []


def test_a_covered_run_uses_no_budget_once_its_group_resolved() -> None:
    """The trail says the run changed nothing, so it keeps using no budget with no group."""
    a, b = _named_group(["a", "b"])
    lone = incident(model="bert", pod="bert-0", at=5000.0, incident_id="inc-bert")
    ledger = Ledger(history=(_ran(a), _covered(b, a, 4995.0)))
    settings = replace(LIVE, action_budget_per_hour=2)
    text = SCALE.replace("max_runs_per_hour: 1", "max_runs_per_hour: 10")
    out = decide_step([], [lone], ctx([_book(text)], ledger, settings=settings))
    assert not [d for d in out if isinstance(d, SkipPlaybook)]
    [run] = [d for d in out if isinstance(d, RunPlaybook)]
    assert run.incident is lone


def test_a_groups_own_pods_count_every_run_of_it() -> None:
    """Pod c of a group whose a raised and b was covered meets the rate: it may only rely."""
    a, b, c = _named_group(["a", "b", "c"])
    ledger = Ledger(
        done=frozenset({(a.incident_id, "scale"), (b.incident_id, "scale")}),
        history=(_ran(a), _covered(b, a, 4995.0)),
    )
    text = SCALE.replace("max_runs_per_hour: 1", "max_runs_per_hour: 2")
    out = decide_step([], [a, b, c], ctx([_book(text)], ledger, settings=LIVE))
    [run] = [d for d in out if isinstance(d, RunPlaybook)]
    assert run.incident is c and run.relies is not None
