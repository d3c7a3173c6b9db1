"""Run lab scenarios live with the daemon watching: directly, through a real Prometheus, or both.

Each scenario gets its own real Triton, load generator and exporters (as ``run_scenario`` sets
them up), but instead of recording, one daemon per *way* watches every scenario at once: the
``scrape`` way scrapes Triton, the lab exporters, the ingress counters and node-exporter like
``tritonguard run --target ...``; the ``prometheus`` way starts the Debian Prometheus with a
generated scrape config for the same targets and reads it with the PromQL source. Every incident
transition is kept with the wall time it happened, so detection delays are measured, not assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonguard.clients.metrics_scraper import MetricsScraper
from tritonguard.clients.prometheus_query import PrometheusQueryClient
from tritonguard.core.engine import Engine
from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.metric_names import is_consumed
from tritonguard.dry_run_settings import DryRunSettings
from tritonguard.lab.exporters import LabExporters
from tritonguard.lab.loadgen import LoadGenerator, LoadStats
from tritonguard.lab.node_exporter import NodeExporter
from tritonguard.lab.prometheus_server import PrometheusServer, ScrapeJob
from tritonguard.lab.repository import write_model
from tritonguard.lab.scenario_runner import LabRun, Load, Scenario
from tritonguard.lab.triton_server import TritonServer, free_port
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.runtime.slack_outbox import Transport
from tritonguard.runtime.slack_preview import notifying
from tritonguard.settings import Settings, TargetSettings
from tritonguard.sources.prometheus import PrometheusSource
from tritonguard.sources.scrape import ScrapeSource
from tritonguard.sources.source_status import Source

WAYS: tuple[str, ...] = ("scrape", "prometheus")
# The node exporter's instance host: kube_pod_info names this node, so the engine joins the two.
LAB_NODE = "127.0.0.1"

EventsHook = Callable[[str, list[IncidentEvent]], Awaitable[None]]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt for the block (main thread only).

    Python dies on SIGTERM without running ``finally`` blocks or ``atexit``, and the lab's
    servers run in sessions of their own, so a run killed by ``timeout`` or a cancelled CI job
    would leave them behind. As an interrupt, the run unwinds and stops every server.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def retimed(scenario: Scenario, baseline_s: float, fault_s: float) -> Scenario:
    """Return ``scenario`` with its onset at ``baseline_s`` and a fault phase of ``fault_s``.

    Load segments that started at or after the old onset move with it; loads that ran to the
    old end now run to the new end. Rates and costs stay as recorded.
    """
    old_onset, old_end = scenario.baseline_s, scenario.baseline_s + scenario.fault_s
    shift = baseline_s - old_onset
    new_end = baseline_s + fault_s

    def moved(at: float) -> float:
        return at + shift if at >= old_onset - 1e-6 else at

    loads = []
    for load in scenario.loads:
        start = moved(load.start_s)
        end = load.start_s + load.spec.duration_s
        end = new_end if end >= old_end - 1e-6 else min(moved(end), new_end)
        schedule = tuple(
            dataclasses.replace(seg, start_s=moved(load.start_s + seg.start_s) - start)
            for seg in load.spec.schedule
        )
        spec = dataclasses.replace(load.spec, duration_s=max(0.0, end - start), schedule=schedule)
        loads.append(Load(spec, start_s=start))
    return dataclasses.replace(scenario, baseline_s=baseline_s, fault_s=fault_s, loads=tuple(loads))


class LiveScenario:
    """One scenario on its own real Triton: start, drive (baseline, onset, fault), stop.

    ``cut()`` ends the fault phase early (once the daemon has diagnosed it, say).
    """

    def __init__(self, scenario: Scenario, *, node: str = LAB_NODE) -> None:
        self.scenario = dataclasses.replace(scenario, node=node)
        s = self.scenario
        self.workdir = Path(tempfile.mkdtemp(prefix=f"tritonguard-live-{s.name}-"))
        repository = self.workdir / "repository"
        ledger = self.workdir / "ledger"
        repository.mkdir()
        ledger.mkdir()
        self.server = TritonServer(
            repository,
            control_mode=s.control_mode,
            poll_secs=s.poll_secs,
            log_path=self.workdir / "tritonserver.log",
        )
        self.loadgen = LoadGenerator(
            "", namespace=s.namespace, ingress=s.model, service=s.pod.rsplit("-", 1)[0]
        )
        self.exporters = LabExporters(
            pid=lambda: self.server.pid,
            ledger_dir=ledger,
            namespace=s.namespace,
            pod=s.pod,
            node=s.node,
            cpu_quota_cores=s.cpu_quota_cores,
            enforce_cpu_quota=s.enforce_cpu_quota,
            accel_share=s.accel_share,
        )
        self.run = LabRun(
            s,
            self.workdir,
            repository,
            ledger,
            self.workdir / "accelerator.lock",
            self.workdir / "hiccup",
            self.server,
            self.loadgen,
            self.exporters,
        )
        self.started_at: float | None = None
        self.onset_at: float | None = None
        self.ended_at: float | None = None
        self.stats: list[LoadStats] = []
        self.onset = asyncio.Event()
        self._cut = asyncio.Event()

    @property
    def name(self) -> str:
        """The scenario's name."""
        return self.scenario.name

    @property
    def subject(self) -> Subject:
        """The subject the daemon should diagnose (namespace, model, pod)."""
        s = self.scenario
        return Subject(namespace=s.namespace, model=s.model, pod=s.pod)

    async def start(self) -> None:
        """Write the models, start Triton (ready), the load generator's and exporters' endpoints."""
        for spec in self.scenario.models:
            write_model(self.run.repository, self.run.materialize(spec))
        await self.server.__aenter__()
        self.loadgen.retarget(self.server.http_url)
        await self.loadgen.start()
        await self.exporters.start()

    def targets(self) -> list[TargetSettings]:
        """Scrape targets as ``tritonguard run`` would be configured for this pod."""
        s = self.scenario
        return [
            TargetSettings(
                name=f"{s.name}/triton",
                metrics_url=self.server.metrics_url,
                triton_url=self.server.http_url,
                namespace=s.namespace,
                pod=s.pod,
            ),
            TargetSettings(name=f"{s.name}/exporters", metrics_url=self.exporters.metrics_url),
            TargetSettings(name=f"{s.name}/ingress", metrics_url=self.loadgen.metrics_url),
        ]

    def scrape_jobs(self) -> list[ScrapeJob]:
        """Return the same targets as Prometheus scrape jobs (Triton gets namespace/pod labels)."""
        s = self.scenario
        every = s.scrape_interval_s

        def hostport(url: str) -> str:
            return url.split("/")[2]

        return [
            ScrapeJob(
                f"{s.name}-triton",
                [hostport(self.server.metrics_url)],
                every,
                {"namespace": s.namespace, "pod": s.pod},
            ),
            ScrapeJob(f"{s.name}-exporters", [hostport(self.exporters.metrics_url)], every),
            ScrapeJob(f"{s.name}-ingress", [hostport(self.loadgen.metrics_url)], every),
        ]

    def cut(self) -> None:
        """End the fault phase now."""
        self._cut.set()

    async def drive(self) -> None:
        """Run the loads, inject the fault at ``baseline_s``, end after ``fault_s`` or ``cut()``."""
        s = self.scenario
        started = self.started_at = time.time()

        async def delayed(load: Load) -> None:
            await asyncio.sleep(load.start_s)
            self.stats.append(await self.loadgen.run(load.spec))

        tasks = [asyncio.create_task(delayed(load)) for load in s.loads]
        try:
            await asyncio.sleep(s.baseline_s)
            self.onset_at = time.time()
            self.onset.set()
            self.run.event("onset")
            if s.onset is not None:
                await s.onset(self.run)
            remaining = started + s.baseline_s + s.fault_s - time.time()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, remaining)):
                    await self._cut.wait()
        finally:
            self.ended_at = time.time()
            for task in (*tasks, *self.run.background):
                task.cancel()
            await asyncio.gather(*tasks, *self.run.background, return_exceptions=True)
            for hog in self.run.hogs:
                hog.stop()

    async def stop(self) -> None:
        """Stop everything this scenario started; safe to call more than once."""
        for hog in self.run.hogs:
            hog.stop()
        for task in self.run.background:
            task.cancel()
        await self.exporters.stop()
        await self.loadgen.stop()
        await self.server.__aexit__(None, None, None)
        shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class Detection:
    """The first incident for the scenario's cause on its model after the onset."""

    way: str
    at: float
    delay_s: float
    event: IncidentEvent


