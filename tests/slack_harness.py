"""Incidents from the recorded lab traces, through the real engine and the shipped playbooks.

The Slack tests render these: each trace is replayed as the daemon would see it (the config
the lab served before a deploy is read at the start, and the one it deployed is the answer
once the engine asks, as the daemon re-reads a config when latency shifts), and the shipped
playbooks plan in dry-run with the deployed config, so the plans carry the real numbers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.recorded_configs import ConfigRead, RecordedConfigs
from tritonguard.core.replay import drive
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS, load_playbook_files
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.sources.replay import load_trace

TRACES = Path(__file__).parent / "fixtures" / "traces"
GOLDEN = Path(__file__).parent / "golden" / "slack"
UPDATE_GOLDEN = os.environ.get("TRITONGUARD_UPDATE_GOLDEN") == "1"


@dataclass
class Replayed:
    """One trace replayed: the labelled incident's transitions and every record, in order."""

    cause: str
    labels: dict[str, Any]
    engine: Engine
    events: list[IncidentEvent] = field(default_factory=list)
    records: list[ActionRecord] = field(default_factory=list)
    # (evaluation time, transitions, records of that step), every step with either
    steps: list[tuple[float, list[IncidentEvent], list[ActionRecord]]] = field(default_factory=list)

    def opened(self) -> IncidentEvent:
        """Return the first incident of the labelled cause."""
        return next(e for e in self.events if e.event == "opened" and e.cause == self.cause)


def deployed_config(labels: dict[str, Any]) -> dict[str, Any] | None:
    """Return the model config the lab deployed in the trace, if it deployed one."""
    for event in labels.get("events", []):
        if event.get("kind") == "deploy" and isinstance(event.get("config"), dict):
            config: dict[str, Any] = event["config"]
            return config
    return None


def served_before(labels: dict[str, Any], deployed: dict[str, Any]) -> dict[str, Any] | None:
    """Return the config the lab served before its deploy, when the deploy changed the count.

    The lab's instance-count deploys serve the same model with ``instances_before``
    instances first; the labels keep only the deployed config and the two counts.
    """
    before = labels.get("params", {}).get("instances_before")
    groups = deployed.get("instance_group")
    if not isinstance(before, int) or not isinstance(groups, list) or len(groups) != 1:
        return None
    return {**deployed, "instance_group": [{**groups[0], "count": before}]}


def config_reads(labels: dict[str, Any]) -> RecordedConfigs:
    """Return the reads the daemon would make: the served config at the start, the deployed one."""
    config = deployed_config(labels)
    deploy_at = next((e["at"] for e in labels.get("events", []) if e.get("kind") == "deploy"), None)
    if config is None or deploy_at is None:
        return RecordedConfigs(())
    subject = Subject(labels["namespace"], labels["model"], labels["pod"])
    reads = [ConfigRead(float(deploy_at), subject, config)]
    before = served_before(labels, config)
    if before is not None:
        reads.append(ConfigRead(float(labels["start"]), subject, before))
    return RecordedConfigs(reads)


async def replay(cause: str) -> Replayed:
    """Replay ``<cause>.om.gz`` with the shipped playbooks in dry-run."""
    labels = json.loads((TRACES / f"{cause}.labels.json").read_text())
    engine = Engine()
    config = deployed_config(labels)
    clock = [0.0]
    env = ExecutorEnv(
        features=engine,
        clock=lambda: clock[0],
        static_configs={labels["model"]: config} if config is not None else {},
    )
    stage = PlaybookStage(
        _books(),
        PlaybookExecutor(AuditStore(), env),
        settings=GuardSettings(dry_run=True),
        open_incidents=engine.announced_incidents,
    )
    out = Replayed(cause, labels, engine)
    reads = config_reads(labels)
    try:
        for t, events in drive(engine, load_trace(TRACES / f"{cause}.om.gz"), configs=reads):
            clock[0] = t
            by_incident = await stage.run_step(events, t)
            records = [r for recs in by_incident.values() for r in recs]
            out.events.extend(events)
            out.records.extend(records)
            if events or records:
                out.steps.append((t, events, records))
    finally:
        stage.store.close()
    return out


@cache
def _books() -> tuple[Any, ...]:
    return tuple(load_playbook_files([SHIPPED_PLAYBOOKS]))


def golden(name: str, actual: str) -> str:
    """Return the golden text ``name``; with TRITONGUARD_UPDATE_GOLDEN=1 write ``actual`` first."""
    path = GOLDEN / name
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        raise AssertionError(f"{path} is missing; write it with TRITONGUARD_UPDATE_GOLDEN=1")
    return path.read_text(encoding="utf-8")


async def planned(replayed: Replayed, event: IncidentEvent) -> list[ActionRecord]:
    """Return what the shipped playbooks for the incident's cause would do (dry-run plans).

    The recorded fault phases end before most playbooks' ``held_for``: planning them for the
    opened incident shows what the daemon would plan once the incident has held.
    """
    config = deployed_config(replayed.labels)
    env = ExecutorEnv(
        features=replayed.engine,
        clock=lambda: event.at,
        static_configs={event.subject.model: config} if config is not None else {},
    )
    store = AuditStore()
    try:
        executor = PlaybookExecutor(store, env)
        records: list[ActionRecord] = []
        for book in _books():
            if event.cause in book.when.causes:
                executor.begin(book, event, True, event.at)
                records += await executor.run(book, event, True, event.at)
        return records
    finally:
        store.close()
