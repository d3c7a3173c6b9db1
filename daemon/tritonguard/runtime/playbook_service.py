"""The playbook stage as the daemon runs it: clients from settings, flight recorder, leadership.

:func:`build_service` wires the stage's executor to the Triton, Kubernetes and Slack clients
the settings name, the audit database, the flight recorder and, with several replicas, the
leader election. The daemon calls :meth:`PlaybookService.after_evaluation` straight from its
evaluator; nothing there waits for a playbook.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.clients.ports import TritonApi
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.clients.slack_socket import SlackSocket
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook, PlaybookError
from tritonguard.core.samples import Sample
from tritonguard.logs import get_logger
from tritonguard.runtime.alert_book import AlertBook
from tritonguard.runtime.alertmanager_webhook import Alert
from tritonguard.runtime.approvals import Approvals, hold_socket, thread_notice
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.runtime.incident_charts import chart_maker
from tritonguard.runtime.kube_events import KubeEvents
from tritonguard.runtime.leader_election import LeaderElector
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS, load_playbook_files
from tritonguard.runtime.playbook_reloader import PlaybookReloader, ReloadState
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.runtime.slack_outbox import DeliveryStats
from tritonguard.runtime.slack_threads import SlackThreads, build_threads, incident_from_row
from tritonguard.settings import Settings, TargetSettings

DEFAULT_SLACK_CHANNEL = "#tritonguard"
# Records of an approval's life: the thread shows them as the approval's own messages.
APPROVAL_STATUSES = frozenset({"awaiting_approval", "approved", "rejected", "expired"})


def playbook_dirs(settings: Settings) -> list[Path]:
    """Return the configured playbook paths, or the shipped ``playbooks/`` directory."""
    return list(settings.playbook_dirs) or [SHIPPED_PLAYBOOKS]


def flight_recorder_dir(audit_db_path: Path) -> Path:
    """Return where incident traces go: a directory next to the audit database."""
    return audit_db_path.parent / f"{audit_db_path.stem}-incidents"


@dataclass(slots=True)
class TritonDirectory:
    """Triton API clients by target identity (namespace, pod), as the sources label subjects.

    A target without ``pod`` labels its subjects with the metrics ``instance`` (``host:port``),
    so that is the key then (``TargetSettings.identity``). A model-wide subject (no pod) gets the
    only Triton of its namespace, or none when several could be meant.
    """

    clients: dict[tuple[str, str], TritonClient] = field(default_factory=dict)
    # Found by discovery, replaced as pods come and go; configured targets win a clash.
    discovered: dict[tuple[str, str], TritonClient] = field(default_factory=dict)
    timeout_s: float = 5.0
    _closing: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    def from_settings(cls, settings: Settings) -> TritonDirectory:
        """Build one client per target that has a ``triton_url``."""
        out = cls(timeout_s=settings.triton_timeout_s)
        for target in settings.targets:
            if not target.triton_url:
                continue
            token = target.access_token.get_secret_value() if target.access_token else None
            out.clients[target.identity] = TritonClient(
                target.triton_url, access_token=token, timeout_s=settings.triton_timeout_s
            )
        return out

    def use_targets(self, targets: Iterable[TargetSettings]) -> None:
        """Know exactly these targets' Triton APIs beside the configured ones (discovery).

        A pod that went away, or came back at another address, loses its old client.
        """
        new: dict[tuple[str, str], TritonClient] = {}
        for target in targets:
            key = target.identity
            if not target.triton_url or key in self.clients or key in new:
                continue
            old = self.discovered.get(key)
            if old is not None and old.base_url == target.triton_url.rstrip("/"):
                new[key] = old
                continue
            token = target.access_token.get_secret_value() if target.access_token else None
            new[key] = TritonClient(target.triton_url, access_token=token, timeout_s=self.timeout_s)
        for key, client in self.discovered.items():
            if new.get(key) is not client:
                task = asyncio.get_running_loop().create_task(client.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self.discovered = new

    def for_subject(self, subject: Subject) -> TritonApi | None:
        """Return the client for the subject's pod, or None when no Triton URL is known."""
        key = (subject.namespace, subject.pod)
        client = self.clients.get(key) or self.discovered.get(key)
        if client is not None or subject.pod:
            return client
        same_ns = [
            c
            for (ns, _), c in [*self.clients.items(), *self.discovered.items()]
            if ns == subject.namespace
        ]
        return same_ns[0] if len(same_ns) == 1 else None

    async def close(self) -> None:
        """Close every client."""
        for client in [*self.clients.values(), *self.discovered.values()]:
            await client.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class PlaybookService:
    """The daemon's hooks into the playbook stage (``DaemonApp(playbooks=...)``).

    Every record the stage writes is logged, counted (``on_records``) and, when a Triton action
    changed a server for real, reported through ``on_change`` with the subject's key (the
    daemon re-reads its model configs). At shutdown :meth:`drain` waits for work in flight; the supervisor cancels it
    when the grace period is over.
    """

    def __init__(
        self,
        stage: PlaybookStage,
        *,
        alerts: AlertBook | None = None,
        recorder: FlightRecorder | None = None,
        elector: LeaderElector | None = None,
        reloader: PlaybookReloader | None = None,
        closers: Iterable[Callable[[], Any]] = (),
        on_change: Callable[[str], None] | None = None,
        threads: SlackThreads | None = None,
        tritons: TritonDirectory | None = None,
        approvals: Approvals | None = None,
        socket: SlackSocket | None = None,
        kube_events: KubeEvents | None = None,
    ) -> None:
        self.stage = stage
        self.kube_events = kube_events
        self.approvals = approvals
        self.socket = socket
        self.tritons = tritons
        self.threads = threads
        self.reloader = reloader
        self.alerts = alerts or AlertBook()
        self.recorder = recorder
        self.elector = elector
        self.on_change = on_change
        self._observers: list[Callable[[list[ActionRecord]], None]] = []
        if kube_events is not None:
            self._observers.append(kube_events.observe_records)
        self._closers = list(closers)
        self._log = get_logger("tritonguard.playbooks")
        stage.on_records = self._on_records

    @property
    def store(self) -> AuditStore:
        """The audit trail."""
        return self.stage.store

    def subscribe(self, observer: Callable[[list[ActionRecord]], None]) -> None:
        """Be told about every decision the stage records (the daemon counts them)."""
        self._observers.append(observer)

    def slack_delivery(self) -> DeliveryStats:
        """Return how the Slack outbox's delivery stands (``/metrics``)."""
        return self.threads.worker.stats() if self.threads is not None else DeliveryStats()

    def recorder_memory(self) -> tuple[int, int]:
        """Return (bytes the flight recorder holds, points it has let go in all)."""
        if self.recorder is None:
            return 0, 0
        return self.recorder.held_bytes(), self.recorder.dropped

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

    def explain_withheld(self, why: Callable[[Subject], str | None]) -> None:
        """Let a step without a Triton endpoint say why discovery withholds it (a stale watch)."""
        self.stage.executor.env.triton_withheld = why

    def background(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """Return the long-running tasks the daemon must supervise (election, reloading)."""
        tasks: dict[str, Callable[[], Awaitable[None]]] = {}
        if self.threads is not None:
            tasks["slack-outbox"] = self.threads.run
        clicks = self.socket
        if clicks is not None:
            may_act = self.stage.leader_elsewhere
            tasks["slack-approvals"] = functools.partial(
                hold_socket, clicks, lambda: may_act() is None
            )
        if self.elector is not None:
            tasks["leader-election"] = self.elector.run
        if self.reloader is not None:
            tasks["playbook-reloader"] = self.reloader.run
        if self.kube_events is not None:
            tasks["kube-events"] = self.kube_events.run
        return tasks

    def use_targets(self, targets: list[TargetSettings]) -> None:
        """Let actions reach these targets' Triton APIs (the daemon's discovered pods)."""
        if self.tritons is not None:
            self.tritons.use_targets(targets)

    def reload(self) -> None:
        """Reload the playbook files now (SIGHUP)."""
        if self.reloader is not None:
            self.reloader.request()

    def playbook_state(self) -> ReloadState | None:
        """Return which playbooks are active and whether the newest set loaded."""
        return self.reloader.state if self.reloader is not None else None

    async def on_alerts(self, alerts: list[Alert]) -> None:
        """Remember what Alertmanager says is firing (its webhook posts to the daemon)."""
        self.alerts.update(alerts)

    def observe(self, samples: list[Sample], now: float) -> None:
        """Let the flight recorder copy what the poll added to the engine's store.

        ``samples`` may be empty (a scrape that wrote the store directly): the recorder
        reads the store either way.
        """
        if self.recorder is not None:
            self.recorder.observe(samples, now)

    def after_evaluation(self, events: list[IncidentEvent], now: float) -> None:
        """Capture incidents for the flight recorder and start the evaluation's playbook work."""
        for event in events:
            self._capture(event)
            if event.event == "resolved":
                # Before the thread's last update, so the resolved root shows no buttons.
                dropped = self.stage.executor.drop_approvals(event, now)
                self._on_records(event.subject.key(), dropped)
        if self.threads is not None:
            self.threads.observe_events(events)
        if self.kube_events is not None:
            self.kube_events.observe_incidents(events)
        self.stage.step(events, now)

    def _capture(self, event: IncidentEvent) -> None:
        if self.recorder is None:
            return
        try:
            path = self.recorder.on_event(event)
        except OSError as exc:
            self._log.warning(
                "flight recorder could not write", incident=event.incident_id, error=str(exc)
            )
            return
        if path is not None:
            self._log.info("incident trace saved", incident=event.incident_id, path=str(path))

    def _on_records(self, subject: str, records: list[ActionRecord]) -> None:
        changed = False
        for r in records:
            self._log.info(
                "playbook " + r.status,
                subject=subject,
                playbook=r.playbook,
                action=r.action,
                dry_run=r.dry_run,
                guard=r.guard,
                reason=r.reason,
            )
            # Only Triton's actions change a model config; a post or a scale changes none
            # (a new pod's models are read as they appear), and on a fleet a re-read of
            # every config is thousands of requests: the subject's are read again.
            changed = changed or (
                r.action.startswith("triton.")
                and r.status in ("ran", "rolled_back")
                and not r.dry_run
            )
        if self.threads is not None:
            self.threads.observe_records([r for r in records if r.status not in APPROVAL_STATUSES])
        for observe in self._observers:
            observe(records)
        if changed and self.on_change is not None:
            self.on_change(subject)

    async def drain(self) -> None:
        """Wait for everything in flight; if cancelled (grace over), cancel it and return."""
        try:
            await self.stage.settle()
        except asyncio.CancelledError:
            left = self.stage.in_flight()
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            self._log.warning("shutdown grace over; cancelled in-flight playbooks", tasks=len(left))
            raise

    async def close(self) -> None:
        """Save open incident captures, release the lease, close clients and the audit database."""
        if self.recorder is not None:
            with contextlib.suppress(OSError):
                self.recorder.flush()
        if self.socket is not None:
            await self.socket.close()
        if self.kube_events is not None:
            # The last resolutions and restores, within a bound: Events never hold shutdown up.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.kube_events.drain(), timeout=5.0)
        if self.elector is not None:
            await self.elector.release()
        if self.threads is not None:
            await self.threads.drain()
            await self.threads.close()
        for closer in self._closers:
            result = closer()
            if asyncio.iscoroutine(result):
                await result
        self.store.close()

    def incident_history(self, limit: int = 100) -> list[dict[str, Any]]:
        """Return the latest incidents of the audit trail, resolved ones too, newest first."""
        return self.store.incidents(limit=limit)

    def actions_for(self, incident_id: str) -> list[dict[str, Any]]:
        """Return the audit trail of one incident (for ``/api/incidents``)."""
        return [
            {k: v for k, v in rec.as_dict().items() if k != "phase"}
            for rec in self.store.decisions(incident_id)
        ]


def build_service(
    settings: Settings,
    engine: Engine,
    *,
    clock: Callable[[], float] = time.time,
    on_change: Callable[[str], None] | None = None,
    guard_settings: GuardSettings | None = None,
    alerts: AlertBook | None = None,
) -> PlaybookService:
    """Build the stage and its clients from settings.

    Playbook files that do not load raise PlaybookError, unless the audit database holds
    the last good set: the daemon then starts with it and says what is wrong (``/readyz``,
    the log). Dry-run is the global ``dry_run`` setting, one switch for notifications and one
    for remediation (both on by default); a playbook's own ``guards.dry_run: true`` plans
    both kinds, and its ``false`` never lifts the global switch of a step's kind.
    """
    dirs = playbook_dirs(settings)
    store = AuditStore(settings.audit_db_path)
    try:
        books: list[Playbook] | None = load_playbook_files(dirs)
        problems: list[str] = []
    except PlaybookError as exc:
        books, problems = None, exc.problems
    tritons = TritonDirectory.from_settings(settings)
    closers: list[Callable[[], Any]] = [tritons.close]
    kube: KubernetesClient | None = None
    k = settings.kube
    if k.in_cluster or k.kubeconfig is not None:
        kube = KubernetesClient.from_environment(
            kubeconfig=str(k.kubeconfig) if k.kubeconfig is not None else None
        )
        closers.append(kube.close)
    if alerts is None:
        alerts = AlertBook(
            clock=clock,
            max_alerts=settings.api.alert_book_max_alerts,
            max_bytes=settings.api.alert_book_max_bytes,
        )
    env = ExecutorEnv(
        triton_for=tritons.for_subject,
        kube=kube,
        slack_channel=settings.slack.channel or DEFAULT_SLACK_CHANNEL,
        features=engine,
        clock=clock,
        approvers=tuple(settings.slack.approvals.approvers),
        approval_timeout_s=settings.slack.approvals.timeout_s,
    )
    elector: LeaderElector | None = None
    if k.leader_election and kube is not None:
        elector = LeaderElector(
            kube,
            store,
            namespace=k.namespace,
            name=k.lease_name,
            identity=k.identity or socket.gethostname(),
            duration_s=k.lease_duration_s,
            clock=clock,
        )
        env.on_run = elector.nudge
    kube_events: KubeEvents | None = None
    if kube is not None:
        # Only the replica holding the lease writes Events (every replica sees the incidents).
        kube_events = KubeEvents(
            kube,
            instance=k.identity or socket.gethostname(),
            active=elector.is_leader if elector is not None else lambda: True,
        )
    guards = guard_settings or settings.guard_settings()
    stage = PlaybookStage(
        books or [],
        PlaybookExecutor(store, env),
        settings=guards,
        open_incidents=engine.announced_incidents,
        alerts_for=alerts.names_for,
        leader_elsewhere=elector.leader_elsewhere if elector is not None else lambda: None,
    )
    reloader = PlaybookReloader(stage, dirs, store, clock=clock)
    if books is not None:
        reloader.start(books)
    elif not reloader.start_from_saved(problems):
        store.close()
        raise PlaybookError(problems)
    recorder = FlightRecorder(
        flight_recorder_dir(settings.audit_db_path),
        store,
        engine.store,
        max_bytes=settings.recorder_budget_bytes(),
    )
    threads = build_threads(
        settings,
        clock=clock,
        chart=chart_maker(settings, engine),
        incident=lambda incident_id: (
            next(
                (e for e in engine.announced_incidents() if e.incident_id == incident_id),
                None,
            )
            or incident_from_row(store.incident(incident_id))
        ),
    )
    threads.adopting = lambda: stage.leader_elsewhere() is None
    env.on_approval = thread_notice(threads, elector.held_elsewhere if elector else lambda _: False)
    if elector is not None:
        elector.thread_of, elector.take_thread = threads.handover, threads.take_over
    approvals, clicks = _approvals(settings, stage, books or [], clock, closers)
    return PlaybookService(
        stage,
        alerts=alerts,
        recorder=recorder,
        elector=elector,
        reloader=reloader,
        closers=closers,
        on_change=on_change,
        threads=threads,
        tritons=tritons,
        approvals=approvals,
        socket=clicks,
        kube_events=kube_events,
    )


def _approvals(
    settings: Settings,
    stage: PlaybookStage,
    books: list[Playbook],
    clock: Callable[[], float],
    closers: list[Callable[[], Any]],
) -> tuple[Approvals, SlackSocket | None]:
    """Return the approvals desk and, with an app token, the Socket Mode connection to it.

    Group membership is asked of Slack with the bot token; without one only approvers named
    directly may decide.
    """
    s = settings.slack
    members = None
    if s.token is not None:
        lookups = SlackNotifier(s.token.get_secret_value(), base_url=s.base_url)
        closers.append(lookups.close)
        members = lookups.group_members
    approvals = Approvals(stage, members=members, clock=clock)
    waiting = sorted({b.name for b in books for step in b.steps if step.needs_approval})
    if s.app_token is None:
        if waiting:
            get_logger("tritonguard.playbooks").warning(
                "steps need approval but slack.app_token is not set: nobody can approve "
                "them, so they expire",
                playbooks=waiting,
            )
        return approvals, None
    socket = SlackSocket(s.app_token.get_secret_value(), approvals.on_click, base_url=s.base_url)
    return approvals, socket