@dataclass
class Outcome:
    """What each way's daemon said about one scenario."""

    name: str
    cause: str | None
    namespace: str
    model: str
    onset_at: float | None = None
    detections: dict[str, Detection] = field(default_factory=dict)
    # Incidents on this scenario's model that are not the expected one (wrong cause, before
    # onset, or anything at all on a healthy control), per way.
    other: dict[str, list[IncidentEvent]] = field(default_factory=dict)
    before: dict[str, float | None] = field(default_factory=dict)
    during: dict[str, float | None] = field(default_factory=dict)
    # Per way that had not diagnosed the fault when its phase ended: what that engine last
    # concluded of the subject (see ``engine_view``), so that a miss can be explained.
    undiagnosed: dict[str, str] = field(default_factory=dict)
    # Requests the scenario's clients failed with no server's answer, by what was raised: a
    # harness that sends nothing makes a silent engine right (LoadStats.client_errors).
    client_errors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        return {
            "scenario": self.name,
            "cause": self.cause,
            "namespace": self.namespace,
            "model": self.model,
            "onset": self.onset_at,
            "detected": {
                way: {"delay_s": round(d.delay_s, 1), "confidence": round(d.event.confidence, 2)}
                for way, d in self.detections.items()
            },
            "other": {
                way: [f"{e.event}:{e.cause}@{_rel(e.at, self.onset_at)}" for e in events]
                for way, events in self.other.items()
                if events
            },
            "other_evidence": {
                way: [evidence_view(e) for e in events]
                for way, events in self.other.items()
                if events
            },
            "before": self.before,
            "during": self.during,
            "undiagnosed": self.undiagnosed,
            "client_errors": self.client_errors,
        }


