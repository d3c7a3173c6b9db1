"""Fleet groups: the per-pod incidents of one cause on one model, told as one incident.

A bad config rolled out to every pod of a model opens an incident on each pod, since each
pod is diagnosed on its own series. On-call wants one story: which cause, on which model,
on how many of its pods. Like Alertmanager's ``group_by``, the pod incidents stay what the
engine and the playbooks work on, and a *fleet group* keyed by (namespace, model, cause,
owning workload when known) gathers them for whoever reads: one Slack thread, one entry in
``/api/incidents`` and in ``replay``'s text, listing the pods.

The group opens with its first pod's incident, changes in place as pods' incidents open and
resolve, and resolves with the last one. Each transition the engine emits carries the group
as it stands after it (``IncidentEvent.group``). A subject without a pod (a model across
pods, from PromQL) is its own story and joins no group.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tritonguard.core.findings import IncidentEvent

# Pods a message names before "and M more": a Slack line stays readable at 200 pods.
MAX_LISTED = 10
# Pods the JSON form lists: enough for any tool to act on, bounded at fleet scale.
MAX_JSON_PODS = 100


# Guards that skip a pod's step because its group already acted for it: ``grouped`` (the
# group's notification ran), ``covered`` (another incident's scale of the same workload
# stands) and ``reload_cooldown`` (a reload hits the model on every pod). Saying so for
# every pod would repeat the group's own line.
GROUP_GUARDS = frozenset({"grouped", "covered", "reload_cooldown"})


# Steps that change the pod's owner: its replica count, directly, as its HPA's floor or as
# its KEDA ScaledObject's. A group's pods run them one pod at a time (playbook_decisions).
OWNER_ACTIONS = frozenset({"kubernetes.scale", "kubernetes.hpa_min", "kubernetes.scaledobject_min"})


@dataclass(frozen=True, slots=True)
class GroupKey:
    """What makes pod incidents one story: same namespace, model, cause and workload."""

    namespace: str
    model: str
    cause: str
    # "Deployment/triton" when discovery named the pod's owner; "" when it is not known.
    workload: str = ""


@dataclass(frozen=True, slots=True)
class FleetGroup:
    """A fleet group as it stands after one transition of one of its pods' incidents."""

    id: str
    key: GroupKey
    # The incident the group opened with: its thread and story tell the whole group.
    lead: str
    opened_at: float
    # Pods whose incident is open in the group, in the order they joined; their incidents.
    pods: tuple[str, ...]
    incidents: tuple[str, ...]
    # Pods reporting the model now (0: not known), and every pod the group has held.
    of: int = 0
    affected: int = 0
    # What this transition changed.
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many pods' incidents are open in the group."""
        return len(self.pods)

    @property
    def open(self) -> bool:
        """Whether any pod's incident is still open."""
        return bool(self.pods)

    def pods_text(self, limit: int = MAX_LISTED) -> str:
        """Return the pods as one line: the first ``limit``, then ``and M more``."""
        shown = ", ".join(self.pods[:limit])
        more = len(self.pods) - limit
        return f"{shown} and {more} more" if more > 0 else shown

    def scope(self) -> str:
        """Return how much of the model is affected: ``3 of 4 pods`` (``3 pods`` if unknown)."""
        n = self.count if self.open else self.affected
        noun = "pod" if n == 1 else "pods"
        return f"{n} of {self.of} {noun}" if self.of >= n > 0 else f"{n} {noun}"

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form (the ``group`` of an incident in replay, the API, Slack)."""
        return {
            "id": self.id,
            "lead": self.lead,
            "workload": self.key.workload,
            "opened_at": round(self.opened_at, 3),
            "pods": list(self.pods[:MAX_JSON_PODS]),
            "count": self.count,
            "more": max(0, self.count - MAX_JSON_PODS),
            "of": self.of,
            "affected": self.affected,
            "joined": list(self.joined[:MAX_JSON_PODS]),
            "left": list(self.left[:MAX_JSON_PODS]),
        }


@dataclass(slots=True)
class _Group:
    id: str
    lead: str
    opened_at: float
    # incident id -> pod, in joining order (dicts keep insertion order).
    members: dict[str, str] = field(default_factory=dict)
    affected: set[str] = field(default_factory=set)


def group_key(event: IncidentEvent, workload: str = "") -> GroupKey:
    """Return the key an incident's event groups under."""
    s = event.subject
    return GroupKey(s.namespace, s.model, event.cause, workload)


