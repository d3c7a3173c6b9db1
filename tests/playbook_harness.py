"""Build the playbook stage the way the daemon does, for tests that hand it incidents directly."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import EventKind, Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_stage import PlaybookStage

_ids = itertools.count(1)


@dataclass(slots=True)
class StaticFeatures:
    """A feature view answering every feature with one value (verify steps read it)."""

    value: float | None = None
    fresh: bool = True
    back: bool = False

    def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
        """Return the one value."""
        return self.value

    def is_fresh(self, subject: Subject, now: float) -> bool:
        """Return the configured freshness."""
        return self.fresh

    def recovered(self, subject: Subject, now: float) -> bool:
        """Return whether the test says the subject is back and healthy."""
        return self.back


def incident(
    cause: str = "cpu_bottleneck",
    model: str = "resnet",
    kind: EventKind = "opened",
    *,
    namespace: str = "prod",
    pod: str = "triton-5d9c7b-x2x9q",
    at: float = 5000.0,
    opened_at: float | None = None,
    confidence: float = 0.8,
    incident_id: str | None = None,
    evidence: dict[str, Evidence] | None = None,
) -> IncidentEvent:
    """Return an incident transition as the engine would emit it."""
    return IncidentEvent(
        event=kind,
        incident_id=incident_id or f"inc-{next(_ids)}",
        cause=cause,
        subject=Subject(namespace, model, pod),
        at=at,
        confidence=confidence,
        summary="container CPU at its quota while the GPU idles",
        evidence=dict(evidence)
        if evidence is not None
        else {"cpu": Evidence(0.97, "ratio", 60, "container CPU / quota")},
        fix=Fix("raise the CPU limit", config_snippet="resources: {limits: {cpu: 4}}"),
        opened_at=at if opened_at is None else opened_at,
    )


def resolved(event: IncidentEvent, at: float | None = None) -> IncidentEvent:
    """Return the resolution of ``event``."""
    return IncidentEvent(
        event="resolved",
        incident_id=event.incident_id,
        cause=event.cause,
        subject=event.subject,
        at=event.at + 60 if at is None else at,
        confidence=event.confidence,
        summary="recovered",
        evidence={},
        fix=event.fix,
        opened_at=event.opened_at,
    )


def stage(
    books: Sequence[Playbook],
    store: AuditStore | None = None,
    *,
    settings: GuardSettings | None = None,
    env: ExecutorEnv | None = None,
    open_incidents: Callable[[], Iterable[IncidentEvent]] = list,
    alerts_for: Callable[[IncidentEvent], frozenset[str]] = lambda e: frozenset(),
    leader_elsewhere: Callable[[], str | None] = lambda: None,
) -> PlaybookStage:
    """Return a stage over ``books`` writing to ``store`` (in memory by default)."""
    return PlaybookStage(
        books,
        PlaybookExecutor(store if store is not None else AuditStore(), env or ExecutorEnv()),
        settings=settings,
        open_incidents=open_incidents,
        alerts_for=alerts_for,
        leader_elsewhere=leader_elsewhere,
    )


async def handle(
    on: PlaybookStage, event: IncidentEvent, now: float | None = None
) -> list[ActionRecord]:
    """Feed one transition as one evaluation and return the records made for its incident."""
    at = event.at if now is None else now
    return (await on.run_step([event], at)).get(event.incident_id, [])
