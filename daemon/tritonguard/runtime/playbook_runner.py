"""Playbooks in the live daemon: settings → dispatcher, one supervised task per subject at a time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonguard.actions.registry import TritonLike
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.samples import Sample
from tritonguard.logs import get_logger
from tritonguard.runtime.alert_book import AlertBook
from tritonguard.runtime.alertmanager_webhook import Alert
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.dispatcher import DispatchEnv, Dispatcher, Record, load_playbook_files
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.settings import Settings


def shipped_playbooks_dir() -> Path:
    """Return the shipped playbooks: the source tree's ``playbooks/``, else the installed copy.

    The wheel installs them (with their tests) under ``<prefix>/share/tritonguard/playbooks``.
    """
    source = Path(__file__).resolve().parents[3] / "playbooks"
    if source.is_dir():
        return source
    return Path(sys.prefix) / "share" / "tritonguard" / "playbooks"


# The playbooks shipped with the product: one per cause, all in dry-run until turned off.
SHIPPED_PLAYBOOKS = shipped_playbooks_dir()
DEFAULT_SLACK_CHANNEL = "#tritonguard"


def playbook_dirs(settings: Settings) -> list[Path]:
    """Return the configured playbook paths, or the shipped ``playbooks/`` directory."""
    return list(settings.playbook_dirs) or [SHIPPED_PLAYBOOKS]


def flight_recorder_dir(audit_db_path: Path) -> Path:
    """Return where incident traces go: a directory next to the audit database."""
    return audit_db_path.parent / f"{audit_db_path.stem}-incidents"


@dataclass(slots=True)
class TritonDirectory:
    """Triton API clients by (namespace, pod), as the scrape source labels each target's subjects.

    A target without ``pod`` labels its subjects with the metrics ``instance`` (``host:port``),
    so that is the key then. A model-wide subject (no pod) gets the only Triton of its
    namespace, or none when several could be meant.
    """

    clients: dict[tuple[str, str], TritonClient] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> TritonDirectory:
        """Build one client per target that has a ``triton_url``."""
        out = cls()
        for target in settings.targets:
            if not target.triton_url:
                continue
            token = target.access_token.get_secret_value() if target.access_token else None
            out.clients[(target.namespace, target.pod or target.instance)] = TritonClient(
                target.triton_url, access_token=token, timeout_s=settings.triton_timeout_s
            )
        return out

    def for_subject(self, subject: Subject) -> TritonLike | None:
        """Return the client for the subject's pod, or None when no Triton URL is known."""
        client = self.clients.get((subject.namespace, subject.pod))
        if client is not None or subject.pod:
            return client
        same_ns = [c for (ns, _), c in self.clients.items() if ns == subject.namespace]
        return same_ns[0] if len(same_ns) == 1 else None

    async def close(self) -> None:
        """Close every client."""
        for client in self.clients.values():
            await client.close()


