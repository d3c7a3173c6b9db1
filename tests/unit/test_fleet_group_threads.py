"""A fleet group in the pure playbook decisions and the thread planner: told once, not per pod."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from tests.playbook_harness import incident, resolved
from tritonguard.actions.registry import catalog
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_decisions import (
    Ledger,
    RunPlaybook,
    SkipPlaybook,
    StepContext,
    decide_step,
)
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.core.slack_message import ApprovalView, root_message
from tritonguard.core.slack_thread import ThreadPlanner, ThreadSettings

NOTIFY = """
name: tell
when: {causes: [batching_delay]}
steps:
  - action: slack.post
"""
RELOAD = """
name: lower
when: {causes: [batching_delay]}
steps:
  - action: slack.post
  - action: triton.update_config
    params: {set: {dynamic_batching.max_queue_delay_microseconds: 500}}
"""
SCALE = """
name: scale
when: {causes: [batching_delay]}
steps:
  - action: slack.post
  - action: kubernetes.scale
    params: {add: 1}
"""
PODS = [f"ranker-{i}" for i in range(5)]


def book(text: str) -> Playbook:
    """Return the one playbook of ``text``."""
    return load_playbooks_text(text, "inline.yaml", catalog())[0]


def group_of(
    pods: list[str], model: str = "ranker", at: float = 5000.0, workload: str = ""
) -> list[IncidentEvent]:
    """Return the openings of batching_delay on ``model`` on each pod, grouped."""
    groups = FleetGroups(workload_of=lambda ns, pod: workload, pods_of=lambda ns, m: 6)
    return groups.observe(
        [
            incident("batching_delay", model, pod=p, at=at, incident_id=f"inc-{model}-{p}")
            for p in pods
        ]
    )


def ctx(books: list[Playbook]) -> StepContext:
    """Return a step context at t=5000 with fresh data, acting for real."""
    return StepContext(
        playbooks=books,
        ledger=Ledger(),
        settings=GuardSettings(dry_run=False),
        now=5000.0,
        fresh=lambda s: True,
        alerts_for=lambda e: frozenset(),
        reloads=lambda b: b.name == "lower",
        notify_only=lambda b: all(s.action == "slack.post" for s in b.all_steps()),
    )


def test_a_notification_playbook_runs_once_for_the_group_and_is_skipped_as_grouped() -> None:
    """Five pods' openings: the notification runs for the first, the rest say who told."""
    events = group_of(PODS)
    out = decide_step(events, [], ctx([book(NOTIFY)]))
    runs = [d for d in out if isinstance(d, RunPlaybook)]
    skips = [d for d in out if isinstance(d, SkipPlaybook)]
    assert [d.incident.subject.pod for d in runs] == ["ranker-0"]
    assert [d.incident.subject.pod for d in skips] == PODS[1:]
    assert {d.guard for d in skips} == {"grouped"}
    assert "incident inc-ranker-ranker-0 tells" in skips[0].reason


def test_a_playbook_that_changes_a_pod_is_decided_per_pod_by_its_own_guards() -> None:
    """A reload is per pod: the grouping skips nothing; the model's reload cooldown does."""
    events = group_of(PODS)
    out = decide_step(events, [], ctx([book(RELOAD)]))
    runs = [d for d in out if isinstance(d, RunPlaybook)]
    skips = [d for d in out if isinstance(d, SkipPlaybook)]
    assert [d.incident.subject.pod for d in runs] == ["ranker-0"]
    assert {d.guard for d in skips} == {"reload_cooldown"}


def test_a_scale_of_the_owner_runs_for_one_pod_of_the_group_at_a_time() -> None:
    """Post and scale the owner: the group's pods run it one at a time, none side by side.

    Each pod runs it (pods of two workloads may share a group), and the executor skips a
    scale another incident already made as covered, which it can see only once made.
    """
    events = group_of(PODS, workload="Deployment/ranker")
    first = decide_step(events, [], ctx([book(SCALE)]))
    assert [d.incident.subject.pod for d in first if isinstance(d, RunPlaybook)] == PODS[:1]
    assert not [d for d in first if isinstance(d, SkipPlaybook)]
    done = frozenset({(events[0].incident_id, "scale")})
    busy = frozenset({"prod/ranker-0/ranker"})
    running = replace(ctx([book(SCALE)]), ledger=Ledger(done=done, busy=busy))
    assert not [d for d in decide_step([], events, running) if isinstance(d, RunPlaybook)]
    over = replace(ctx([book(SCALE)]), ledger=Ledger(done=done))
    then = decide_step([], events, over)
    # One pod at a time: the next one now, the rest after it.
    assert [d.incident.subject.pod for d in then if isinstance(d, RunPlaybook)] == PODS[1:2]
    assert not [d for d in then if isinstance(d, SkipPlaybook)]


def test_another_models_group_on_the_same_pods_is_told_separately() -> None:
    """The same pods with a second model: each group's first pod runs the notification."""
    events = group_of(PODS[:2]) + group_of(PODS[:2], model="embedder")
    out = decide_step(events, [], ctx([book(NOTIFY)]))
    runs = [d for d in out if isinstance(d, RunPlaybook)]
    assert [(d.incident.subject.model, d.incident.subject.pod) for d in runs] == [
        ("ranker", "ranker-0"),
        ("embedder", "ranker-0"),
    ]