def _rel(at: float, onset: float | None) -> str:
    return f"{at - onset:+.0f}s" if onset is not None else f"{at:.0f}"


LATENCY_FEATURES = ("mean_latency_us", "p99_us", "queue_share", "request_rate")
# The findings an undiagnosed fault's view lists, the most confident first.
VIEW_FINDINGS = 4


def evidence_view(event: IncidentEvent) -> str:
    """One line: an incident's confidence and the numbers it stood on, heaviest first.

    A wrong cause seen once in a live run is gone with its run; what the finding weighed is
    what tells a harness's accident from a signature that misreads the mechanism.
    """
    ranked = sorted(event.evidence.items(), key=lambda kv: kv[1].weight, reverse=True)
    shown = [f"{k}={ev.value:.4g}" for k, ev in ranked if ev.value is not None]
    return f"{event.cause} {event.confidence:.2f}" + (": " + " ".join(shown) if shown else "")


def engine_view(engine: Engine, subject: Subject) -> str:
    """One line: the engine's last conclusion about ``subject`` (symptom, baseline, findings).

    A live fault missed in CI leaves nothing behind but its test's message; this says which
    part did not see it: no fresh evaluation, no symptom, no baseline, or a cause below the
    bar an incident needs.
    """
    seen = engine.last_diagnoses.get((subject.namespace, subject.pod, subject.model))
    if seen is None:
        return "no fresh evaluation of the subject"
    parts = [
        "symptom: " + ", ".join(seen.symptom_reasons) if seen.symptom_reasons else "no symptom",
        "baseline" if seen.baseline is not None else "no baseline",
    ]
    ranked = sorted(seen.findings, key=lambda x: x.confidence, reverse=True)
    parts.append(
        "findings: " + ", ".join(f"{x.cause} {x.confidence:.2f}" for x in ranked[:VIEW_FINDINGS])
        if ranked
        else "no finding"
    )
    shown = [f"{k}={v:.4g}" for k, v in _latency_values(seen.features).items() if v is not None]
    if shown:
        parts.append(" ".join(shown))
    return "; ".join(parts)


def latency_view(engine: Engine, subject: Subject, now: float) -> dict[str, float | None]:
    """Mean latency, p99, queue share and request rate of ``subject`` as the engine sees them."""
    return _latency_values(engine.features(subject, now))


def _latency_values(f: FeatureSet | None) -> dict[str, float | None]:
    """Return the ``LATENCY_FEATURES`` of ``f``, None for each one unknown."""
    values = {} if f is None else f.as_dict()
    out: dict[str, float | None] = {}
    for name in LATENCY_FEATURES:
        v = values.get(name)
        out[name] = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
    return out


