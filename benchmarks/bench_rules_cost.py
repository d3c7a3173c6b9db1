"""The exported rules' evaluation cost in a real Prometheus, per fleet size, against trivial rules.

A child process serves a generated healthy fleet (``benchmarks.fleet_gen``: P pods of 20
models with their exporters, Poisson traffic advanced every 10 s) on one loopback port, one
path a target. The real ``prometheus`` binary (``make system-deps``) scrapes every target at
10 s, as the lab's ``PrometheusServer`` starts it, and evaluates three rule groups at 10 s:

- ``tritonguard``: the rule file ``tritonguard rules export --format rule-file
  --scrape-interval 10s`` prints (``rule_group`` with the default thresholds);
- ``baseline_one_rule``: one trivial recording rule a subject (the request rate by namespace,
  pod and model), what any per-subject rule costs at least;
- ``baseline_every_series``: one rule reading the newest sample of every series scraped
  (``count by (job) ({job!=""})``), as ``bench_evaluate``'s baseline reads every stored series.

After the warm-up (the rules' longest range, 575 s at 10 s scrapes, then holds history), each
group's ``prometheus_rule_group_last_duration_seconds`` is read after every evaluation and
the medians compared: the groups run in one Prometheus over the same series at the same
time, so the ratio holds on a busy machine where the absolute seconds do not.
``prometheus_rule_evaluation_failures_total`` must stay 0 and every target up. Then the
daemon's own evaluation tick for the same fleet is measured (``bench_evaluate.measure``), for
the crossover between one daemon and the rules.

Run ``python -m benchmarks.bench_rules_cost --pods 100,400`` (about 12 min a fleet size;
``--minutes`` shortens the warm-up, ``--no-daemon`` skips the daemon's tick).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from benchmarks.bench_evaluate import measure as measure_tick
from benchmarks.bench_scrape_fanout import start_targets
from benchmarks.fleet_gen import Fleet, FleetSpec, Target
from tritonguard.core.exposition import parse_exposition
from tritonguard.core.rules_export import render_yaml, rule_file, rule_group
from tritonguard.core.thresholds import Thresholds
from tritonguard.lab.triton_server import free_port

MODELS = 20
INTERVAL_S = 10.0
GROUP = "tritonguard"
BASELINES = {
    "baseline_one_rule": (
        "sum by (namespace, pod, model) (rate(nv_inference_request_success[35s]))"
    ),
    "baseline_every_series": 'count by (job) ({job!=""})',
}


def _spec(pods: int, seed: int) -> FleetSpec:
    return FleetSpec(pods=pods, models=MODELS, interval_s=INTERVAL_S, seed=seed)


def _serve(port_out: Connection, pods: int, seed: int) -> None:
    """Child process: serve every target's newest exposition; advance the fleet every 10 s."""
    fleet = Fleet(_spec(pods, seed))
    names = [t.name for t in fleet.targets]
    payloads: list[bytes] = []

    def advance() -> None:
        texts = fleet.scrape()
        payloads[:] = [texts[name].encode() for name in names]

    advance()

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=payloads[int(request.match_info["i"])],
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def ticker() -> None:
        began = time.monotonic()
        while True:
            began += INTERVAL_S
            await asyncio.sleep(max(0.0, began - time.monotonic()))
            advance()

    async def main() -> None:
        await start_targets(metrics, port_out)
        task = asyncio.create_task(ticker())
        await asyncio.Event().wait()
        task.cancel()

    asyncio.run(main())


def _static(i: int, target: Target, port: int) -> dict[str, Any]:
    labels = {"__metrics_path__": f"/t/{i}/metrics", **dict(target.labels)}
    return {"targets": [f"127.0.0.1:{port}"], "labels": labels}


def render_config(targets: Sequence[Target], port: int, rule_files: Sequence[Path]) -> str:
    """Return the prometheus.yml: one job per kind of target, every target at 10 s."""
    jobs: dict[str, list[dict[str, Any]]] = {"triton": [], "exporters": [], "ksm": []}
    for i, target in enumerate(targets):
        kind = target.name.split("/", 1)[0]
        job = "triton" if kind == "triton" else "ksm" if target.honor_labels else "exporters"
        jobs[job].append(_static(i, target, port))
    interval = f"{INTERVAL_S:g}s"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {
                "job_name": job,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "honor_labels": job == "ksm",
                "static_configs": statics,
            }
            for job, statics in jobs.items()
            if statics
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def _baseline_rules() -> dict[str, Any]:
    interval = f"{INTERVAL_S:g}s"
    return {
        "groups": [
            {"name": name, "interval": interval, "rules": [{"record": f"bench:{name}", "expr": e}]}
            for name, e in BASELINES.items()
        ]
    }


@dataclass
class GroupReading:
    """One rule group's evaluations as Prometheus reports them."""

    durations: list[float]
    samples: float = 0.0
    failures: float = 0.0
    missed: float = 0.0
    rules: int = 0


