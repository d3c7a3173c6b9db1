"""Synthetic Triton fleets: P pods x M models of Triton 2.51's series, Poisson traffic, faults.

The lab records one real Triton at a time; fleets for the benchmarks come from here. Each pod
serves M models (pods of one deployment serve the same models, as replicas do) and exposes
what Triton 2.51 does with summary latencies on: per model the request counters, the four
failure reasons, the durations, the pending gauge and five summaries of five quantiles, in
Triton's order and label layout (see ``benchmarks/data/triton_50_models.prom``). With
``exporters``, each node's DCGM exporter, cAdvisor and node-exporter and one
kube-state-metrics add their series, including families no feature reads.

Traffic is healthy by default: each model has its own request rate, latency and queue share,
and every scrape draws Poisson arrivals. A fault can be injected on some pods from a given
scrape on (``retry_storm``, ``too_few_instances``, ``restart``).

Run ``python -m benchmarks.fleet_gen --pods 10 --scrapes 30 --out DIR`` to write one
0.0.4 exposition per target and scrape, or ``--trace FILE.om.gz`` for a replayable trace.
"""

from __future__ import annotations

import argparse
import gzip
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.scrape_ingest import relabelled
from tritonguard.core.trace_writer import render_trace

START = 1_700_000_000.0
QUANTILES = ("0.5", "0.9", "0.95", "0.99", "0.999")
# How far each quantile sits above the median latency.
QUANTILE_SPREAD = np.array([1.0, 1.3, 1.5, 2.0, 3.0])
REASONS = ("CANCELED", "REJECTED", "BACKEND", "OTHER")
FAULTS = ("retry_storm", "too_few_instances", "restart")
PODS_PER_NODE = 4

_HELP = {
    "nv_inference_request_success": "Number of successful inference requests, all batch sizes",
    "nv_inference_request_failure": "Number of failed inference requests, all batch sizes",
    "nv_inference_count": "Number of inferences performed (does not include cached requests)",
    "nv_inference_exec_count": (
        "Number of model executions performed (does not include cached requests)"
    ),
    "nv_inference_request_duration_us": (
        "Cumulative inference request duration in microseconds (includes cached requests)"
    ),
    "nv_inference_queue_duration_us": (
        "Cumulative inference queuing duration in microseconds (includes cached requests)"
    ),
    "nv_inference_compute_input_duration_us": (
        "Cumulative compute input duration in microseconds (does not include cached requests)"
    ),
    "nv_inference_compute_infer_duration_us": (
        "Cumulative compute inference duration in microseconds (does not include cached requests)"
    ),
    "nv_inference_compute_output_duration_us": (
        "Cumulative inference compute output duration in microseconds (does not include "
        "cached requests)"
    ),
    "nv_inference_pending_request_count": (
        "Instantaneous number of pending requests awaiting execution per-model."
    ),
}
_DURATIONS = (
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)
_SUMMARIES = (
    ("nv_inference_request_summary_us", "inference request duration"),
    ("nv_inference_queue_summary_us", "inference queuing duration"),
    ("nv_inference_compute_input_summary_us", "compute input duration"),
    ("nv_inference_compute_infer_summary_us", "compute inference duration"),
    ("nv_inference_compute_output_summary_us", "inference compute output duration"),
)


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """What fleet to generate."""

    pods: int
    models: int = 20
    replicas: int = 4
    interval_s: float = 10.0
    exporters: bool = True
    seed: int = 0
    fault: str | None = None
    fault_pods: int = 1
    fault_at: int = 10

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; use one of {', '.join(FAULTS)}")


@dataclass(frozen=True, slots=True)
class Target:
    """One scrape target: its name and the labels a scrape attaches to its samples."""

    name: str
    labels: Labels
    honor_labels: bool = False