class FleetGroups:
    """Gathers the engine's pod incidents into fleet groups; pure, fed every transition.

    ``workload_of(namespace, pod)`` names a pod's owner (``Kind/name``) or "" when unknown;
    ``pods_of(namespace, model)`` says how many pods report the model now. A pod whose
    owner becomes known while its incident is open stays in the group it joined.
    """

    def __init__(
        self,
        workload_of: Callable[[str, str], str] = lambda ns, pod: "",
        pods_of: Callable[[str, str], int] = lambda ns, model: 0,
    ) -> None:
        self.workload_of = workload_of
        self.pods_of = pods_of
        self._open: dict[GroupKey, _Group] = {}
        self._member_of: dict[str, GroupKey] = {}

    def __len__(self) -> int:
        return len(self._open)

    def observe(self, events: Iterable[IncidentEvent]) -> list[IncidentEvent]:
        """Join or leave each event's incident to its group, in order; set ``event.group``.

        Returns the events (the same objects), so the engine can pass its list through.
        """
        out = list(events)
        for event in out:
            if not event.subject.pod:
                continue
            if event.event == "opened":
                event.group = self._join(event)
            elif event.event == "resolved":
                event.group = self._leave(event)
            else:
                event.group = self.group_of(event.incident_id)
        return out

    def _join(self, event: IncidentEvent) -> FleetGroup:
        s = event.subject
        key = group_key(event, self.workload_of(s.namespace, s.pod))
        g = self._open.get(key)
        if g is None:
            g = self._open[key] = _Group(
                _group_id(key, event.incident_id), event.incident_id, event.opened_at
            )
        g.members[event.incident_id] = s.pod
        g.affected.add(s.pod)
        self._member_of[event.incident_id] = key
        return self._snapshot(key, g, joined=(s.pod,))

    def _leave(self, event: IncidentEvent) -> FleetGroup | None:
        key = self._member_of.pop(event.incident_id, None)
        g = self._open.get(key) if key is not None else None
        if key is None or g is None:
            return None
        pod = g.members.pop(event.incident_id, event.subject.pod)
        snap = self._snapshot(key, g, left=(pod,))
        if not g.members:
            del self._open[key]
        return snap

    def group_of(self, incident_id: str) -> FleetGroup | None:
        """Return the open group an incident belongs to, as it stands now."""
        key = self._member_of.get(incident_id)
        g = self._open.get(key) if key is not None else None
        return None if key is None or g is None else self._snapshot(key, g)

    def annotate(self, events: Iterable[IncidentEvent]) -> list[IncidentEvent]:
        """Return copies of open incidents' events, each with its group as it stands now."""
        # One snapshot per group, however many of its pods are listed.
        snaps: dict[GroupKey, FleetGroup] = {}
        out = []
        for e in events:
            key = self._member_of.get(e.incident_id)
            g = self._open.get(key) if key is not None else None
            if key is None or g is None:
                out.append(replace(e, group=None))
                continue
            snap = snaps.get(key)
            if snap is None:
                snap = snaps[key] = self._snapshot(key, g)
            out.append(replace(e, group=snap))
        return out

    def _snapshot(
        self,
        key: GroupKey,
        g: _Group,
        joined: tuple[str, ...] = (),
        left: tuple[str, ...] = (),
    ) -> FleetGroup:
        return FleetGroup(
            id=g.id,
            key=key,
            lead=g.lead,
            opened_at=g.opened_at,
            pods=tuple(g.members.values()),
            incidents=tuple(g.members),
            of=self.pods_of(key.namespace, key.model),
            affected=len(g.affected),
            joined=joined,
            left=left,
        )


