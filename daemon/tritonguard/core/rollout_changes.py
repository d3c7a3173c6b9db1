"""Rollouts before an incident: a workload's new revision, its pod template diffed against the last.

Pure. Discovery hands in the revisions of a Deployment (its ReplicaSets, numbered by the
``deployment.kubernetes.io/revision`` annotation) or a StatefulSet (its ControllerRevisions)
and the revision a pod runs; this module says what that revision changed against the one
before it: each container's image, command, args and env. The rollout is kept per pod, so an
incident on one of the new revision's pods names it with the model-config diff its Triton
shows, e.g. ``max_queue_delay_microseconds: 500 → 150000``, rolled out 40 s before onset by
revision 7.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonguard.core.change_text import HIDDEN, SECRET_ASSIGN, SECRETISH, changes_line
from tritonguard.core.config_patch import Change
from tritonguard.core.urls import redact_text

# Pods whose rollout is kept; the oldest go first (a rollout older than the baseline's
# lookback is part of what the baseline calls normal anyway).
MAX_PODS = 4096
_CONTAINER_LISTS = ("initContainers", "containers")


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision of a workload: its ReplicaSet or ControllerRevision, and its pod template."""

    kind: str
    workload: str
    name: str
    number: int | None
    created_at: float | None
    template: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RolloutChange:
    """A workload's revision that a pod runs, and what it changed against the revision before.

    ``at`` is when the revision began (its object's creation time, else when discovery first
    saw it); ``previous`` is None for a first revision or when the one before is not kept.
    """

    namespace: str
    kind: str
    workload: str
    revision: int | None
    revision_name: str
    at: float
    seen_at: float
    changes: tuple[Change, ...] = ()
    previous: int | None = None
    previous_name: str | None = None

    def headline(self) -> str:
        """Return which rollout: ``Deployment triton-a revision 7``."""
        number = f"revision {self.revision}" if self.revision is not None else self.revision_name
        return f"{self.kind} {self.workload} {number}"

    def diff_text(self) -> str:
        """Return the template diff in one line, the first few leaves, or why there is none."""
        if not self.changes:
            if self.previous_name is None:
                return "no earlier revision kept to compare with"
            return "pod template: no image, command, args or env change"
        return changes_line(self.changes, width=60, words=True)

    def summary(self) -> str:
        """Return the rollout and its diff in one line."""
        return f"rollout of {self.headline()} ({self.diff_text()})"

    def timing(self, onset: float) -> str:
        """Return when it rolled out against ``onset``: ``rolled out 40 s before onset``."""
        lead = round(onset - self.at)
        if lead > 0:
            return f"rolled out {lead} s before onset by {self.headline()}"
        return f"rolled out at onset by {self.headline()}"

    def as_dict(self, onset: float | None = None) -> dict[str, Any]:
        """Return the JSON form; with ``onset``, how long before it the rollout began."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "workload": self.workload,
            "namespace": self.namespace,
            "revision": self.revision,
            "revision_name": self.revision_name,
            "previous": self.previous,
            "previous_name": self.previous_name,
            "at": round(self.at, 3),
            "seen_at": round(self.seen_at, 3),
            "summary": self.summary(),
            "changes": [c.as_dict() for c in self.changes],
        }
        if onset is not None:
            out["before_onset_s"] = round(onset - self.at, 3)
        return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _env_value(entry: Mapping[str, Any]) -> str:
    """Return an env entry's value, or where it comes from (a Secret's value is never read)."""
    if "value" in entry:
        value = str(entry["value"])
        if SECRETISH.search(str(entry.get("name") or "")):
            # Two values of a secret differ or not; which they are is nobody's business here.
            return f"{HIDDEN} (literal, {len(value)} characters)"
        return redact_text(value)
    source = _mapping(entry.get("valueFrom"))
    for kind, raw in source.items():
        ref = _mapping(raw)
        where = ref.get("name") or ref.get("fieldPath") or ref.get("resource") or ""
        key = f" key {ref['key']}" if "key" in ref else ""
        return f"({kind} {where}{key})".replace(" )", ")")
    return ""


def _containers(template: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    spec = _mapping(template.get("spec"))
    out: dict[str, Mapping[str, Any]] = {}
    for field in _CONTAINER_LISTS:
        entries = spec.get(field)
        for c in map(_mapping, entries if isinstance(entries, list) else []):
            name = str(c.get("name") or "")
            if name:
                out[name if field == "containers" else f"init:{name}"] = c
    return out


def _env(container: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Return each env entry as (what it is, how it is shown): compared raw, shown redacted."""
    entries = container.get("env")
    return {
        str(e.get("name")): (repr(e.get("value", e.get("valueFrom"))), _env_value(e))
        for e in map(_mapping, entries if isinstance(entries, list) else [])
        if e.get("name")
    }