def rec(event: IncidentEvent, action: str, status: str = "ran", **kw: object) -> ActionRecord:
    """Return a record of ``event``'s playbook."""
    values: dict[str, object] = {
        "at": event.at + 1,
        "incident_id": event.incident_id,
        "event": "opened",
        "playbook": "lower",
        "subject": event.subject.key(),
        "action": action,
        "params": {},
        "dry_run": False,
        "status": status,
    }
    values.update(kw)
    return ActionRecord(**values)  # type: ignore[arg-type] # the test's literal fields


def test_one_thread_for_the_group_lists_its_pods_and_resolves_with_the_last() -> None:
    """The first post opens the only root; pods joining update it once per evaluation."""
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    groups = FleetGroups(pods_of=lambda ns, m: 6)

    def opened(pods: list[str]) -> list[IncidentEvent]:
        return groups.observe(
            [
                incident("batching_delay", "ranker", pod=p, at=5000.0, incident_id=f"inc-{p}")
                for p in pods
            ]
        )

    first = opened(PODS[:3])
    assert planner.on_events(first) == []
    [root] = planner.on_record(rec(first[0], "slack.post"))
    assert root.kind == "post_root" and root.message is not None
    assert "on 3 of 6 pods" in root.message.text
    assert "ranker-0, ranker-1, ranker-2" in str(root.message.blocks)
    # The others' own notifications and skips add nothing; a change on a pod is a reply.
    assert planner.on_record(rec(first[1], "slack.post")) == []
    skipped = rec(first[2], "triton.update_config", "skipped", guard="reload_cooldown")
    assert planner.on_record(skipped) == []
    changed = planner.on_record(rec(first[0], "triton.update_config"))
    assert [o.kind for o in changed] == ["reply", "update_root"]
    # Two more pods in one evaluation: one root update, naming five.
    later = opened(PODS[3:])
    [update] = planner.on_events(later)
    assert update.kind == "update_root" and update.thread == root.thread
    assert update.message is not None and "on 5 of 6 pods" in update.message.text
    # The lead recovers first: the thread goes on; the last pod's recovery ends it.
    events = first + later
    [lead_back] = planner.on_events(groups.observe([resolved(events[0])]))
    assert lead_back.kind == "update_root" and lead_back.metadata["state"] == "open"
    rest = planner.on_events(groups.observe([resolved(e) for e in events[1:]]))
    assert [o.kind for o in rest] == ["reply", "update_root"]
    assert rest[-1].metadata["state"] == "resolved"
    assert rest[0].message is not None and "on all 5 pods" in rest[0].message.text
    assert planner.threads() == []


def test_a_one_pod_incident_renders_as_before() -> None:
    """A group of one pod names the pod in the header and lists no pods."""
    [event] = group_of(["ranker-0"])
    planner = ThreadPlanner()
    planner.on_events([event])
    [root] = planner.on_record(rec(event, "slack.post"))
    view = planner.view(event.incident_id)
    assert view is not None
    assert root.message is not None and "on ranker-0" in root.message.text
    assert "pods" not in {b.get("block_id") for b in root_message(view).blocks}


def test_a_restore_filed_after_the_group_resolved_goes_into_its_thread() -> None:
    """A member's restore after the last pod resolved: the group's thread, adopted again."""
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    groups = FleetGroups()
    events = groups.observe(
        [
            incident("batching_delay", "ranker", pod=p, at=5000.0, incident_id=f"inc-{p}")
            for p in PODS[:2]
        ]
    )
    planner.on_events(events)
    [root] = planner.on_record(rec(events[0], "slack.post"))
    planner.on_events(groups.observe([resolved(e) for e in events]))
    assert planner.threads() == []
    restore = rec(events[1], "kubernetes.hpa_min")
    assert planner.host_of(events[1].incident_id) == events[0].incident_id
    assert planner.on_record(restore) == []  # not posted into a thread it no longer has
    # The daemon adopts the host's thread from the outbox, as after any resolution.
    planner.adopt(events[0], channel="#c", seq=9, root=root.message)
    [reply, update] = planner.on_record(restore)
    assert reply.thread == root.thread and reply.kind == "reply"
    assert update.kind == "update_root"


def test_another_pods_reading_is_quiet_and_its_approval_is_asked_in_the_thread() -> None:
    """A member's new confidence changes nothing shown; its approval gets the thread's buttons."""
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    events = group_of(PODS[:2])
    planner.on_events(events)
    [root] = planner.on_record(rec(events[0], "slack.post"))
    update = dataclasses.replace(events[1], event="updated", confidence=0.95)
    assert planner.on_events([update]) == []
    ask = ApprovalView("ap-1", "lower", "triton.update_config", "reload on ranker-1", ("U1",), 9e9)
    [request, rooted] = planner.on_approval(events[1].incident_id, ask)
    assert request.thread == root.thread and request.kind == "reply"
    assert rooted.message is not None and "approval:ap-1" in str(rooted.message.blocks)