class LabWatch:
    """One daemon (``DaemonApp``) watching a set of live scenarios one way.

    With ``playbooks`` it runs the shipped ones: notifications go out (to ``slack``, the
    outbox's transport, when given; there is no token), remediation acts on the lab's servers
    with ``act`` and is planned without it. ``keep_in``: the daemon's state directory (audit
    database, charts), left in place at the end; by default a temporary one, removed.
    """

    def __init__(
        self,
        way: str,
        scenarios: Sequence[LiveScenario],
        *,
        node: NodeExporter | None,
        evaluation_interval_s: float = 2.0,
        hook: EventsHook | None = None,
        playbooks: bool = False,
        act: bool = False,
        slack: Transport | None = None,
        keep_in: Path | None = None,
    ) -> None:
        if way not in WAYS:
            raise ValueError(f"way must be one of {WAYS}, not {way!r}")
        self.way = way
        self.scenarios = list(scenarios)
        self.node = node
        self.evaluation_interval_s = evaluation_interval_s
        self.hook = hook
        self.playbooks = playbooks
        self.act = act
        self.slack = slack
        self.service: PlaybookService | None = None
        self.events: list[IncidentEvent] = []
        self.prometheus: PrometheusServer | None = None
        self.app: DaemonApp | None = None
        self._task: asyncio.Task[None] | None = None
        self._keep = keep_in is not None
        self._workdir = keep_in or Path(tempfile.mkdtemp(prefix=f"tritonguard-watch-{way}-"))

    @property
    def state_dir(self) -> Path:
        """Where the daemon keeps its audit database and incident charts."""
        return self._workdir

    def _min_interval(self) -> float:
        return min((s.scenario.scrape_interval_s for s in self.scenarios), default=5.0)

    async def start(self) -> DaemonApp:
        """Start Prometheus when needed, then the daemon in a task of its own."""
        sources: list[Source] = []
        targets: list[TargetSettings] = []
        every = self._min_interval()
        if self.way == "scrape":
            for live in self.scenarios:
                scraper = MetricsScraper(timeout_s=2.0, jitter_s=0.0)
                src = ScrapeSource(
                    live.targets(),
                    scraper,
                    interval_s=live.scenario.scrape_interval_s,
                    keep=is_consumed,
                )
                src.name = f"scrape:{live.name}"
                sources.append(src)
                targets += live.targets()
            if self.node is not None:
                node_target = TargetSettings(
                    name="node-exporter", metrics_url=self.node.metrics_url
                )
                src = ScrapeSource(
                    [node_target], MetricsScraper(timeout_s=2.0), interval_s=every, keep=is_consumed
                )
                src.name = "scrape:node"
                sources.append(src)
        else:
            jobs = [job for live in self.scenarios for job in live.scrape_jobs()]
            if self.node is not None:
                jobs.append(
                    ScrapeJob("node-exporter", [self.node.metrics_url.split("/")[2]], every)
                )
            self.prometheus = PrometheusServer(jobs)
            await asyncio.to_thread(self.prometheus.start)
            client = PrometheusQueryClient(self.prometheus.url, timeout_s=5.0)
            sources.append(PrometheusSource(client, interval_s=every, backfill_s=300.0))
        settings = Settings(
            targets=targets,
            scrape_interval_s=every,
            prometheus_interval_s=every,
            prometheus_url=self.prometheus.url if self.prometheus else None,
            evaluation_interval_s=self.evaluation_interval_s,
            listen=f"127.0.0.1:{free_port()}",
            shutdown_grace_s=5.0,
            log_level="warning",
            # With playbooks the thread is the point: notifications always go out (to
            # ``slack``, there is no token), remediation acts only when asked to.
            dry_run=DryRunSettings(notify=not self.playbooks, remediate=not self.act),
            audit_db_path=self._workdir / "audit.sqlite3",
        )
        engine = Engine(settings.engine_config())
        if self.playbooks:
            # The shipped playbooks, as `tritonguard run` loads them when none are configured.
            self.service = build_service(settings, engine)
            # Each shipped playbook is dry-run in its own guards too, which would plan its
            # notifications as well; the daemon-wide switches above decide instead.
            self.service.stage.playbooks = notifying(self.service.stage.playbooks)
            if self.slack is not None and self.service.threads is not None:
                self.service.threads.worker.transport = self.slack
        self.app = DaemonApp(
            settings,
            engine=engine,
            sources=sources,
            on_events=self._on_events,
            playbooks=self.service,
        )
        self._task = asyncio.create_task(self.app.run(install_signals=False))
        return self.app

    async def _on_events(self, events: list[IncidentEvent]) -> None:
        self.events.extend(events)
        if self.hook is not None:
            await self.hook(self.way, events)

    def actions(self, incident_id: str) -> list[dict[str, Any]]:
        """Return what the playbooks did (or planned) for an incident so far."""
        return [] if self.service is None else self.service.actions_for(incident_id)

    async def stop(self) -> None:
        """Stop the daemon and Prometheus."""
        if self.app is not None and self._task is not None:
            self.app.request_stop("lab run over")
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=15)
        self._task = None
        if self.prometheus is not None:
            await asyncio.to_thread(self.prometheus.stop)
            self.prometheus = None
        if not self._keep:
            shutil.rmtree(self._workdir, ignore_errors=True)