def _words(value: Any) -> list[str] | None:
    """Return a command or args list with every secret hidden, or None if it is no list."""
    return hide_words(value) if isinstance(value, list) else None


def hide_words(value: list[Any]) -> list[str]:
    """Return a command or args list with every secret hidden (see ``SECRETISH``)."""
    out: list[str] = []
    hide_next = False
    for raw in map(str, value):
        word = redact_text(raw)
        if hide_next:
            word, hide_next = HIDDEN, False
        elif (m := SECRET_ASSIGN.search(word)) is not None:
            word = word[: m.end()] + HIDDEN
        elif word.startswith("-") and SECRETISH.search(word):
            hide_next = True  # `--token s3cret`: the flag's value is the next word
        out.append(word)
    return out


def template_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Return what a pod template changed: per container, image, command, args and env.

    Containers are matched by name; one added or removed is one change. Other fields (labels,
    resources, probes) are left out: the field guide's causes follow from what runs, and with
    what arguments and environment.
    """
    old, new = _containers(before), _containers(after)
    out: list[Change] = []
    for name in sorted(set(old) | set(new), key=lambda n: (n.startswith("init:"), n)):
        base = f"containers[{name}]"
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            out.append(
                Change(
                    base,
                    None if a is None else a.get("image"),
                    None if b is None else b.get("image"),
                )
            )
            continue
        if a.get("image") != b.get("image"):
            out.append(Change(f"{base}.image", a.get("image"), b.get("image")))
        for field in ("command", "args"):
            if a.get(field) != b.get(field):
                out.append(Change(f"{base}.{field}", _words(a.get(field)), _words(b.get(field))))
        ea, eb = _env(a), _env(b)
        for key in sorted(set(ea) | set(eb)):
            va, vb = ea.get(key), eb.get(key)
            if va != vb:
                out.append(
                    Change(
                        f"{base}.env.{key}",
                        None if va is None else va[1],
                        None if vb is None else vb[1],
                    )
                )
    return out


def previous_revision(revisions: Iterable[Revision], current: Revision) -> Revision | None:
    """Return the workload's revision just before ``current`` (the highest lower number)."""
    if current.number is None:
        return None
    earlier = [
        r
        for r in revisions
        if r.kind == current.kind
        and r.workload == current.workload
        and r.number is not None
        and r.number < current.number
    ]
    return max(earlier, key=lambda r: r.number or 0, default=None)


def rollout_of(
    namespace: str, current: Revision, revisions: Iterable[Revision], seen_at: float
) -> RolloutChange:
    """Return the rollout of ``current``: its diff against the revision before it, if kept."""
    before = previous_revision(revisions, current)
    changes = template_diff(before.template, current.template) if before is not None else []
    at = current.created_at if current.created_at is not None else seen_at
    return RolloutChange(
        namespace=namespace,
        kind=current.kind,
        workload=current.workload,
        revision=current.number,
        revision_name=current.name,
        at=min(at, seen_at),
        seen_at=seen_at,
        changes=tuple(changes),
        previous=None if before is None else before.number,
        previous_name=None if before is None else before.name,
    )


class RolloutTimeline:
    """The rollout each pod came from, by ``(namespace, pod)``."""

    def __init__(self, max_pods: int = MAX_PODS) -> None:
        self._by_pod: dict[tuple[str, str], RolloutChange] = {}
        self._max = max_pods

    def note(self, namespace: str, pod: str, rollout: RolloutChange) -> bool:
        """Remember the rollout a pod runs; return whether it is news for that pod."""
        key = (namespace, pod)
        if self._by_pod.get(key) == rollout:
            return False
        self._by_pod.pop(key, None)
        if len(self._by_pod) >= self._max:
            del self._by_pod[next(iter(self._by_pod))]
        self._by_pod[key] = rollout
        return True

    def preceding(
        self, namespace: str, pod: str, onset: float, lookback_s: float
    ) -> RolloutChange | None:
        """Return the pod's rollout if it began before ``onset``, within ``lookback_s``."""
        rollout = self._by_pod.get((namespace, pod))
        if rollout is None or not onset - lookback_s <= rollout.at <= onset:
            return None
        return rollout

    def forget(self, namespace: str, pod: str) -> None:
        """Drop a pod that is gone."""
        self._by_pod.pop((namespace, pod), None)

    def __len__(self) -> int:
        return len(self._by_pod)
