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
from collections.abc import Awaitable, Callable
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
    """A client population that starts ``start_s`` after the run starts."""

    spec: LoadSpec
    start_s: float = 0.0


Action = Callable[["LabRun"], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """A recorded experiment: healthy baseline, a fault at ``baseline_s``, then the fault phase.

    ``models`` are installed before the server starts; their behaviour strings may use the
    placeholders ``{ledger}``, ``{lock}`` and ``{hiccup}``, replaced with the run's paths.
    ``onset`` runs at ``baseline_s`` (None: the schedule of ``loads`` is the fault).
    ``preroll_s``: one client serves before recording starts, so the baseline shows a model that
    was already serving (its first executions and any first poll-mode reload are not in it).
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
    accel_share: float = 1.0
    preroll_s: float = 6.0
    notes: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class LabRun:
    """What a running scenario's actions can use."""

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

    def materialize(self, spec: ModelSpec) -> ModelSpec:
        """Replace the path placeholders in a model's behaviour with this run's paths."""
        values = {
            "{ledger}": str(self.ledger_dir),
            "{lock}": str(self.lock_path),
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

    async def deploy(self, spec: ModelSpec) -> None:
        """Deploy ``spec`` through the repository API (explicit mode), as a rollout would."""
        spec = self.materialize(spec)
        write_model(self.repository, spec)
        body = json.dumps({"parameters": {"config": json.dumps(config_json(spec))}}).encode()
        url = f"{self.server.http_url}/v2/repository/models/{spec.name}/load"
        headers = {"Content-Type": "application/json"}
        if self.server.access_token:
            headers["triton-access-token"] = self.server.access_token
        self.event("deploy", model=spec.name, version=spec.version, config=config_json(spec))

        def post() -> int:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=120) as resp:
                return int(resp.status)

        status = await asyncio.to_thread(post)
        self.event("deployed", model=spec.name, status=status)

    def start_hog(self, workers: int, autogroup_nice: int) -> None:
        """Start a CPU hog on the node (stopped when the run ends)."""
        hog = CpuHog(workers=workers, autogroup_nice=autogroup_nice)
        self.hogs.append(hog)
        hog.start()
        self.event(
            "hog", workers=workers, autogroup_nice=autogroup_nice, weighted=hog.autogroup_set
        )

    def rewrite_periodically(self, spec: ModelSpec, every_s: float, *, atomic: bool) -> None:
        """Rewrite the model's files every ``every_s`` s with a new revision (poll mode reloads)."""

        async def loop() -> None:
            revision = 1
            while True:
                changed = spec.with_(
                    behaviour=dataclasses.replace(spec.behaviour, revision=str(revision))
                )
                write_model(self.repository, self.materialize(changed), atomic=atomic)
                self.event("repository_rewrite", model=spec.name, revision=revision, atomic=atomic)
                revision += 1
                await asyncio.sleep(every_s)

        self.background.append(asyncio.create_task(loop()))


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
        )
        for load in scenario.loads
    )
    return dataclasses.replace(
        scenario,
        baseline_s=scenario.baseline_s * factor,
        fault_s=scenario.fault_s * factor,
        loads=loads,
    )


async def run_scenario(
    scenario: Scenario, out_dir: Path, *, raw_dir: Path | None = None
) -> dict[str, Any]:
    """Run ``scenario`` on a real server, write ``<name>.om.gz`` + ``.labels.json``."""
    workdir = Path(tempfile.mkdtemp(prefix=f"tritonguard-{scenario.name}-"))
    repository = workdir / "repository"
    ledger_dir = workdir / "ledger"
    repository.mkdir()
    ledger_dir.mkdir()
    server = TritonServer(
        repository,
        control_mode=scenario.control_mode,
        poll_secs=scenario.poll_secs,
        log_path=workdir / "tritonserver.log",
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
        pod=scenario.pod,
        node=scenario.node,
        cpu_quota_cores=scenario.cpu_quota_cores,
        accel_share=scenario.accel_share,
    )
    run = LabRun(
        scenario,
        workdir,
        repository,
        ledger_dir,
        workdir / "accelerator.lock",
        workdir / "hiccup",
        server,
        loadgen,
        exporters,
    )
    for spec in scenario.models:
        write_model(repository, run.materialize(spec))
    node = NodeExporter() if NodeExporter.available() else None
    stats: list[LoadStats] = []
    onset_at: float | None = None
    started = 0.0
    try:
        await server.__aenter__()
        loadgen.retarget(server.http_url)
        await loadgen.start()
        await exporters.start()
        if node is not None:
            await asyncio.to_thread(node.start)
        targets = [
            Target(
                "triton",
                server.metrics_url,
                (("namespace", scenario.namespace), ("pod", scenario.pod)),
            ),
            Target("lab-exporters", exporters.metrics_url),
            Target("ingress-nginx", loadgen.metrics_url),
        ]
        if node is not None:
            targets.append(Target("node-exporter", node.metrics_url, (("node", scenario.node),)))
        if scenario.preroll_s > 0 and scenario.loads:
            first = scenario.loads[0].spec
            await loadgen.run(
                LoadSpec(
                    first.model, shape=first.shape, concurrency=1, duration_s=scenario.preroll_s
                )
            )
        recorder = Recorder(targets, scenario.scrape_interval_s).start()
        started = time.time()
        total = scenario.baseline_s + scenario.fault_s

        async def delayed(load: Load) -> None:
            await asyncio.sleep(load.start_s)
            stats.append(await loadgen.run(load.spec))

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
        for task in load_tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*load_tasks, return_exceptions=True)
        await asyncio.sleep(0.2)
        await recorder.stop()
    finally:
        for hog in run.hogs:
            hog.stop()
        for task in run.background:
            task.cancel()
        await exporters.stop()
        await loadgen.stop()
        if node is not None:
            node.stop()
        await server.__aexit__(None, None, None)
    labels: dict[str, Any] = {
        "scenario": scenario.name,
        "cause": scenario.cause,
        "model": scenario.model,
        "namespace": scenario.namespace,
        "pod": scenario.pod,
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
            }
            for s in stats
        ],
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
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        recorder.save_raw(raw_dir / f"{name}.scrapes.jsonl.gz")
        shutil.copyfile(workdir / "tritonserver.log", raw_dir / f"{name}.tritonserver.log")
    write_labels(out_dir / f"{name}.labels.json", labels)
    write_trace(recorder.scrapes, out_dir / f"{name}.om.gz")
    shutil.rmtree(workdir, ignore_errors=True)
