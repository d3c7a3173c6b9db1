"""The incident threads as the daemon runs them: plan, persist in the outbox, deliver.

:class:`SlackThreads` hears every incident transition and every audit record, asks the pure
planner (``core.slack_thread``) which Slack calls they make, writes those to the outbox at
once and lets the worker deliver them. With a token the worker talks to Slack; without one,
to the console and the structured log, through the same outbox.

A record or approval of an incident whose thread this process has not seen, but the outbox
knows (a restart on the same audit database), adopts that thread: its replies go on in it.
With several replicas the leader hands each waiting approval's thread over with the
approval (:meth:`SlackThreads.handover`, :meth:`SlackThreads.take_over`), so the next leader
goes on in it the same way. Only a replica that may act adopts a thread: one that does not
lead must not post into the leader's.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.run_handover import HandedApproval
from tritonguard.core.slack_message import ApprovalView, Message, ThreadView
from tritonguard.core.slack_thread import (
    ChartMaker,
    Outgoing,
    ThreadPlanner,
    ThreadSettings,
    key_seq,
    request_of,
)
from tritonguard.logs import get_logger
from tritonguard.runtime.incident_charts import IncidentCharts
from tritonguard.runtime.slack_outbox import (
    Backoff,
    OutboxWorker,
    SlackOutbox,
    ThreadRef,
    Transport,
)
from tritonguard.runtime.slack_transport import ConsoleTransport, SlackTransport
from tritonguard.settings import Settings

DEFAULT_CHANNEL = "#tritonguard"


def thread_settings(settings: Settings) -> ThreadSettings:
    """Return the planner's settings from the daemon's."""
    s = settings.slack
    return ThreadSettings(
        channel=s.channel or DEFAULT_CHANNEL,
        routes=tuple(s.routes),
        mentions=tuple(s.mentions),
        links=s.links,
        templates=s.templates,
        severity=s.severity,
    )


class SlackThreads:
    """Plans each incident's thread and hands every call to the persisted outbox."""

    def __init__(
        self,
        planner: ThreadPlanner,
        outbox: SlackOutbox,
        worker: OutboxWorker,
        *,
        clock: Callable[[], float] = time.time,
        incident: Callable[[str], IncidentEvent | None] = lambda _: None,
        closers: Iterable[Callable[[], object]] = (),
    ) -> None:
        self.planner = planner
        self.outbox = outbox
        self.worker = worker
        self.clock = clock
        self.incident = incident
        self._closers = list(closers)
        # Whether this replica may post into threads it did not open (it leads).
        self.adopting: Callable[[], bool] = lambda: True
        self._log = get_logger("tritonguard.slack")
        # Incidents the outbox has no thread of (looked up once; this process opens any new one).
        self._unknown: set[str] = set()

    def _queue(self, items: list[Outgoing]) -> None:
        if items:
            self.outbox.enqueue(items, self.clock())
            self.worker.wake()

    def observe_events(self, events: Iterable[IncidentEvent]) -> None:
        """Take an evaluation's incident transitions (a fleet group's root is updated once)."""
        self._queue(self.planner.on_events(events))

    def observe_records(self, records: Iterable[ActionRecord]) -> None:
        """Take audit records as the playbook stage writes them."""
        for rec in records:
            incident = self.incident(rec.incident_id)
            # A pod of a fleet group goes into the thread that tells the group.
            host = self.planner.host_of(rec.incident_id)
            if host is None:
                self._adopt(rec.incident_id, incident)
            else:
                self._adopt(host, self.incident(host))
            self._queue(self.planner.on_record(rec, incident))

    def observe_approval(
        self, incident_id: str, approval: ApprovalView, incident: IncidentEvent | None = None
    ) -> None:
        """Take an approval asked for or decided; ``incident`` as the approval remembers it."""
        self._adopt(incident_id, incident)
        self._queue(self.planner.on_approval(incident_id, approval))

    def _adopt(self, incident_id: str, incident: IncidentEvent | None) -> None:
        """Go on in the thread an earlier run opened for the incident, if the outbox has one."""
        if self.planner.started(incident_id) or incident_id in self._unknown:
            return
        if not self.adopting():
            return
        if self.outbox.thread(incident_id) is None and not self.outbox.root_pending(incident_id):
            self._unknown.add(incident_id)
            return
        incident = incident or self.incident(incident_id)
        rows = self.outbox.items(incident_id)
        # Given-up messages count for the numbering (their keys stay taken), not the content.
        items = [item for item, state in rows if state != "dead"]
        roots = [i for i in items if i.kind in ("post_root", "update_root")]
        if incident is None or not roots:
            return
        requests = {}
        for item in items:
            approval_id = request_of(item.message) if item.message is not None else None
            if item.kind == "reply" and approval_id is not None:
                requests[approval_id] = item.key
        self.planner.adopt(
            incident,
            channel=roots[0].channel,
            seq=max(key_seq(item.key) for item, _ in rows),
            root=roots[-1].message,
            requests=requests,
        )
        self._log.info("slack thread adopted", incident=incident_id, messages=len(items))

    def handover(self, incident_id: str, approval_id: str) -> dict[str, Any] | None:
        """Return where an approval's thread is, for the next leader, or None if not posted.

        The newest root and the approval's request go along (the next leader keeps the root
        as it is but for the decided buttons, and rewrites the request); ``seq`` is the
        highest message number used, so the next leader's keys never repeat these.
        """
        ref = self.outbox.thread(incident_id)
        if ref is None:
            return None
        rows = self.outbox.sent_items(incident_id)
        roots = [i for i, state, _ in rows if i.kind in ("post_root", "update_root")]
        roots = [i for i in roots if i.message is not None]
        if not roots:
            return None
        out: dict[str, Any] = {
            "channel": ref.channel,
            "root_ts": ref.root_ts,
            "seq": max(key_seq(i.key) for i, _, _ in rows),
            "root": roots[-1].message.as_dict() if roots[-1].message is not None else None,
        }
        # As the request's block_id holds it: "approval:<id>" cut at Slack's 255 characters.
        asked = f"approval:{approval_id}"[:255].removeprefix("approval:")
        for item, state, ts in rows:
            message = item.message
            if (
                item.kind == "reply"
                and state == "sent"
                and message
                and request_of(message) == asked
            ):
                out["request"] = [item.key, ts]
        return out

    def take_over(self, approval: HandedApproval) -> None:
        """Know the thread of an approval handed over by the leader (``handover``'s form)."""
        t = approval.thread or {}
        try:
            ref = ThreadRef(str(t["channel"]), str(t["root_ts"]))
            seq, root = int(t["seq"]), t["root"]
            message = Message(str(root["text"]), list(root["blocks"]))
        except (KeyError, TypeError, ValueError):
            self._log.warning("handed thread unreadable", approval=approval.approval_id)
            return
        incident = approval.incident_id
        meta = {"incident_id": incident}
        # The root under the highest number the leader used: this replica's keys go on past it.
        root_key = f"{incident}:{seq:04d}:handed"
        sent = [
            (
                Outgoing(root_key, incident, "update_root", ref.channel, message, metadata=meta),
                ref.root_ts,
            )
        ]
        request = t.get("request")
        if isinstance(request, list) and len(request) == 2:
            # Only what finds the request again: its key, its ts and whose buttons it bore.
            block = {"type": "actions", "block_id": f"approval:{approval.approval_id}"[:255]}
            ask = Outgoing(
                str(request[0]), incident, "reply", ref.channel, Message("", [block]), metadata=meta
            )
            sent.append((ask, str(request[1])))
        self.outbox.adopt_thread(incident, ref, sent, self.clock())
        self._unknown.discard(incident)

    def view(self, incident_id: str) -> ThreadView | None:
        """Return what an incident's thread shows now."""
        return self.planner.view(incident_id)

    async def run(self) -> None:
        """Deliver until cancelled (a supervised root task)."""
        await self.worker.run()

    async def drain(self) -> None:
        """Deliver what is due now (at shutdown; the rest waits in the outbox for the restart)."""
        with contextlib.suppress(Exception):
            await self.worker.deliver_due()

    async def close(self) -> None:
        """Close the client and the outbox."""
        for closer in self._closers:
            result = closer()
            if inspect.isawaitable(result):
                await result
        self.outbox.close()


