"""What tritonguard tells Kubernetes: one Event per incident transition or decision, repeats as series.

Pure. An incident opened or resolved, and a playbook step that ran, was skipped, failed or was
rolled back, each become an :class:`EventNote` about the subject's pod (and, in the runtime,
the pod's Deployment or StatefulSet). :class:`SeriesBook` folds repeats of the same note on
the same object into one Event whose ``series.count`` grows, as the events.k8s.io/v1 API
defines it, and says when a repeat may be written (at most once per ``min_interval_s`` per
Event), so a flapping incident costs one Event and a few patches, not one Event per flap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.fleet_groups import GROUP_GUARDS

EventType = Literal["Normal", "Warning"]

# The API refuses longer notes (events.k8s.io/v1: 1 KiB).
NOTE_LIMIT = 1024
# A repeat after this long starts a new Event, as client-go's event recorder does.
SERIES_WINDOW_S = 1800.0
# Repeats in between are counted and written together.
MIN_SERIES_INTERVAL_S = 10.0

_RECORD_REASONS: dict[str, tuple[str, EventType]] = {
    "ran": ("ActionRan", "Normal"),
    "skipped": ("ActionSkipped", "Normal"),
    "failed": ("ActionFailed", "Warning"),
    "rolled_back": ("ActionRolledBack", "Warning"),
}


@dataclass(frozen=True, slots=True)
class EventNote:
    """One thing to record about a subject's pod: reason, action, type and the note shown.

    ``topic`` is what makes two notes the same event for deduplication (the cause and model,
    or the playbook and action): the note's numbers may differ between repeats.
    """

    namespace: str
    pod: str
    reason: str
    action: str
    type: EventType
    note: str
    topic: str
    incident_id: str


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= NOTE_LIMIT else line[: NOTE_LIMIT - 1] + "…"


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def note_for_incident(event: IncidentEvent) -> EventNote | None:
    """Return the Event of an incident opened or resolved on a pod; None otherwise."""
    subject = event.subject
    if not subject.pod or subject.pod == "*" or event.event == "updated":
        return None
    where = f"{event.cause} on model {subject.model}"
    if event.group is not None and event.group.affected > 1:
        # Each pod's Event tells its own story; the group says it is not alone.
        where += f" (fleet group {event.group.id}: {event.group.scope()})"
    if event.event == "opened":
        fix = f" Fix: {event.fix.text}" if event.fix.text else ""
        # Named before the fix: a 1 KB note is clipped at its end, and what changed is what
        # `kubectl describe` readers look for first.
        changed = ""
        change = event.change
        if change is not None:
            rollout = change.rollout
            if change.changes:
                changed = f" After: {change.summary()}"
                if rollout is not None:
                    changed += f", {rollout.timing(event.opened_at)}"
                changed += "."
            if rollout is not None:
                changed += (
                    f" Rollout: {rollout.diff_text()}."
                    if change.changes
                    else f" After: {rollout.timing(event.opened_at)} ({rollout.diff_text()})."
                )
            mounted = change.config_map
            if mounted is not None:
                head = "Also" if changed else "After"
                changed += f" {head}: {mounted.timing(event.opened_at)} ({mounted.diff_text()})."
        return EventNote(
            subject.namespace,
            subject.pod,
            "IncidentOpened",
            "Diagnose",
            "Warning",
            _clip(
                f"{where} (confidence {event.confidence:.2f}): {event.summary}.{changed}{fix} "
                f"[incident {event.incident_id}]"
            ),
            f"{event.cause}/{subject.model}",
            event.incident_id,
        )
    how = "recovered" if event.recovered else "stopped reporting (closed without recovery data)"
    return EventNote(
        subject.namespace,
        subject.pod,
        "IncidentResolved",
        "Diagnose",
        "Normal",
        _clip(
            f"{where} resolved after {_duration(event.at - event.opened_at)}: {how} "
            f"[incident {event.incident_id}]"
        ),
        f"{event.cause}/{subject.model}",
        event.incident_id,
    )


def note_for_record(record: ActionRecord) -> EventNote | None:
    """Return the Event of a playbook decision on a pod (ran, skipped, failed, rolled back).

    Plans (dry-run), deferrals, a follower's "the leader acts" and the other bookkeeping
    records say nothing to Kubernetes.
    """
    reason_type = _RECORD_REASONS.get(record.status)
    subject = Subject.from_key(record.subject)
    if reason_type is None or subject is None or not subject.pod:
        return None
    namespace, pod, model = subject.namespace, subject.pod, subject.model
    if record.status == "skipped" and record.guard == "leader":
        return None  # another replica acts, and tells Kubernetes itself
    if record.status == "skipped" and record.guard in GROUP_GUARDS:
        return None  # the group's pod that acted tells it; every other pod would repeat it
    reason, kind = reason_type
    action = "Playbook" if record.action == "*" else record.action
    what = "the playbook" if record.action == "*" else record.action
    if record.phase in ("restore", "rollback") and record.status == "ran":
        reason = "ActionRestored"
    dry = " (dry-run)" if record.dry_run else ""
    why = record.reason or record.guard
    text = f"{record.playbook}: {what} {record.status.replace('_', ' ')}{dry} on model {model}"
    if why:
        text += f": {why}"
    return EventNote(
        namespace,
        pod,
        reason,
        action,
        kind,
        _clip(f"{text} [incident {record.incident_id}]"),
        f"{record.playbook}/{record.action}/{record.phase}",
        record.incident_id,
    )


@dataclass(slots=True)
class Series:
    """One written Event and the repeats seen since: what ``series`` must say next."""

    name: str
    count: int
    written: int
    first_at: float
    last_at: float
    written_at: float


Decision = Literal["create", "patch", "hold"]
SeriesKey = tuple[str, ...]


@dataclass
class SeriesBook:
    """The Events written per object and note topic, to fold repeats into ``series``."""

    window_s: float = SERIES_WINDOW_S
    min_interval_s: float = MIN_SERIES_INTERVAL_S
    max_entries: int = 4096
    _series: dict[SeriesKey, Series] = field(default_factory=dict)

    def observe(self, key: SeriesKey, now: float) -> tuple[Decision, Series | None]:
        """Count one occurrence; say whether to create an Event, patch its series, or wait.

        A first occurrence, or one after ``window_s`` of quiet, creates a new Event (the
        caller then calls :meth:`created`). A repeat patches the Event's series, unless one
        was written less than ``min_interval_s`` ago: it is then held for :meth:`due`.
        """
        known = self._series.get(key)
        if known is None or now - known.last_at > self.window_s:
            self._series.pop(key, None)
            return "create", None
        known.count += 1
        known.last_at = now
        if now - known.written_at < self.min_interval_s:
            return "hold", known
        return "patch", known

    def created(self, key: SeriesKey, name: str, now: float, count: int = 1) -> Series:
        """Remember the Event just written for ``key`` (with ``count`` occurrences)."""
        if len(self._series) >= self.max_entries:
            oldest = min(self._series, key=lambda k: self._series[k].last_at)
            del self._series[oldest]
        entry = Series(name, count, count, now, now, now)
        self._series[key] = entry
        return entry

    def written(self, entry: Series, now: float) -> None:
        """Record that ``entry``'s series was written with its current count."""
        entry.written = entry.count
        entry.written_at = now

    def forget(self, key: SeriesKey) -> None:
        """Drop an Event that is gone (expired on the server): the next repeat creates one."""
        self._series.pop(key, None)

    def due(self, now: float) -> list[tuple[SeriesKey, Series]]:
        """Return the Events whose held repeats may be written now."""
        return [
            (k, s)
            for k, s in self._series.items()
            if s.count > s.written and now - s.written_at >= self.min_interval_s
        ]
