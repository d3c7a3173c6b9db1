"""The Slack calls a recorded trace makes, without Slack: ``tritonguard replay --format slack``.

The incidents and audit records go through the daemon's own path: the thread planner, the
outbox (in memory) and its worker, which delivers to a recording transport instead of the
Web API. Notifications run as the daemon runs them with ``dry_run.notify: false``, and
every other step is planned, so nothing anywhere changes and no token is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook
from tritonguard.core.slack_thread import ChartMaker, ThreadPlanner, ThreadSettings
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.incident_charts import IncidentCharts
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.runtime.slack_outbox import OutboxWorker, SlackOutbox, Transport
from tritonguard.runtime.slack_threads import SlackThreads
from tritonguard.runtime.slack_transport import RecordingTransport


def notifying(books: Sequence[Playbook]) -> list[Playbook]:
    """Return the playbooks with their own ``guards.dry_run`` lifted.

    Every shipped playbook is dry-run in its own guards, which plans its ``slack.post`` too;
    the preview (and the demo) show what it posts once turned on. Its changes stay planned
    as long as the stage's remediation switch is on.
    """
    return [
        b.model_copy(update={"guards": b.guards.model_copy(update={"dry_run": False})})
        for b in books
    ]


class SlackPreview:
    """Feeds a replay's incidents and playbook records to the daemon's threads; records calls.

    ``charts_dir``: draw each thread's chart there, as the daemon uploads it; ``transport``
    delivers somewhere else instead (a terminal, in the demo's tests).
    """

    def __init__(
        self,
        engine: Engine,
        books: Sequence[Playbook],
        settings: ThreadSettings | None = None,
        *,
        chart: ChartMaker | None = None,
        charts_dir: Path | None = None,
        chart_minutes: float = 10.0,
        transport: Transport | None = None,
    ) -> None:
        self.now = 0.0
        if chart is None and charts_dir is not None:
            # Drawn from the engine's series as they stood at that point of the trace.
            chart = IncidentCharts(
                engine, charts_dir, minutes=chart_minutes, clock=lambda: self.now
            )
        self.recording = RecordingTransport()
        outbox = SlackOutbox(":memory:")
        worker = OutboxWorker(outbox, transport or self.recording, clock=lambda: self.now)
        planner = ThreadPlanner(settings, chart=chart)
        self.threads = SlackThreads(planner, outbox, worker, clock=lambda: self.now)
        env = ExecutorEnv(
            features=engine, clock=lambda: self.now, slack_channel=planner.settings.channel
        )
        self.stage = PlaybookStage(
            notifying(books),
            PlaybookExecutor(AuditStore(), env),
            settings=GuardSettings(dry_run=True, notify_dry_run=False),
            open_incidents=engine.announced_incidents,
            on_records=lambda _subject, records: self.threads.observe_records(records),
        )
        self._shown = 0

    async def step(self, events: list[IncidentEvent], now: float) -> list[dict[str, Any]]:
        """Take one evaluation's transitions at trace time ``now``; return the calls they make.

        As in the daemon, the threads hear the transitions before the playbooks run.
        """
        self.now = now
        self.threads.observe_events(events)
        await self.stage.run_step(events, now)
        await self.threads.worker.deliver_due()
        calls = self.recording.calls[self._shown :]
        self._shown = len(self.recording.calls)
        return [dict(c) for c in calls]

    def close(self) -> None:
        """Close the audit store and the outbox."""
        self.stage.store.close()
        self.threads.outbox.close()
