"""Incident threads wired to a playbook stage as the daemon wires them, delivering to a fake.

Tests that drive a stage directly get the daemon's Slack path with :func:`attach`: every
evaluation's transitions and every record reach the thread planner, and the outbox worker
delivers through slack_sdk to the fake Slack when the test drains it.
"""

from __future__ import annotations

from tests.fakes.fake_slack import FakeSlack
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.slack_thread import ThreadPlanner, ThreadSettings
from tritonguard.runtime.playbook_stage import PlaybookStage, StepResult
from tritonguard.runtime.slack_outbox import Backoff, OutboxWorker, SlackOutbox
from tritonguard.runtime.slack_threads import SlackThreads, incident_from_row
from tritonguard.runtime.slack_transport import SlackTransport


def attach(
    stage: PlaybookStage, fake: FakeSlack, channel: str = "#tritonguard-alerts"
) -> SlackThreads:
    """Deliver the stage's incidents into threads in ``channel`` of ``fake``.

    Incidents the stage did not see open (a verification resumed after a restart) are read
    from its audit trail, as the daemon reads them.
    """
    api = SlackNotifier(fake.token, base_url=fake.base_url, timeout_s=5, retries=False)
    outbox = SlackOutbox()
    worker = OutboxWorker(outbox, SlackTransport(api), backoff=Backoff(0.05, 0.2))
    seen: dict[str, IncidentEvent] = {}
    threads = SlackThreads(
        ThreadPlanner(ThreadSettings(channel=channel)),
        outbox,
        worker,
        incident=lambda iid: seen.get(iid) or incident_from_row(stage.store.incident(iid)),
        closers=[api.close],
    )
    step = stage.step

    def observed(events: list[IncidentEvent], now: float) -> StepResult:
        for e in events:
            seen[e.incident_id] = e
        threads.observe_events(events)
        return step(events, now)

    setattr(stage, "step", observed)  # noqa: B010 - the daemon's wiring, around the real step
    stage.on_records = lambda _subject, records: threads.observe_records(records)
    return threads