@dataclass(frozen=True, slots=True)
class FleetCost:
    """What the rules cost for one fleet, and the daemon's tick for the same fleet."""

    pods: int
    subjects: int
    series: int
    targets_up: int
    targets: int
    groups: dict[str, GroupReading]
    prometheus_cpu_s_per_interval: float
    history_s: float
    daemon_tick_s: float | None
    # The tritonguard group's slowest rules at the last evaluation: (record or alert, seconds).
    slowest: tuple[tuple[str, float], ...] = ()

    def median(self, group: str) -> float:
        """Median seconds an evaluation of ``group`` took."""
        return statistics.median(self.groups[group].durations)

    def lines(self) -> list[str]:
        """Lines for people: ratios first, then the absolute numbers."""
        ours = self.median(GROUP)
        g = self.groups[GROUP]
        out = [
            f"rules in Prometheus, {self.pods} pods x {MODELS} models = {self.subjects} "
            f"subjects, {self.series} series scraped, {self.targets_up}/{self.targets} "
            f"targets up, {self.history_s / 60:.0f} min of history:",
            "  tritonguard group / one trivial rule a subject: "
            f"{ours / self.median('baseline_one_rule'):.0f}x; / newest sample of every "
            f"series: {ours / self.median('baseline_every_series'):.0f}x",
            f"  tritonguard group: {ours * 1e3:.0f} ms an evaluation (median of "
            f"{len(g.durations)}, max {max(g.durations) * 1e3:.0f}), "
            f"{ours / self.subjects * 1e6:.0f} us a subject, {g.rules} rules, "
            f"{g.samples:.0f} samples written an evaluation, failures {g.failures:.0f}, "
            f"missed iterations {g.missed:.0f}",
        ]
        if self.slowest:
            out.append(
                "  slowest rules at the last evaluation: "
                + ", ".join(f"{name} {s * 1e3:.0f} ms" for name, s in self.slowest)
            )
        for name in BASELINES:
            b = self.groups[name]
            out.append(
                f"  {name}: {self.median(name) * 1e3:.1f} ms (median of {len(b.durations)}), "
                f"failures {b.failures:.0f}"
            )
        out.append(
            f"  Prometheus' CPU over the measured evaluations: "
            f"{self.prometheus_cpu_s_per_interval:.2f} s a {INTERVAL_S:g} s interval "
            "(scrapes, TSDB and rules together)"
        )
        if self.daemon_tick_s is not None:
            out.append(
                f"  the daemon's evaluation tick for the same fleet: "
                f"{self.daemon_tick_s * 1e3:.0f} ms CPU "
                f"({self.daemon_tick_s / self.subjects * 1e6:.0f} us a subject), "
                f"the rule group's evaluation takes {ours / self.daemon_tick_s:.1f}x as long"
            )
        return out


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def _query(base: str, expr: str) -> float:
    body = json.loads(_get(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}"))
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def _slowest_rules(base: str, group: str, count: int) -> tuple[tuple[str, float], ...]:
    """Return the rules of ``group`` slowest at their last evaluation (``/api/v1/rules``)."""
    body = json.loads(_get(f"{base}/api/v1/rules"))
    rules = [
        (str(r["name"]), float(r["evaluationTime"]))
        for g in body["data"]["groups"]
        if g["name"] == group
        for r in g["rules"]
    ]
    return tuple(sorted(rules, key=lambda r: -r[1])[:count])


def _self_metrics(base: str) -> dict[tuple[str, str], float]:
    """Return Prometheus' own series that matter here, by (name, rule group)."""
    wanted = {
        "prometheus_rule_group_last_duration_seconds",
        "prometheus_rule_group_last_evaluation_timestamp_seconds",
        "prometheus_rule_group_last_evaluation_samples",
        "prometheus_rule_group_rules",
        "prometheus_rule_evaluation_failures_total",
        "prometheus_rule_group_iterations_missed_total",
        "process_cpu_seconds_total",
    }
    out: dict[tuple[str, str], float] = {}
    for s in parse_exposition(_get(f"{base}/metrics")).samples:
        if s.name in wanted:
            group = dict(s.labels).get("rule_group", "").rsplit(";", 1)[-1]
            out[(s.name, group)] = s.value
    return out


def measure(
    pods: int, *, minutes: float, evaluations: int, daemon: bool, seed: int = 0
) -> FleetCost:
    """Serve ``pods`` pods to Prometheus with the rules; read the groups' evaluation costs."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus is not installed; run `make system-deps`")
    fleet = Fleet(_spec(pods, seed))
    targets = fleet.targets
    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(send, pods, seed), daemon=True
    )
    workdir = Path(tempfile.mkdtemp(prefix="tritonguard-rules-cost-"))
    proc: subprocess.Popen[bytes] | None = None
    groups = [GROUP, *BASELINES]
    try:
        server.start()
        port = receive.recv()
        ours = workdir / "tritonguard.rules.yml"
        ours.write_text(render_yaml(rule_file([rule_group(Thresholds(), INTERVAL_S)])))
        base = workdir / "baseline.rules.yml"
        base.write_text(yaml.safe_dump(_baseline_rules(), sort_keys=False))
        config = workdir / "prometheus.yml"
        config.write_text(render_config(targets, port, [ours, base]))
        web_port = free_port()
        url = f"http://127.0.0.1:{web_port}"
        with (workdir / "prometheus.log").open("wb") as log:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{web_port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                start_new_session=True,
            )
        started = time.monotonic()
        while time.monotonic() - started < 60:
            with contextlib.suppress(OSError):
                if _get(f"{url}/-/ready"):
                    break
            if proc.poll() is not None:
                raise SystemExit((workdir / "prometheus.log").read_text()[-2000:])
            time.sleep(0.2)
        time.sleep(max(0.0, minutes * 60 - (time.monotonic() - started)))
        seen: dict[str, float] = {}
        readings = {g: GroupReading([]) for g in groups}
        cpu0 = _self_metrics(url)[("process_cpu_seconds_total", "")]
        t0 = time.monotonic()
        while min(len(r.durations) for r in readings.values()) < evaluations:
            now = _self_metrics(url)
            for g in groups:
                at = now.get(("prometheus_rule_group_last_evaluation_timestamp_seconds", g), 0.0)
                if at > 0 and at != seen.get(g):
                    seen[g] = at
                    r = readings[g]
                    r.durations.append(now[("prometheus_rule_group_last_duration_seconds", g)])
                    r.samples = now[("prometheus_rule_group_last_evaluation_samples", g)]
                    r.rules = int(now[("prometheus_rule_group_rules", g)])
            time.sleep(1.0)
        now = _self_metrics(url)
        cpu = (now[("process_cpu_seconds_total", "")] - cpu0) / (time.monotonic() - t0)
        for g in groups:
            # The counter carries one series a rule: the group's failures are their sum.
            readings[g].failures = _query(
                url, f'sum(prometheus_rule_evaluation_failures_total{{rule_group=~".*;{g}"}})'
            )
            readings[g].missed = now.get(("prometheus_rule_group_iterations_missed_total", g), 0)
        slowest = _slowest_rules(url, GROUP, 5)
        up = int(_query(url, "sum(up)"))
        series = int(_query(url, 'count({job!=""})'))
        history = time.monotonic() - started
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        server.kill()
        with contextlib.suppress(Exception):
            server.join(5)
        shutil.rmtree(workdir, ignore_errors=True)
    # Measured once Prometheus is gone, so the two do not share the cores.
    tick = measure_tick(pods * MODELS, ticks=3, seed=seed).evaluate_s if daemon else None
    return FleetCost(
        pods,
        pods * MODELS,
        series,
        up,
        len(targets),
        readings,
        cpu * INTERVAL_S,
        history,
        tick,
        slowest,
    )


def report(
    pod_counts: Sequence[int], *, minutes: float, evaluations: int, daemon: bool
) -> list[str]:
    """Measure each fleet size; return the lines and how the per-subject cost scales."""
    costs: list[FleetCost] = []
    lines: list[str] = []
    for pods in pod_counts:
        cost = measure(pods, minutes=minutes, evaluations=evaluations, daemon=daemon)
        costs.append(cost)
        lines += cost.lines()
        print("\n".join(cost.lines()), flush=True)
    if len(costs) > 1:
        small, large = costs[0], costs[-1]

        def per(c: FleetCost, g: str) -> float:
            return c.median(g) / c.subjects

        scaling = [
            f"linearity: cost a subject at {large.subjects} subjects / at {small.subjects}: "
            f"tritonguard group {per(large, GROUP) / per(small, GROUP):.2f}"
        ]
        scaling += [f"{g} {per(large, g) / per(small, g):.2f}" for g in BASELINES]
        if large.daemon_tick_s is not None and small.daemon_tick_s is not None:
            daemon_ratio = (large.daemon_tick_s / large.subjects) / (
                small.daemon_tick_s / small.subjects
            )
            scaling.append(f"daemon tick {daemon_ratio:.2f}")
        lines.append(", ".join(scaling))
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    """Measure the rules' cost for the fleet sizes asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="100,400", help="fleet sizes in pods, comma-separated")
    parser.add_argument(
        "--minutes",
        type=float,
        default=10.5,
        help="warm-up before measuring (10.5: the rules' longest range holds history)",
    )
    parser.add_argument("--evaluations", type=int, default=6, help="evaluations read a group")
    parser.add_argument("--no-daemon", action="store_true", help="skip the daemon's tick")
    args = parser.parse_args()
    report(
        [int(p) for p in args.pods.split(",") if p],
        minutes=args.minutes,
        evaluations=args.evaluations,
        daemon=not args.no_daemon,
    )


if __name__ == "__main__":
    main()