def incident_from_row(row: Mapping[str, Any] | None) -> IncidentEvent | None:
    """Return an incident as the audit trail remembers it (after a restart), or None.

    A resumed verification's records belong to an incident this process never saw open; its
    thread is found again in Slack by cause and subject.
    """
    if row is None:
        return None
    return IncidentEvent(
        event="updated",
        incident_id=str(row["incident_id"]),
        cause=str(row["cause"]),
        subject=Subject(str(row["namespace"]), str(row["model"]), str(row["pod"])),
        at=float(row["opened_at"]),
        confidence=0.0,
        summary=f"{row['cause']} on {row['model']} (opened before a restart)",
        evidence={},
        fix=Fix(""),
        opened_at=float(row["opened_at"]),
    )


def outbox_path(audit_db_path: Path | str) -> str:
    """Return where the outbox lives: in the audit database itself."""
    return str(audit_db_path)


def build_threads(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    chart: ChartMaker | None = None,
    transport: Transport | None = None,
    console: Callable[[str], None] | None = None,
    incident: Callable[[str], IncidentEvent | None] = lambda _: None,
) -> SlackThreads:
    """Build the threads from settings: Slack with a token, else the console and the log.

    A ``chart`` that draws off the event loop (``IncidentCharts``, as ``chart_maker`` builds
    it) is waited for by the outbox before each upload, and stopped when the threads close.
    """
    s = settings.slack
    closers: list[Callable[[], object]] = []
    if isinstance(chart, IncidentCharts):
        closers.append(chart.close)
    if transport is None:
        if s.token is not None:
            api = SlackNotifier(s.token.get_secret_value(), base_url=s.base_url, retries=False)
            closers.append(api.close)
            transport = SlackTransport(api)
        else:
            transport = ConsoleTransport(console)
    outbox = SlackOutbox(outbox_path(settings.audit_db_path))
    o = s.outbox
    worker = OutboxWorker(
        outbox,
        transport,
        backoff=Backoff(o.retry_initial_s, o.retry_max_s, o.give_up_after_s),
        clock=clock,
        file_ready=chart.ready if isinstance(chart, IncidentCharts) else None,
    )
    planner = ThreadPlanner(thread_settings(settings), chart=chart)
    return SlackThreads(planner, outbox, worker, clock=clock, incident=incident, closers=closers)
