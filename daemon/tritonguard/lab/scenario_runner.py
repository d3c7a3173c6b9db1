"""Run one lab scenario: server, exporters, load, recorder, and the fault at a known onset."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonguard.lab.exporters import LabExporters
from tritonguard.lab.hog import CpuHog
from tritonguard.lab.loadgen import LoadGenerator, LoadSpec, LoadStats
from tritonguard.lab.node_exporter import NodeExporter
from tritonguard.lab.recorder import Recorder, Target, write_labels, write_trace
from tritonguard.lab.repository import Behaviour, ModelSpec, config_json, write_model
from tritonguard.lab.triton_server import TritonServer


@dataclass(frozen=True)
class Load:
    """A client population that starts ``start_s`` after the run starts.

    ``pod`` picks the server it sends to: 0 is the scenario's ``pod``, ``i`` its ``more_pods[i-1]``.
    """

    spec: LoadSpec
    start_s: float = 0.0
    pod: int = 0


@dataclass(frozen=True)
class Pod:
    """Another Triton pod of the scenario: a replica of a fleet, or one joining at a scale-out.

    ``join_s``: the pod starts this long after recording starts (None: before recording, with
    the scenario's own pod). A joining pod gets no pre-roll: its first requests are its first.
    """

    name: str
    models: tuple[ModelSpec, ...]
    join_s: float | None = None
    control_mode: str = "explicit"
    poll_secs: int = 1


@dataclass(frozen=True)
class BackgroundHog:
    """A CPU-hungry neighbour that runs for the whole recording (baseline and fault phase)."""

    workers: int = 2
    autogroup_nice: int = 0


Action = Callable[["LabRun"], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """A recorded experiment: healthy baseline, a fault at ``baseline_s``, then the fault phase.

    ``models`` are installed before the server starts; their behaviour strings may use the
    placeholders ``{ledger}``, ``{lock}`` and ``{hiccup}``, replaced with the run's paths.
    ``onset`` runs at ``baseline_s`` (None: the schedule of ``loads`` is the fault).
    ``preroll_s``: one client serves before recording starts, so the baseline shows a model that
    was already serving (its first executions and any first poll-mode reload are not in it).
    ``summary_latencies``, ``exporters`` (the DCGM/cAdvisor/kube-state stand-ins), ``ingress``
    and ``node_exporter`` choose what the recording holds; ``more_pods`` add Tritons (a fleet
    or a scale-out) that ``Load.pod`` sends to; ``background_hog`` loads the node throughout.
    """

    name: str
    cause: str | None
    model: str
    models: tuple[ModelSpec, ...]
    loads: tuple[Load, ...]
    onset: Action | None = None
    baseline_s: float = 60.0
    fault_s: float = 75.0
    scrape_interval_s: float = 5.0
    control_mode: str = "explicit"
    poll_secs: int = 1
    namespace: str = "lab"
    pod: str = "triton-0"
    node: str = "lab-node-0"
    cpu_quota_cores: float = 2.0
    # Stop the server's processes when over the quota, as CFS bandwidth control would
    # (LabExporters); otherwise the quota is only the line throttled periods are counted at.
    enforce_cpu_quota: bool = False
    accel_share: float = 1.0
    preroll_s: float = 6.0
    notes: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    # What the recording shows besides Triton's own series, and how the server reports.
    summary_latencies: bool = True
    exporters: bool = True
    ingress: bool = True
    node_exporter: bool = True
    background_hog: BackgroundHog | None = None
    more_pods: tuple[Pod, ...] = ()
    # The pod the fault is on when it is not ``pod`` (a pod that joins at a scale-out).
    fault_pod: str | None = None


@dataclass
class PodRun:
    """One Triton pod of a running scenario: its repository, server, clients and exporters."""

    name: str
    repository: Path
    ledger_dir: Path
    lock_path: Path
    server: TritonServer
    loadgen: LoadGenerator
    exporters: LabExporters
    models: tuple[ModelSpec, ...] = ()
    join_s: float | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class LabRun:
    """What a running scenario's actions can use.

    ``server``, ``loadgen``, ``exporters`` and the paths are the scenario's own pod's; ``pods``
    holds every pod (index 0 is that one), as ``Load.pod`` and the actions' ``pod`` count them.
    """

    scenario: Scenario
    workdir: Path
    repository: Path
    ledger_dir: Path
    lock_path: Path
    hiccup_path: Path
    server: TritonServer
    loadgen: LoadGenerator
    exporters: LabExporters
    background: list[asyncio.Task[Any]] = field(default_factory=list)
    hogs: list[CpuHog] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    pods: list[PodRun] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.pods:
            first = PodRun(
                self.scenario.pod,
                self.repository,
                self.ledger_dir,
                self.lock_path,
                self.server,
                self.loadgen,
                self.exporters,
                self.scenario.models,
            )
            first.ready.set()
            self.pods.append(first)

    def materialize(self, spec: ModelSpec, pod: int = 0) -> ModelSpec:
        """Replace the path placeholders in a model's behaviour with this run's paths."""
        values = {
            "{ledger}": str(self.pods[pod].ledger_dir),
            "{lock}": str(self.pods[pod].lock_path),
            "{hiccup}": str(self.hiccup_path),
        }
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(Behaviour):
            value = getattr(spec.behaviour, f.name)
            if isinstance(value, str) and value in values:
                changes[f.name] = values[value]
        return spec.with_(behaviour=dataclasses.replace(spec.behaviour, **changes))

    def event(self, kind: str, **details: Any) -> None:
        """Note what the scenario did and when (kept in the label file)."""
        self.events.append({"at": round(time.time(), 3), "kind": kind, **details})

    async def deploy(self, spec: ModelSpec, pod: int = 0) -> None:
        """Deploy ``spec`` through the repository API (explicit mode), as a rollout would."""
        target = self.pods[pod]
        spec = self.materialize(spec, pod)
        write_model(target.repository, spec)
        body = json.dumps({"parameters": {"config": json.dumps(config_json(spec))}}).encode()
        url = f"{target.server.http_url}/v2/repository/models/{spec.name}/load"
        headers = {"Content-Type": "application/json"}
        if target.server.access_token:
            headers["triton-access-token"] = target.server.access_token
        where = {} if len(self.pods) == 1 else {"pod": target.name}
        self.event(
            "deploy", model=spec.name, version=spec.version, config=config_json(spec), **where
        )

        def post() -> int:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=120) as resp:
                return int(resp.status)

        status = await asyncio.to_thread(post)
        self.event("deployed", model=spec.name, status=status, **where)
        await self.snapshot_configs(pod, (spec.name,))

    async def snapshot_configs(self, pod: int, models: Sequence[str] | None = None) -> None:
        """Keep what ``GET /v2/models/{m}/config`` answers now (what the daemon would read)."""
        target = self.pods[pod]
        names = models if models is not None else [m.name for m in target.models]
        for name in dict.fromkeys(names):
            config = await asyncio.to_thread(fetch_config, target.server, name)
            if config is None:
                continue
            self.configs.append(
                {
                    "at": round(time.time(), 3),
                    "namespace": self.scenario.namespace,
                    "pod": target.name,
                    "model": name,
                    "config": config,
                }
            )

    def start_hog(self, workers: int, autogroup_nice: int, rounds: int | None = None) -> None:
        """Start a CPU hog on the node (stopped when the run ends).

        ``rounds``: MiB each thread hashes before it exits by itself (None: the hog's default).
        """
        hog = (
            CpuHog(workers=workers, autogroup_nice=autogroup_nice)
            if rounds is None
            else CpuHog(workers=workers, rounds=rounds, autogroup_nice=autogroup_nice)
        )
        self.hogs.append(hog)
        hog.start()
        self.event(
            "hog", workers=workers, autogroup_nice=autogroup_nice, weighted=hog.autogroup_set
        )

    def rewrite_periodically(
        self, spec: ModelSpec, every_s: float, *, atomic: bool, pod: int = 0
    ) -> None:
        """Rewrite the model's files every ``every_s`` s with a new revision (poll mode reloads)."""
        target = self.pods[pod]

        async def loop() -> None:
            revision = 1
            while True:
                changed = spec.with_(
                    behaviour=dataclasses.replace(spec.behaviour, revision=str(revision))
                )
                write_model(target.repository, self.materialize(changed, pod), atomic=atomic)
                self.event("repository_rewrite", model=spec.name, revision=revision, atomic=atomic)
                revision += 1
                await asyncio.sleep(every_s)

        self.background.append(asyncio.create_task(loop()))

    def reload_periodically(self, spec: ModelSpec, every_s: float, *, pod: int = 0) -> None:
        """Load the model through the repository API every ``every_s`` s with a new revision.

        A sync job that re-applies the config on a timer (explicit mode): each load replaces
        the instances, so the model reloads though nothing it serves changed.
        """

        async def loop() -> None:
            revision = 1
            while True:
                began = time.monotonic()
                changed = spec.with_(
                    behaviour=dataclasses.replace(spec.behaviour, revision=str(revision))
                )
                await self.deploy(changed, pod)
                revision += 1
                await asyncio.sleep(max(0.0, every_s - (time.monotonic() - began)))

        self.background.append(asyncio.create_task(loop()))


def fetch_config(server: TritonServer, model: str) -> dict[str, Any] | None:
    """Return ``GET /v2/models/{model}/config`` of ``server``, None when it does not answer."""
    url = f"{server.http_url}/v2/models/{model}/config"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            data = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def scaled(scenario: Scenario, factor: float) -> Scenario:
    """Return ``scenario`` with every duration and schedule time times ``factor``."""
    loads = tuple(
        Load(
            dataclasses.replace(
                load.spec,
                duration_s=load.spec.duration_s * factor,
                schedule=tuple(
                    dataclasses.replace(seg, start_s=seg.start_s * factor)
                    for seg in load.spec.schedule
                ),
            ),
            start_s=load.start_s * factor,
            pod=load.pod,
        )
        for load in scenario.loads
    )
    pods = tuple(
        dataclasses.replace(p, join_s=None if p.join_s is None else p.join_s * factor)
        for p in scenario.more_pods
    )
    return dataclasses.replace(
        scenario,
        baseline_s=scenario.baseline_s * factor,
        fault_s=scenario.fault_s * factor,
        loads=loads,
        more_pods=pods,
    )


def _pod_run(
    scenario: Scenario,
    name: str,
    models: tuple[ModelSpec, ...],
    root: Path,
    *,
    control_mode: str,
    poll_secs: int,
    join_s: float | None,
) -> PodRun:
    repository = root / "repository"
    ledger_dir = root / "ledger"
    repository.mkdir(parents=True)
    ledger_dir.mkdir()
    server = TritonServer(
        repository,
        control_mode=control_mode,
        poll_secs=poll_secs,
        summary_latencies=scenario.summary_latencies,
        log_path=root / "tritonserver.log",
    )
    loadgen = LoadGenerator(
        "",
        namespace=scenario.namespace,
        ingress=scenario.model,
        service=scenario.pod.rsplit("-", 1)[0],
    )
    exporters = LabExporters(
        pid=lambda: server.pid,
        ledger_dir=ledger_dir,
        namespace=scenario.namespace,
        pod=name,
        node=scenario.node,
        cpu_quota_cores=scenario.cpu_quota_cores,
        enforce_cpu_quota=scenario.enforce_cpu_quota,
        accel_share=scenario.accel_share,
    )
    return PodRun(
        name,
        repository,
        ledger_dir,
        root / "accelerator.lock",
        server,
        loadgen,
        exporters,
        models,
        join_s,
    )


def _targets(scenario: Scenario, pod: PodRun) -> list[Target]:
    targets = [
        Target(
            "triton", pod.server.metrics_url, (("namespace", scenario.namespace), ("pod", pod.name))
        )
    ]
    if scenario.exporters:
        targets.append(Target("lab-exporters", pod.exporters.metrics_url))
    if scenario.ingress:
        targets.append(Target("ingress-nginx", pod.loadgen.metrics_url))
    return targets


async def _start_pod(pod: PodRun) -> None:
    await pod.server.__aenter__()
    pod.loadgen.retarget(pod.server.http_url)
    await pod.loadgen.start()
    await pod.exporters.start()


async def _stop_pod(pod: PodRun) -> None:
    await pod.exporters.stop()
    await pod.loadgen.stop()
    await pod.server.__aexit__(None, None, None)


async def _preroll(scenario: Scenario, run: LabRun) -> None:
    """One client per model that has traffic, on every pod serving from the start."""
    firsts: dict[tuple[int, str], LoadSpec] = {}
    for load in scenario.loads:
        if run.pods[load.pod].join_s is None:
            firsts.setdefault((load.pod, load.spec.model), load.spec)
    await asyncio.gather(
        *(
            run.pods[pod].loadgen.run(
                LoadSpec(spec.model, shape=spec.shape, concurrency=1, duration_s=scenario.preroll_s)
            )
            for (pod, _), spec in firsts.items()
        )
    )


def _subjects(scenario: Scenario, run: LabRun) -> list[dict[str, str]]:
    """Every (pod, model) that serves traffic, the fault's first when there is one."""
    fault = (scenario.fault_pod or scenario.pod, scenario.model)
    seen = dict.fromkeys((run.pods[load.pod].name, load.spec.model) for load in scenario.loads)
    ordered = sorted(seen, key=lambda s: s != fault)
    return [{"namespace": scenario.namespace, "pod": p, "model": m} for p, m in ordered]


async def run_scenario(
    scenario: Scenario, out_dir: Path, *, raw_dir: Path | None = None
) -> dict[str, Any]:
    """Run ``scenario`` on a real server, write ``<name>.om.gz`` + ``.labels.json``."""
    workdir = Path(tempfile.mkdtemp(prefix=f"tritonguard-{scenario.name}-"))
    # The scenario's own pod keeps the work dir's top level, as single-pod runs always had.
    first = _pod_run(
        scenario,
        scenario.pod,
        scenario.models,
        workdir,
        control_mode=scenario.control_mode,
        poll_secs=scenario.poll_secs,
        join_s=None,
    )
    pods = [first] + [
        _pod_run(
            scenario,
            p.name,
            p.models,
            workdir / p.name,
            control_mode=p.control_mode,
            poll_secs=p.poll_secs,
            join_s=p.join_s,
        )
        for p in scenario.more_pods
    ]
    run = LabRun(
        scenario,
        workdir,
        first.repository,
        first.ledger_dir,
        first.lock_path,
        workdir / "hiccup",
        first.server,
        first.loadgen,
        first.exporters,
        pods=pods,
    )
    for index, pod in enumerate(pods):
        for spec in pod.models:
            write_model(pod.repository, run.materialize(spec, index))
    node = NodeExporter() if scenario.node_exporter and NodeExporter.available() else None
    stats: list[tuple[Load, LoadStats]] = []
    onset_at: float | None = None
    started = 0.0
    recorder: Recorder | None = None
    try:
        for pod in pods:
            if pod.join_s is None:
                await _start_pod(pod)
                pod.ready.set()
        if node is not None:
            await asyncio.to_thread(node.start)
        targets = [t for pod in pods if pod.join_s is None for t in _targets(scenario, pod)]
        if node is not None:
            targets.append(Target("node-exporter", node.metrics_url, (("node", scenario.node),)))
        if scenario.background_hog is not None:
            # Started before the pre-roll, so the baseline is already recorded under it; its
            # work outlasts any recording (it is stopped with the run).
            bg = scenario.background_hog
            run.start_hog(bg.workers, bg.autogroup_nice, rounds=10**8)
        if scenario.preroll_s > 0 and scenario.loads:
            await _preroll(scenario, run)
        for index, pod in enumerate(pods):
            if pod.join_s is None:
                await run.snapshot_configs(index)
        recorder = Recorder(targets, scenario.scrape_interval_s).start()
        started = time.time()
        total = scenario.baseline_s + scenario.fault_s

        async def join(index: int, pod: PodRun, at: float) -> None:
            await asyncio.sleep(max(0.0, started + at - time.time()))
            run.event("pod_start", pod=pod.name)
            await _start_pod(pod)
            assert recorder is not None  # set above, before any join can run
            recorder.targets.extend(_targets(scenario, pod))
            run.event("pod_ready", pod=pod.name)
            await run.snapshot_configs(index)
            pod.ready.set()

        joins = [
            asyncio.create_task(join(i, p, p.join_s))
            for i, p in enumerate(pods)
            if p.join_s is not None
        ]

        async def delayed(load: Load) -> None:
            await asyncio.sleep(load.start_s)
            pod = run.pods[load.pod]
            await pod.ready.wait()
            stats.append((load, await pod.loadgen.run(load.spec)))

        load_tasks = [asyncio.create_task(delayed(load)) for load in scenario.loads]
        await asyncio.sleep(scenario.baseline_s)
        onset_at = time.time()
        run.event("onset")
        if scenario.onset is not None:
            await scenario.onset(run)
        await asyncio.sleep(max(0.0, started + total - time.time()))
        for task in run.background:
            task.cancel()
        # Loads end by themselves at their duration; give them a moment to count what is in flight.
        await asyncio.wait(load_tasks, timeout=8)
        for task in joins:
            # A pod that never joined leaves its loads waiting: the recording is not the scenario.
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise RuntimeError("a joining pod did not start") from task.exception()
        for task in (*load_tasks, *joins):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*load_tasks, *joins, return_exceptions=True)
        for index, pod in enumerate(pods):
            if pod.ready.is_set():
                await run.snapshot_configs(index)
        await asyncio.sleep(0.2)
        await recorder.stop()
    finally:
        for hog in run.hogs:
            hog.stop()
        for task in run.background:
            task.cancel()
        if recorder is not None:
            await recorder.stop()
        for pod in pods:
            await _stop_pod(pod)
        if node is not None:
            node.stop()
    subjects = _subjects(scenario, run)
    labels: dict[str, Any] = {
        "scenario": scenario.name,
        "cause": scenario.cause,
        "model": scenario.model,
        "namespace": scenario.namespace,
        "pod": scenario.fault_pod or scenario.pod,
        "onset": round(onset_at, 3) if onset_at is not None else None,
        "start": round(started, 3),
        "end": round(time.time(), 3),
        "scrape_interval_s": scenario.scrape_interval_s,
        "params": scenario.params,
        "notes": scenario.notes,
        "events": run.events,
        "load": [
            {
                "attempts": dict(s.attempts),
                "requests": s.requests,
                "succeeded": s.succeeded,
                "gave_up": s.gave_up,
                "dropped": s.dropped,
                **({"client_errors": dict(s.client_errors)} if s.client_errors else {}),
                # Loads end in any order; say which one each entry is when there are several.
                **(
                    {"model": load.spec.model, "pod": run.pods[load.pod].name}
                    if len(scenario.loads) > 1
                    else {}
                ),
            }
            for load, s in stats
        ],
        "pods": [p.name for p in pods],
        # Everything else that served traffic must stay quiet (healthy beside the fault).
        "quiet": subjects if scenario.cause is None else subjects[1:],
        "summary_latencies": scenario.summary_latencies,
        "sources": sorted(
            {"triton"}
            | ({"lab-exporters"} if scenario.exporters else set())
            | ({"ingress-nginx"} if scenario.ingress else set())
            | ({"node-exporter"} if node is not None else set())
        ),
        "configs": run.configs,
    }
    await asyncio.to_thread(
        functools.partial(
            _write_outputs,
            scenario.name,
            labels=labels,
            recorder=recorder,
            workdir=workdir,
            out_dir=out_dir,
            raw_dir=raw_dir,
            logs=[(p.name, p.server.log_path) for p in pods],
        )
    )
    return labels


def _write_outputs(
    name: str,
    *,
    labels: dict[str, Any],
    recorder: Recorder,
    workdir: Path,
    out_dir: Path,
    raw_dir: Path | None,
    logs: Sequence[tuple[str, Path]] = (),
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        recorder.save_raw(raw_dir / f"{name}.scrapes.jsonl.gz")
        for index, (pod, log) in enumerate(logs):
            # The first pod's log keeps the name single-pod recordings always had.
            suffix = "" if index == 0 else f".{pod}"
            if log.exists():
                shutil.copyfile(log, raw_dir / f"{name}{suffix}.tritonserver.log")
    write_labels(out_dir / f"{name}.labels.json", labels)
    write_trace(recorder.scrapes, out_dir / f"{name}.om.gz")
    shutil.rmtree(workdir, ignore_errors=True)