def _group_id(key: GroupKey, lead: str) -> str:
    # The lead's id is unique per opening (it hashes the subject and the time it opened).
    raw = f"{key.namespace}|{key.model}|{key.cause}|{key.workload}|{lead}".encode()
    return "grp-" + hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:12]


def tells_group(event: IncidentEvent) -> bool:
    """Return whether the transition opens or closes its group's story.

    Its lead opening or its last pod resolving does; one more pod joining or leaving it does
    not.
    """
    g = event.group
    if g is None:
        return True
    if event.event == "opened":
        return event.incident_id == g.lead
    return event.event == "resolved" and not g.open


def one_per_group(events: Sequence[IncidentEvent]) -> list[IncidentEvent]:
    """Return the open incidents with each fleet group's members folded into one entry.

    The entry is the group's lead when it is still open, else its earliest open member; it
    carries the group (pods, count), so nothing the others said is lost but repetition.
    """
    out: list[IncidentEvent] = []
    seen: dict[str, int] = {}
    for event in events:
        g = event.group
        if g is None or g.count <= 1:
            out.append(event)
            continue
        at = seen.get(g.id)
        if at is None:
            seen[g.id] = len(out)
            out.append(event)
        elif event.incident_id == g.lead:
            out[at] = event
    return out


def past_groups(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Gather audit-trail incident rows into the fleet groups they were, in the rows' order.

    The trail keeps no group: rows of one namespace, model and cause whose pods' incidents
    were open at the same time (each opening before the group's last one resolved) are one
    group, first-opened first; a row without a pod is a group of its own. Each group is
    listed where its newest row would be.
    """
    by_time = sorted(range(len(rows)), key=lambda i: _opening(rows[i]))
    groups: list[list[int]] = []
    current: dict[tuple[str, str, str], tuple[list[int], float]] = {}
    for i in by_time:
        row = rows[i]
        end = row.get("resolved_at")
        until = float("inf") if end is None else float(end)
        if not row.get("pod"):
            groups.append([i])
            continue
        key = (str(row["namespace"]), str(row["model"]), str(row["cause"]))
        held = current.get(key)
        if held is not None and float(row["opened_at"]) <= held[1]:
            held[0].append(i)
            current[key] = (held[0], max(held[1], until))
        else:
            members = [i]
            groups.append(members)
            current[key] = (members, until)
    groups.sort(key=min)
    return [[rows[i] for i in g] for g in groups]


def past_pods(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return a past group's pods in the order they first opened (a pod may open twice)."""
    ordered = sorted(rows, key=_opening)
    return list(dict.fromkeys(str(r["pod"]) for r in ordered))


def with_past_groups(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the audit trail's incident rows, each of a past group naming it (``group``).

    ``group`` holds the group's first incident (``lead``), its pods and their ``count``;
    a row alone in its group is returned as it is.
    """
    named: dict[int, dict[str, Any]] = {}
    for g in past_groups(rows):
        if len(g) < 2:
            continue
        pods = past_pods(g)
        lead = min(g, key=_opening)["incident_id"]
        told = {"lead": lead, "pods": pods[:MAX_JSON_PODS], "count": len(pods)}
        for r in g:
            named[id(r)] = told
    return [{**r, "group": dict(named[id(r)])} if id(r) in named else dict(r) for r in rows]


def _opening(row: Mapping[str, Any]) -> tuple[float, str]:
    # Pods that opened in one evaluation share a time: the pod's name breaks the tie, so a
    # group's first incident is the same on every read.
    return float(row["opened_at"]), str(row.get("pod", ""))