class Fleet:
    """A generated fleet: its targets, and each target's exposition at every scrape."""

    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        rng = np.random.default_rng(spec.seed)
        self._rng = rng
        p, m = spec.pods, spec.models
        self.deployments = [f"dep-{d:04d}" for d in range(math.ceil(p / spec.replicas))]
        self.pods = [
            (
                f"ns-{(i // spec.replicas) % 10}",
                f"{self.deployments[i // spec.replicas]}-{i % spec.replicas}",
            )
            for i in range(p)
        ]
        self.nodes = [f"node-{n:04d}" for n in range(math.ceil(p / PODS_PER_NODE))]
        self.triton_targets = [
            Target(
                f"triton/{pod}",
                (
                    ("instance", f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:8002"),
                    ("namespace", ns),
                    ("pod", pod),
                ),
            )
            for i, (ns, pod) in enumerate(self.pods)
        ]
        # Per model: request rate (req/s), median latency (us), queue share.
        self.rate = rng.lognormal(math.log(8.0), 1.0, (p, m))
        self.latency = rng.lognormal(math.log(4000.0), 0.8, (p, m))
        self.queue_share = rng.uniform(0.02, 0.15, (p, m))
        self.batch = rng.choice([1, 1, 1, 2, 4], (p, m))
        # Triton's own order of models, fixed per server; replicas share their deployment's.
        self._model_order = [rng.permutation(m) for _ in self.deployments]
        self._heads = [self._triton_heads(d) for d in range(len(self.deployments))]
        counters = (p, m)
        self.success = np.zeros(counters)
        self.failure = np.zeros((p, m, len(REASONS)))
        self.count = np.zeros(counters)
        self.execs = np.zeros(counters)
        self.durations = np.zeros((len(_DURATIONS), p, m))
        self.scrapes = 0

    # ---- targets ------------------------------------------------------------------------
    @property
    def targets(self) -> list[Target]:
        """Every target: one per Triton pod, and the exporters when asked for."""
        out = list(self.triton_targets)
        if self.spec.exporters:
            for n, node in enumerate(self.nodes):
                ip = f"10.200.{n // 256 % 256}.{n % 256}"
                out.append(Target(f"dcgm/{node}", (("instance", f"{ip}:9400"),)))
                out.append(Target(f"cadvisor/{node}", (("instance", f"{ip}:10250"),)))
                out.append(Target(f"node/{node}", (("instance", f"{ip}:9100"),)))
            out.append(
                Target("kube-state-metrics", (("instance", "10.250.0.1:8080"),), honor_labels=True)
            )
        return out

    # ---- one scrape -----------------------------------------------------------------------
    def scrape(self) -> dict[str, str]:
        """Advance the fleet by one scrape interval; return each target's exposition text."""
        spec = self.spec
        k = self.scrapes
        self.scrapes += 1
        rng = self._rng
        rate = self.rate.copy()
        latency = self.latency * rng.lognormal(0.0, 0.05, self.latency.shape)
        queue = self.queue_share.copy()
        faulty = slice(0, min(spec.fault_pods, spec.pods))
        canceled = np.zeros_like(rate)
        if spec.fault is not None and k >= spec.fault_at:
            grow = 1.0 + 0.3 * (k - spec.fault_at + 1)
            if spec.fault == "retry_storm":
                rate[faulty] *= 1.0 + grow
                latency[faulty] *= 3.0 * grow
                queue[faulty] = 0.9
                canceled[faulty] = 0.3
            elif spec.fault == "too_few_instances":
                latency[faulty] *= 2.0 * grow
                queue[faulty] = 0.85
            elif spec.fault == "restart" and k == spec.fault_at:
                for counter in (self.success, self.failure, self.count, self.execs):
                    counter[faulty] = 0
                self.durations[:, faulty] = 0
        arrivals = rng.poisson(rate * spec.interval_s).astype(float)
        failed = np.floor(arrivals * canceled)
        served = arrivals - failed
        self.success += served
        self.failure[:, :, 0] += failed
        self.count += served * self.batch
        self.execs += np.ceil(served / self.batch)
        spent = served * latency
        in_queue = spent * queue
        compute = spent - in_queue
        for i, part in enumerate((spent, in_queue, compute * 0.05, compute * 0.85, compute * 0.1)):
            self.durations[i] += np.floor(part)
        pending = rng.poisson(rate * latency * queue * 1e-6 * (1 + 20 * canceled)).astype(float)
        texts = {
            target.name: self._triton_text(i, served, latency, pending)
            for i, target in enumerate(self.triton_targets)
        }
        if spec.exporters:
            texts.update(self._exporter_texts(k, rate))
        return texts

    def timestamp(self, scrape: int) -> float:
        """Return the time of scrape ``scrape`` (seconds)."""
        return START + scrape * self.spec.interval_s

    def scrape_many(self, scrapes: int) -> Iterator[tuple[float, dict[str, str]]]:
        """Yield (time, texts) for ``scrapes`` scrapes."""
        for _ in range(scrapes):
            t = self.timestamp(self.scrapes)
            yield t, self.scrape()

    # ---- Triton's exposition ------------------------------------------------------------
    def _triton_heads(self, deployment: int) -> dict[str, list[str]]:
        """Return the series texts of a deployment's pods, by family, in Triton's model order."""
        names = [f"{self.deployments[deployment]}-m{j:02d}" for j in range(self.spec.models)]
        order = self._model_order[deployment]
        models = [names[j] for j in order]
        heads: dict[str, list[str]] = {}
        plain = [f'{{model="{m}",version="1"}}' for m in models]
        heads["nv_inference_request_success"] = [f"nv_inference_request_success{b}" for b in plain]
        heads["nv_inference_request_failure"] = [
            f'nv_inference_request_failure{{model="{m}",reason="{r}",version="1"}}'
            for m in models
            for r in REASONS
        ]
        for family in ("nv_inference_count", "nv_inference_exec_count", *_DURATIONS):
            heads[family] = [f"{family}{b}" for b in plain]
        heads["nv_inference_pending_request_count"] = [
            f"nv_inference_pending_request_count{b}" for b in plain
        ]
        for family, _ in _SUMMARIES:
            heads[family] = [
                head
                for m in models
                for head in (
                    f'{family}_count{{model="{m}",version="1"}}',
                    f'{family}_sum{{model="{m}",version="1"}}',
                    *(f'{family}{{model="{m}",version="1",quantile="{q}"}}' for q in QUANTILES),
                )
            ]
        return heads

    def _triton_text(
        self,
        pod: int,
        served: npt.NDArray[np.float64],
        latency: npt.NDArray[np.float64],
        pending: npt.NDArray[np.float64],
    ) -> str:
        deployment = pod // self.spec.replicas
        order = self._model_order[deployment]
        heads = self._heads[deployment]
        out: list[str] = []

        def family(name: str, kind: str, values: list[str]) -> None:
            out.append(f"# HELP {name} {_HELP[name]}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(map(_line, heads[name], values))

        family("nv_inference_request_success", "counter", _ints(self.success[pod, order]))
        family("nv_inference_request_failure", "counter", _ints(self.failure[pod, order].ravel()))
        family("nv_inference_count", "counter", _ints(self.count[pod, order]))
        family("nv_inference_exec_count", "counter", _ints(self.execs[pod, order]))
        for i, name in enumerate(_DURATIONS):
            family(name, "counter", _ints(self.durations[i, pod, order]))
        family("nv_inference_pending_request_count", "gauge", _ints(pending[pod, order]))
        busy = float(np.clip(served[pod].sum() * 2e-4, 0.0, 1.0))
        out += [
            "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes",
            "# TYPE nv_pinned_memory_pool_total_bytes gauge",
            "nv_pinned_memory_pool_total_bytes 268435456",
            "# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used memory size, in bytes",
            "# TYPE nv_pinned_memory_pool_used_bytes gauge",
            "nv_pinned_memory_pool_used_bytes 0",
            "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]",
            "# TYPE nv_cpu_utilization gauge",
            f"nv_cpu_utilization {busy:.3f}",
            "# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes",
            "# TYPE nv_cpu_memory_total_bytes gauge",
            "nv_cpu_memory_total_bytes 25276502016",
            "# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes",
            "# TYPE nv_cpu_memory_used_bytes gauge",
            f"nv_cpu_memory_used_bytes {1763885056 + 4096 * int(served[pod].sum())}",
        ]
        idle = served[pod, order] == 0
        shares = (1.0, 0.1, 0.05 * 0.9, 0.85 * 0.9, 0.1 * 0.9)
        for (name, what), share, total in zip(_SUMMARIES, shares, self.durations, strict=True):
            out.append(f"# HELP {name} Summary of {what} in microseconds")
            out.append(f"# TYPE {name} summary")
            median = np.maximum(1.0, latency[pod, order] * share)
            quantiles = np.floor(median[:, None] * QUANTILE_SPREAD)
            values: list[str] = []
            counts = _ints(self.success[pod, order])
            sums = _ints(total[pod, order])
            for j in range(len(order)):
                values.append(counts[j])
                values.append(sums[j])
                # A quantile over a window without requests: prometheus-cpp writes Nan.
                values.extend(["Nan"] * 5 if idle[j] else _ints(quantiles[j]))
            out.extend(map(_line, heads[name], values))
        out.append("")
        return "\n".join(out)

    # ---- exporters ------------------------------------------------------------------------
    def _exporter_texts(self, k: int, rate: npt.NDArray[np.float64]) -> dict[str, str]:
        t = k * self.spec.interval_s
        rng = self._rng
        texts: dict[str, str] = {}
        load = rate.sum(axis=1)
        for n, node in enumerate(self.nodes):
            pods = range(n * PODS_PER_NODE, min((n + 1) * PODS_PER_NODE, self.spec.pods))
            dcgm: list[str] = []
            cadvisor: list[str] = []
            for field, kind in (
                ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
                ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
                ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
                ("DCGM_FI_DEV_FB_USED", "gauge"),
                ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
                ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
                ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
            ):
                dcgm.append(f"# HELP {field} {field}.")
                dcgm.append(f"# TYPE {field} {kind}")
                for g, p in enumerate(pods):
                    ns, pod = self.pods[p]
                    util = min(100.0, load[p] * 0.4 + rng.normal(0, 2))
                    value = {
                        "DCGM_FI_DEV_GPU_UTIL": max(0.0, util),
                        "DCGM_FI_PROF_PCIE_RX_BYTES": max(0.0, load[p] * 4e5),
                        "DCGM_FI_PROF_PCIE_TX_BYTES": max(0.0, load[p] * 1e5),
                        "DCGM_FI_DEV_FB_USED": 6000 + p % 7,
                        "DCGM_FI_DEV_SM_CLOCK": 1410,
                        "DCGM_FI_DEV_GPU_TEMP": 40 + util * 0.3,
                        "DCGM_FI_DEV_POWER_USAGE": 60 + util * 2,
                    }[field]
                    dcgm.append(
                        f'{field}{{gpu="{g}",UUID="GPU-{node}-{g}",device="nvidia{g}",'
                        f'modelName="NVIDIA A10G",Hostname="{node}",container="triton",'
                        f'namespace="{ns}",pod="{pod}"}} {value:.6g}'
                    )
            for p in pods:
                ns, pod = self.pods[p]
                labels = f'container="triton",namespace="{ns}",pod="{pod}"'
                used = t * min(4.0, load[p] * 0.02)
                cadvisor += [
                    f'container_cpu_usage_seconds_total{{{labels},cpu="total"}} {used:.6f}',
                    f"container_cpu_cfs_periods_total{{{labels}}} {int(t * 10)}",
                    f"container_cpu_cfs_throttled_periods_total{{{labels}}} {int(t * 0.1)}",
                    f"container_spec_cpu_quota{{{labels}}} 400000",
                    f"container_spec_cpu_period{{{labels}}} 100000",
                    f"container_memory_working_set_bytes{{{labels}}} {3e9 + p:.0f}",
                    f"container_memory_rss{{{labels}}} {2.5e9 + p:.0f}",
                    f'container_network_receive_bytes_total{{{labels},interface="eth0"}} '
                    f"{int(t * load[p] * 2e4)}",
                    f'container_fs_usage_bytes{{{labels},device="/dev/nvme0n1"}} 1.2e+09',
                ]
            node_lines = [
                f'node_cpu_seconds_total{{cpu="{c}",mode="{mode}"}} {t * share:.2f}'
                for c in range(8)
                for mode, share in (
                    ("idle", 0.6),
                    ("iowait", 0.01),
                    ("irq", 0.0),
                    ("nice", 0.0),
                    ("softirq", 0.01),
                    ("steal", 0.0),
                    ("system", 0.08),
                    ("user", 0.3),
                )
            ]
            node_lines += [
                f"node_load1 {2.0 + rng.normal(0, 0.2):.2f}",
                f"node_load5 {2.0:.2f}",
                f"node_memory_MemAvailable_bytes {6.4e10:.0f}",
                f"node_memory_MemTotal_bytes {1.28e11:.0f}",
            ]
            texts[f"dcgm/{node}"] = "\n".join(dcgm) + "\n"
            texts[f"cadvisor/{node}"] = "\n".join(cadvisor) + "\n"
            texts[f"node/{node}"] = "\n".join(node_lines) + "\n"
        ksm: list[str] = []
        for p, (ns, pod) in enumerate(self.pods):
            node = self.nodes[p // PODS_PER_NODE]
            ksm.append(
                f'kube_pod_info{{namespace="{ns}",pod="{pod}",node="{node}",'
                f'host_ip="10.200.0.{p // PODS_PER_NODE % 256}",created_by_kind="ReplicaSet"}} 1'
            )
            ksm.append(
                f'kube_pod_container_status_restarts_total{{namespace="{ns}",pod="{pod}",'
                f'container="triton"}} 0'
            )
            for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
                ksm.append(
                    f'kube_pod_status_phase{{namespace="{ns}",pod="{pod}",phase="{phase}"}} '
                    f"{1 if phase == 'Running' else 0}"
                )
        texts["kube-state-metrics"] = "\n".join(ksm) + "\n"
        return texts

    # ---- a replayable trace ---------------------------------------------------------------
    def trace(self, scrapes: int) -> str:
        """Render ``scrapes`` scrapes of the whole fleet as one OpenMetrics trace.

        The samples are labelled as a scrape would label them; every one is held in memory,
        so keep this to small fleets (tens of pods).
        """
        samples: list[Sample] = []
        types: dict[str, str] = {}
        by_name = {target.name: target for target in self.targets}
        for t, texts in self.scrape_many(scrapes):
            samples += scrape_samples(texts, by_name, t, types)
        return render_trace(samples, types)


def scraped_at(target: str, scrape: int, exporter_every: int) -> bool:
    """Return whether ``target`` is scraped at scrape ``scrape`` of Triton's interval.

    Triton's targets are scraped every time, the exporters' every ``exporter_every``-th
    time (3: every 30 s beside a 10 s Triton).
    """
    return target.startswith("triton/") or scrape % exporter_every == 0


def _ints(values: npt.NDArray[np.float64]) -> list[str]:
    return [str(v) for v in values.astype(np.int64).tolist()]


def _line(head: str, value: str) -> str:
    return f"{head} {value}"


def main() -> None:
    """Write per-scrape expositions or a trace of a generated fleet."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=4, help="pods per deployment")
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between scrapes")
    parser.add_argument("--no-exporters", action="store_true", help="Triton's series only")
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--fault-pods", type=int, default=1)
    parser.add_argument("--fault-at", type=int, default=10, help="scrape the fault starts at")
    parser.add_argument("--seed", type=int, default=0)
    out = parser.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=Path, help="directory for scrape-NNNN/<target>.prom files")
    out.add_argument("--trace", type=Path, help="OpenMetrics trace to write (.om or .om.gz)")
    args = parser.parse_args()
    fleet = Fleet(
        FleetSpec(
            pods=args.pods,
            models=args.models,
            replicas=args.replicas,
            interval_s=args.interval,
            exporters=not args.no_exporters,
            seed=args.seed,
            fault=args.fault,
            fault_pods=args.fault_pods,
            fault_at=args.fault_at,
        )
    )
    if args.trace is not None:
        text = fleet.trace(args.scrapes)
        data = text.encode()
        args.trace.write_bytes(gzip.compress(data, mtime=0) if args.trace.suffix == ".gz" else data)
        return
    for k, (_, texts) in enumerate(fleet.scrape_many(args.scrapes)):
        where = args.out / f"scrape-{k:04d}"
        where.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            (where / (name.replace("/", "_") + ".prom")).write_text(text)


if __name__ == "__main__":
    main()


def scrape_samples(
    texts: Mapping[str, str], targets: Mapping[str, Target], t: float, types: dict[str, str]
) -> list[Sample]:
    """Return one scrape's samples at ``t``, labelled as a scrape labels them; fill ``types``."""
    samples: list[Sample] = []
    for name, text in texts.items():
        target = targets[name]
        exposition = parse_exposition(text, default_timestamp=t)
        types.update(exposition.types)
        samples.extend(
            Sample(
                s.name,
                relabelled(s.labels, target.labels, honor_labels=target.honor_labels),
                s.value,
                s.timestamp,
            )
            for s in exposition.samples
        )
    return samples
