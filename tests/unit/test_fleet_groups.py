"""Fleet groups: pod incidents of one cause on one model gathered into one story."""

from __future__ import annotations

from tests.playbook_harness import incident, resolved
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import FleetGroups, one_per_group, tells_group


def _pods(n: int) -> list[str]:
    return [f"triton-{i}" for i in range(n)]


def _opened(
    pod: str, *, cause: str = "batching_delay", model: str = "ranker", at: float = 100.0
) -> IncidentEvent:
    return incident(cause, model, pod=pod, at=at, incident_id=f"inc-{cause}-{model}-{pod}-{at:g}")


def test_pods_with_the_same_cause_on_one_model_join_one_group_in_order() -> None:
    """Three pods' openings make one group: led by the first, pods in joining order, 3 of 4."""
    groups = FleetGroups(pods_of=lambda ns, model: 4)
    events = groups.observe([_opened(p) for p in _pods(3)])
    ids = {e.group.id for e in events if e.group is not None}
    assert len(ids) == 1
    last = events[-1].group
    assert last is not None
    assert last.pods == ("triton-0", "triton-1", "triton-2")
    assert last.lead == events[0].incident_id
    assert last.scope() == "3 of 4 pods"
    assert [e.group.joined for e in events if e.group is not None] == [
        ("triton-0",),
        ("triton-1",),
        ("triton-2",),
    ]
    assert [tells_group(e) for e in events] == [True, False, False]


def test_the_group_outlives_its_lead_and_resolves_with_its_last_pod() -> None:
    """The lead recovering leaves the group open on the others; the last pod closes it."""
    groups = FleetGroups()
    opened = groups.observe([_opened(p) for p in _pods(3)])
    [first] = groups.observe([resolved(opened[0])])
    assert first.group is not None and first.group.open
    assert first.group.pods == ("triton-1", "triton-2") and first.group.left == ("triton-0",)
    assert not tells_group(first)
    [second, third] = groups.observe([resolved(opened[1]), resolved(opened[2])])
    assert second.group is not None and second.group.open
    assert third.group is not None and not third.group.open
    assert third.group.affected == 3 and third.group.scope() == "3 pods"
    assert tells_group(third)
    assert len(groups) == 0
    # A new opening after the group closed starts a new story.
    [again] = groups.observe([_opened("triton-0", at=400.0)])
    before = opened[0].group
    assert again.group is not None and before is not None and again.group.id != before.id


def test_another_model_or_cause_on_the_same_pods_is_a_group_of_its_own() -> None:
    """Same pods, a second model or a second cause: three groups, none mixing them."""
    groups = FleetGroups()
    events = groups.observe(
        [_opened(p) for p in _pods(2)]
        + [_opened(p, model="embedder") for p in _pods(2)]
        + [_opened(p, cause="too_few_instances") for p in _pods(2)]
    )
    by_group: dict[str, set[tuple[str, str]]] = {}
    for e in events:
        assert e.group is not None
        by_group.setdefault(e.group.id, set()).add((e.cause, e.subject.model))
    assert sorted(by_group.values(), key=sorted) == sorted(
        [
            {("batching_delay", "ranker")},
            {("batching_delay", "embedder")},
            {("too_few_instances", "ranker")},
        ],
        key=sorted,
    )
    assert all(e.group is not None and e.group.count <= 2 for e in events)


def test_pods_of_different_workloads_are_different_groups() -> None:
    """When discovery names the owner, two Deployments serving one model are two stories."""
    owners = {"a-0": "Deployment/a", "a-1": "Deployment/a", "b-0": "Deployment/b"}
    groups = FleetGroups(workload_of=lambda ns, pod: owners[pod])
    events = groups.observe([_opened(p) for p in owners])
    assert events[0].group is not None and events[1].group is not None
    assert events[2].group is not None
    assert events[0].group.id == events[1].group.id != events[2].group.id
    assert events[2].group.key.workload == "Deployment/b"


def test_a_model_wide_subject_joins_no_group() -> None:
    """An incident on the model across pods (no pod label) is its own story."""
    [event] = FleetGroups().observe([incident("batching_delay", "ranker", pod="")])
    assert event.group is None
    assert "group" not in event.as_dict()


def test_messages_name_the_first_pods_and_count_the_rest() -> None:
    """At 200 pods a line names ten and says how many more; the JSON counts them all."""
    groups = FleetGroups(pods_of=lambda ns, model: 250)
    events = groups.observe([_opened(p) for p in _pods(200)])
    g = events[-1].group
    assert g is not None
    assert g.pods_text() == ", ".join(_pods(10)) + " and 190 more"
    data = events[-1].as_dict()["group"]
    assert (data["count"], data["of"], len(data["pods"]), data["more"]) == (200, 250, 100, 100)


def test_open_incidents_fold_to_one_entry_per_group() -> None:
    """The API's list holds the group's lead once with its pods, and any ungrouped incident."""
    groups = FleetGroups()
    groups.observe([_opened(p) for p in _pods(3)] + [_opened("triton-9", model="embedder")])
    now = groups.annotate([_opened(p) for p in _pods(3)] + [_opened("triton-9", model="embedder")])
    folded = one_per_group(now)
    assert [(e.subject.model, e.subject.pod) for e in folded] == [
        ("ranker", "triton-0"),
        ("embedder", "triton-9"),
    ]
    assert folded[0].group is not None and folded[0].group.count == 3