def judge(outcome: Outcome, way: str, events: Sequence[IncidentEvent]) -> None:
    """Sort ``events`` about the outcome's model into the detection and the others."""
    onset = outcome.onset_at
    others = outcome.other.setdefault(way, [])
    for e in events:
        s = e.subject
        if s.namespace != outcome.namespace or s.model != outcome.model or e.event == "resolved":
            continue
        right = (
            outcome.cause is not None
            and e.cause == outcome.cause
            and onset is not None
            and e.at >= onset
        )
        if right and way not in outcome.detections:
            outcome.detections[way] = Detection(way, e.at, e.at - (onset or e.at), e)
        elif not right and e.event == "opened" and e not in others:
            others.append(e)


async def run_live(
    scenarios: Sequence[Scenario],
    *,
    ways: Sequence[str] = WAYS,
    stop_after_detection_s: float | None = 5.0,
    evaluation_interval_s: float = 2.0,
    hook: EventsHook | None = None,
) -> list[Outcome]:
    """Run ``scenarios`` at once, each on its own Triton, watched each of ``ways``.

    A fault scenario ends early ``stop_after_detection_s`` after every way has diagnosed it
    (None: run the whole fault phase); healthy controls always run to their end.
    """
    lives = [LiveScenario(s) for s in scenarios]
    outcomes = {
        live.name: Outcome(
            live.name, live.scenario.cause, live.subject.namespace, live.subject.model
        )
        for live in lives
    }
    node = NodeExporter() if NodeExporter.available() else None
    watches: list[LabWatch] = []

    async def on_events(way: str, events: list[IncidentEvent]) -> None:
        for live in lives:
            out = outcomes[live.name]
            out.onset_at = live.onset_at
            had = way in out.detections
            judge(out, way, events)
            app = watches[0].app if watches else None
            if not had and way in out.detections and app is not None:
                out.during = latency_view(app.engine, live.subject, time.time())
            if (
                stop_after_detection_s is not None
                and live.scenario.cause is not None
                and all(w in out.detections for w in ways)
            ):
                asyncio.get_running_loop().call_later(stop_after_detection_s, live.cut)
        if hook is not None:
            await hook(way, events)

    async def note_onset(live: LiveScenario) -> None:
        await live.onset.wait()
        if watches and watches[0].app is not None:
            outcomes[live.name].before = latency_view(
                watches[0].app.engine, live.subject, time.time()
            )

    try:
        if node is not None:
            await asyncio.to_thread(node.start)
        for live in lives:
            await live.start()
        for way in ways:
            watch = LabWatch(
                way, lives, node=node, evaluation_interval_s=evaluation_interval_s, hook=on_events
            )
            watches.append(watch)
            await watch.start()

        async def drive(live: LiveScenario) -> None:
            # Detections are judged as each way's events arrive (on_events), so what is
            # missing when the fault phase ends is a miss: its engine's view is noted while
            # the daemons still run.
            await live.drive()
            if live.scenario.cause is None:
                return
            out = outcomes[live.name]
            for watch in watches:
                if watch.way not in out.detections and watch.app is not None:
                    out.undiagnosed[watch.way] = engine_view(watch.app.engine, live.subject)

        onsets = [asyncio.create_task(note_onset(live)) for live in lives]
        await asyncio.gather(*(drive(live) for live in lives))
        for task in onsets:
            task.cancel()
    finally:
        for watch in watches:
            await watch.stop()
        for live in lives:
            await live.stop()
        if node is not None:
            node.stop()
    for live in lives:
        out = outcomes[live.name]
        out.onset_at = live.onset_at
        errors: Counter[str] = Counter()
        for stats in live.stats:
            errors.update(stats.client_errors)
        out.client_errors = dict(errors)
        for watch in watches:
            judge(out, watch.way, watch.events)
    return [outcomes[live.name] for live in lives]