class PlaybookRunner:
    """Runs the dispatcher for the daemon without ever holding up evaluation.

    Every incident transition and every due re-check (``held_for``) runs in a task of its own.
    Work on one subject is chained: a transition waits for the previous one on the same subject
    (a ``resolved`` never overtakes the playbook still acting on its incident), and a re-check is
    skipped while the subject has work in flight. At shutdown ``drain`` waits for what is in
    flight, and is cancelled by the supervisor when its grace period is over.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        recorder: FlightRecorder | None = None,
        closers: Iterable[Callable[[], Any]] = (),
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.recorder = recorder
        self.clock = clock
        self.on_change = on_change
        self._closers = list(closers)
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._log = get_logger("tritonguard.playbooks")
        # Firing Alertmanager alerts; playbooks' `when.alerts` match incidents against them.
        self.alerts = AlertBook(clock=clock)
        # Set when replicas elect a leader; only the leader's dispatcher acts.
        self.elector: LeaderElector | None = None

    def leadership(self) -> dict[str, Any] | None:
        """Return who leads and whether this replica may act, or None without election."""
        e = self.elector
        if e is None:
            return None
        return {
            "identity": e.identity,
            "leader": e.is_leader(),
            "holder": e.holder,
            "blocked": e.leader_elsewhere(),
            "adopted_runs": e.adopted,
        }

    def background(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """Return the long-running tasks the daemon must supervise (leader election)."""
        return {"leader-election": self.elector.run} if self.elector is not None else {}

    # ---- hooks the daemon calls ----------------------------------------------------------
    async def on_alerts(self, alerts: list[Alert]) -> None:
        """Remember what Alertmanager says is firing (its webhook posts to the daemon)."""
        self.alerts.update(alerts)

    def observe(self, samples: list[Sample], now: float) -> None:
        """Feed the flight recorder with every sample the daemon ingests."""
        if self.recorder is not None:
            self.recorder.observe(samples, now)

    async def on_events(self, events: list[IncidentEvent]) -> list[Record]:
        """Start handling each transition in its own task; return at once (records go to audit)."""
        successors = self.dispatcher.successors(events)
        for event in events:
            if self.recorder is not None:
                try:
                    path = self.recorder.on_event(event)
                except OSError as exc:
                    self._log.warning(
                        "flight recorder could not write",
                        incident=event.incident_id,
                        error=str(exc),
                    )
                else:
                    if path is not None:
                        self._log.info(
                            "incident trace saved", incident=event.incident_id, path=str(path)
                        )
            successor = successors.get(event.incident_id)
            self._chain(
                event.subject,
                functools.partial(self._handle, event, successor),
                event.event,
            )
        return []

    async def on_evaluated(self, now: float) -> None:
        """Re-check open incidents whose playbooks wait for ``held_for``, one task per subject."""
        for event in self.dispatcher.open_incidents():
            key = event.subject.key()
            running = self._chains.get(key)
            if running is not None and not running.done():
                continue
            self._chain(
                event.subject,
                functools.partial(self.dispatcher.reconsider, event.incident_id, now),
                "re-check",
            )

    def in_flight(self) -> int:
        """Return how many handling tasks have not finished."""
        return sum(1 for t in self._tasks if not t.done())

    async def drain(self) -> None:
        """Wait for everything in flight; if cancelled (grace over), cancel it and return."""
        try:
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
        except asyncio.CancelledError:
            left = [t for t in self._tasks if not t.done()]
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            self._log.warning("shutdown grace over; cancelled in-flight playbooks", tasks=len(left))
            raise

    async def close(self) -> None:
        """Save open incident captures, close clients and the audit database."""
        if self.recorder is not None:
            with contextlib.suppress(OSError):
                self.recorder.flush()
        if self.elector is not None:
            await self.elector.release()
        for closer in self._closers:
            result = closer()
            if asyncio.iscoroutine(result):
                await result
        self.dispatcher.store.close()

    def actions_for(self, incident_id: str) -> list[dict[str, Any]]:
        """Return the audit trail of one incident (for ``/api/incidents``)."""
        return [
            {
                k: d[k]
                for k in (
                    "at",
                    "playbook",
                    "action",
                    "params",
                    "dry_run",
                    "status",
                    "guard",
                    "reason",
                    "detail",
                )
            }
            for d in self.dispatcher.store.decisions(incident_id)
        ]

    # ---- internals -----------------------------------------------------------------------
    async def _handle(self, event: IncidentEvent, successor: IncidentEvent | None) -> list[Record]:
        # Handing restores over happens in the subject's chain, after the playbook that made
        # them has recorded its undos.
        handed = self.dispatcher.hand_over(event, successor) if successor is not None else []
        # The clock is read when the work starts: it may have waited behind the subject's chain.
        return handed + await self.dispatcher.handle(event, self.clock())

    def _chain(
        self, subject: Subject, work: Callable[[], Awaitable[list[Record]]], what: str
    ) -> None:
        key = subject.key()
        previous = self._chains.get(key)

        async def run() -> None:
            if previous is not None and not previous.done():
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.shield(previous)
            try:
                records = await work()
            except Exception as exc:  # a bug must not take the daemon down; log it loudly
                self._log.error("playbook handling failed", subject=key, what=what, exc_info=exc)
                return
            self._log_records(key, records)

        task = asyncio.create_task(run(), name=f"playbooks:{key}")
        self._chains[key] = task
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        for key, chained in list(self._chains.items()):
            if chained is task:
                del self._chains[key]

    def _log_records(self, key: str, records: Any) -> None:
        if isinstance(records, dict):
            records = [r for rs in records.values() for r in rs]
        changed = False
        for r in records or []:
            self._log.info(
                "playbook " + str(r.get("status")),
                subject=key,
                playbook=r.get("playbook"),
                action=r.get("action"),
                dry_run=r.get("dry_run"),
                guard=r.get("guard", ""),
                reason=r.get("reason", ""),
            )
            changed = changed or (
                r.get("status") in ("ran", "rolled_back") and not r.get("dry_run")
            )
        if changed and self.on_change is not None:
            self.on_change()


def build_runner(
    settings: Settings,
    engine: Engine,
    *,
    clock: Callable[[], float] = time.time,
    on_change: Callable[[], None] | None = None,
    guard_settings: GuardSettings | None = None,
    alerts: AlertBook | None = None,
) -> PlaybookRunner:
    """Build the dispatcher and its clients from settings; raise PlaybookError on bad playbooks.

    Dry-run is the global ``dry_run`` setting (on by default); each playbook's own
    ``guards.dry_run`` must be off as well before anything changes on a server.
    """
    books = load_playbook_files(playbook_dirs(settings))
    store = AuditStore(settings.audit_db_path)
    tritons = TritonDirectory.from_settings(settings)
    closers: list[Callable[[], Any]] = [tritons.close]
    kube: KubernetesClient | None = None
    k = settings.kube
    if k.in_cluster or k.kubeconfig is not None:
        kube = KubernetesClient.from_environment(
            kubeconfig=str(k.kubeconfig) if k.kubeconfig is not None else None
        )
        closers.append(kube.close)
    slack: SlackNotifier | None = None
    if settings.slack.token is not None:
        slack = SlackNotifier(
            settings.slack.token.get_secret_value(), base_url=settings.slack.base_url
        )
    alerts = alerts or AlertBook(clock=clock)
    env = DispatchEnv(
        triton_for=tritons.for_subject,
        kube=kube,
        slack=slack,
        slack_channel=settings.slack.channel or DEFAULT_SLACK_CHANNEL,
        feature_value=engine.feature_value,
        is_fresh=engine.is_fresh,
        clock=clock,
        alerts_for=alerts.names_for,
    )
    guards = guard_settings or GuardSettings(
        dry_run=settings.dry_run, action_budget_per_hour=settings.action_budget_per_hour
    )
    dispatcher = Dispatcher(books, store, settings=guards, env=env)
    recorder = FlightRecorder(flight_recorder_dir(settings.audit_db_path), store)
    runner = PlaybookRunner(
        dispatcher, recorder=recorder, closers=closers, clock=clock, on_change=on_change
    )
    runner.alerts = alerts
    if k.leader_election and kube is not None:
        runner.elector = LeaderElector(
            kube,
            store,
            namespace=k.namespace,
            name=k.lease_name,
            identity=k.identity or socket.gethostname(),
            duration_s=k.lease_duration_s,
            clock=clock,
        )
        env.leader_elsewhere = runner.elector.leader_elsewhere
        env.on_run = runner.elector.nudge
    return runner
