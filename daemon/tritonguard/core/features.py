"""Features per (namespace, pod, model): rates, shares, quantiles and joined exporter signals."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import lru_cache

from tritonguard.core.histograms import window_quantile
from tritonguard.core.samples import Labels, label
from tritonguard.core.series_store import Series, SeriesStore
from tritonguard.core.thresholds import Thresholds

SubjectKey = tuple[str, str, str]  # (namespace, pod, model)


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


# Asked for three times a subject (ingress, two HPA series), the same for all a pod's models.
@lru_cache(maxsize=4096)
def workload_of(pod: str) -> str:
    """Return a pod's workload name: without a ReplicaSet hash and pod suffix, or an ordinal."""
    parts = pod.split("-")
    if len(parts) >= 3 and re.fullmatch(r"[a-z0-9]{5}", parts[-1]):
        return "-".join(parts[:-2])  # Deployment: <name>-<replicaset hash>-<pod suffix>
    if len(parts) >= 2 and parts[-1].isdigit():
        return "-".join(parts[:-1])  # StatefulSet: <name>-<ordinal>
    return pod


def serves(labels: Labels, ns: str, model: str, pod: str) -> bool:
    """Return whether an ingress or HPA series is about this model or its pod's workload.

    Matched on the series' own model, path, ingress, service or HPA name; never on the
    namespace alone, which would give every model of a namespace another model's 504s.
    """
    if ns and label(labels, "namespace") not in ("", ns):
        return False
    if label(labels, "model"):
        return label(labels, "model") == model
    path = label(labels, "path")
    if model and f"/models/{model}" in path:
        return True
    names = " ".join(
        label(labels, k) for k in ("ingress", "service", "horizontalpodautoscaler")
    ).strip()
    if not names:
        return False
    wanted = {model.lower(), workload_of(pod).lower()} - {""}
    have = {label(labels, k).lower() for k in ("ingress", "service", "horizontalpodautoscaler")}
    if wanted & have:
        return True
    # A name made of the model's own words ("triton-resnet50-svc" for resnet50).
    return bool(model) and _tokens(model) <= _tokens(names)


def _names_a_pod(labels: Labels) -> bool:
    return any(label(labels, k) for k in ("exported_pod", "pod", "pod_name"))


def _host_of(labels: Labels) -> str:
    return label(labels, "instance").rsplit(":", 1)[0] or label(labels, "Hostname")


Labelled = Callable[[Labels], bool]


def real_container(labels: Labels) -> bool:
    """Return whether a cAdvisor series is a container's own, not the pod's or the pause's."""
    # cAdvisor also exports a pod-level aggregate (container="") and the pause container.
    container = label(labels, "container") or label(labels, "container_name")
    return container not in ("", "POD")


class _Hosts:
    """A per-host exporter's family, by host, for pods it does not map to GPUs."""

    __slots__ = ("by_host", "family", "maps_pods")

    def __init__(self, family: list[Series]) -> None:
        self.family = family
        # An empty family maps nothing either: no host has a GPU in view.
        self.maps_pods = not family or any(_names_a_pod(s.labels) for s in family)
        self.by_host: dict[str, list[Series]] = {}
        for s in family:
            self.by_host.setdefault(_host_of(s.labels), []).append(s)


@dataclass(slots=True)
class FeatureSet:
    """Feature values for one subject over one window; None means unknown, never zero."""

    window_s: float
    interval_s: float
    fresh: bool
    request_rate: float | None = None
    inference_rate: float | None = None
    exec_rate: float | None = None
    mean_latency_us: float | None = None
    mean_queue_us: float | None = None
    queue_share: float | None = None
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None
    compute_per_exec_us: float | None = None
    compute_per_inference_us: float | None = None
    input_share: float | None = None
    output_share: float | None = None
    avg_batch: float | None = None
    client_batch: float | None = None
    busy_instances: float | None = None
    pending: float | None = None
    pending_change: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    queue_p99_us: float | None = None
    failure_rate: float | None = None
    failure_rejected: float | None = None
    failure_canceled: float | None = None
    failure_backend: float | None = None
    failure_other: float | None = None
    gpu_util: float | None = None
    pcie_rx_bps: float | None = None
    pcie_tx_bps: float | None = None
    cpu_host_util: float | None = None
    container_cpu_cores: float | None = None
    cpu_quota_cores: float | None = None
    container_cpu_saturation: float | None = None
    throttled_ratio: float | None = None
    # cgroup CPU pressure ("some"): the share of the window in which at least one of Triton's
    # threads was runnable and waited for a CPU (kubelet's PSI metrics). Unlike the node's
    # busy share it can still rise on a node that is already full.
    cpu_waiting_share: float | None = None
    node_cpu_busy: float | None = None
    ingress_rate: float | None = None
    ingress_timeout_rate: float | None = None
    ingress_error_rate: float | None = None
    hpa_desired: float | None = None
    hpa_current: float | None = None
    load_duration_s: float | None = None
    # The newest scrape's own mean latency and queue time (Δ over one scrape interval): the
    # baseline keeps their healthy spread, which the fast path compares new scrapes against.
    scrape_latency_us: float | None = None
    scrape_queue_us: float | None = None

    def as_dict(self) -> dict[str, float | bool | None]:
        """Return the values by name (for evidence, verify steps and the diagnose report)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _by_label(series: Iterable[Series], name: str) -> dict[str, list[Series]]:
    """Return the series by one label's value, each group in the given order.

    One pass over a subject's series instead of one per value asked for; the order within a
    group is the filter's, so sums over it add in the same order.
    """
    out: dict[str, list[Series]] = {}
    for s in series:
        out.setdefault(label(s.labels, name), []).append(s)
    return out


def _rate_of(deltas: Iterable[tuple[float, float] | None]) -> float | None:
    """Return the rate over series' increases, as ``FeatureReader.rate`` sums them."""
    total, span, seen = 0.0, 0.0, False
    for d in deltas:
        if d is None:
            continue
        total += d[0]
        span = max(span, d[1])
        seen = True
    return total / span if seen and span > 0 else None


def _div(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


# Request latency histograms and their unit scale to µs, preferred first: Triton's request
# duration histogram, else time to first response (decoupled models), exported in ms.
HISTOGRAM_LATENCIES: tuple[tuple[str, float], ...] = (
    ("nv_inference_request_duration_histogram_us_bucket", 1.0),
    ("nv_inference_first_response_histogram_ms_bucket", 1000.0),
)
QUEUE_HISTOGRAM = "nv_inference_queue_duration_histogram_us_bucket"
# node-exporter's CPU seconds by mode: the node's busy share.
NODE_CPU = "node_cpu_seconds_total"
CPU_WAITING = "container_pressure_cpu_waiting_seconds_total"


class FeatureReader:
    """Computes features from a series store; one instance per evaluation time.

    The store does not change while a reader is in use, so whatever is shared between
    subjects (a pod's exporter signals, a node's CPU, a family's hosts) is computed once per
    reader and reused by every model of the pod.
    """

    def __init__(self, store: SeriesStore, thresholds: Thresholds, now: float) -> None:
        self.store = store
        self.t = thresholds
        self.now = now
        self._index: dict[str, dict[SubjectKey, list[Series]]] = {}
        self._aggregates: set[SubjectKey] = set()
        # The model whose features are being computed for a (namespace, pod).
        self._model_of: dict[tuple[str, str], str] = {}
        self._pod_memo: dict[tuple[str, str, str, Labelled | None], list[Series]] = {}
        self._host_memo: dict[str, _Hosts] = {}
        self._signals_memo: dict[tuple[str, str, float, float, float], _PodSignals] = {}
        self._node_memo: dict[tuple[frozenset[str], float, float], float | None] = {}
        self._nodes: _NodeCpu | None = None
        self._serving_memo: dict[tuple[str, str, str, str], list[Series]] = {}
        self._in_ns: dict[tuple[str, str], list[Series]] = {}
        self._intervals: dict[SubjectKey, float] = {}
        self._by_pod: dict[tuple[str, str], list[SubjectKey]] | None = None
        # Each pod's container restarts since a horizon (the reload signs ask for every
        # model of the pod); read-only lists.
        self.restarts: dict[tuple[str, str, float], list[float]] = {}

    def subjects(self) -> list[SubjectKey]:
        """Every (namespace, pod, model) that Triton reports requests for."""
        keys: set[SubjectKey] = set()
        for name in ("nv_inference_request_success", "nv_inference_exec_count"):
            keys.update(k for k in self._indexed(name) if k not in self._aggregates)
        return sorted(keys)

    def pod_subjects(self, ns: str, pod: str) -> list[SubjectKey]:
        """Every subject Triton reports requests for on one pod (its models)."""
        if self._by_pod is None:
            self._by_pod = {}
            for key in self.subjects():
                self._by_pod.setdefault(key[:2], []).append(key)
        return self._by_pod.get((ns, pod), [])

    def model_subjects(self) -> list[SubjectKey]:
        """(namespace, "", model) keys that sum a model's series across its pods."""
        self._indexed("nv_inference_request_success")
        return sorted(self._aggregates)

    def _indexed(self, name: str) -> dict[SubjectKey, list[Series]]:
        idx = self._index.get(name)
        if idx is None:
            index = self.store.index(name)
            idx = self._index[name] = index.by_subject
            self._aggregates.update(index.aggregates)
        return idx

    def series(self, name: str, key: SubjectKey) -> list[Series]:
        """Series of one family for a subject (all versions); read-only."""
        return self._indexed(name).get(key, [])

    def pod_series(
        self, name: str, ns: str, pod: str, where: Labelled | None = None
    ) -> list[Series]:
        """Series of a pod-level family (exporters) joined on namespace/pod; read-only."""
        memo = (name, ns, pod, where)
        out = self._pod_memo.get(memo)
        if out is None:
            out = self._pod_memo[memo] = [
                s
                for sns, s in self.store.index(name).by_pod.get(pod, ())
                if (not ns or not sns or sns == ns) and (where is None or where(s.labels))
            ]
        return out

    def host_series(self, name: str, ns: str, pod: str) -> list[Series]:
        """Series of a per-host exporter (DCGM), by pod when it maps pods, else by host.

        A DCGM exporter without Kubernetes pod mapping labels its series with its own
        ``instance`` (and ``Hostname``): they describe the host's GPUs, so they belong to the
        Triton on the same host, or to the only Triton there is when one host is in view.
        """
        mapped = self.pod_series(name, ns, pod)
        if mapped:
            return mapped
        hosts = self._host_memo.get(name)
        if hosts is None:
            hosts = self._host_memo[name] = _Hosts(list(self.store.family(name)))
        if hosts.maps_pods:
            # The exporter maps GPUs to pods, and none is this pod's: it has no GPU in view.
            return []
        host = pod.rsplit(":", 1)[0] if ":" in pod else ""
        if host and host in hosts.by_host:
            return hosts.by_host[host]
        return hosts.family if len(hosts.by_host) == 1 else []

    def interval(self, key: SubjectKey) -> float:
        """Scrape interval of a subject (median spacing of its request counter)."""
        # Asked for by the features, the birth and the reload signs of every subject.
        held = self._intervals.get(key)
        if held is None:
            held = self._intervals[key] = self._interval(key)
        return held

    def _interval(self, key: SubjectKey) -> float:
        for s in self.series("nv_inference_request_success", key) or self.series(
            "nv_inference_exec_count", key
        ):
            iv = s.interval()
            if iv:
                return iv
        return self.t.rate_window_s / self.t.min_scrapes_per_window

    def window(self, interval: float) -> float:
        """Rate window for a given scrape interval."""
        return self.t.window(interval)

    def stale_after(self, interval: float) -> float:
        """Age beyond which a subject's newest data is stale."""
        return self.t.stale_after(interval)

    @staticmethod
    def sum_delta(series: Iterable[Series], start: float, end: float) -> tuple[float, float] | None:
        """Total increase of counters over [start, end] and the elapsed time, or None."""
        total, span, seen = 0.0, 0.0, False
        for s in series:
            d = s.delta(start, end)
            if d is None:
                continue
            total += d[0]
            span = max(span, d[1])
            seen = True
        return (total, span) if seen and span > 0 else None

    def rate(self, series: Iterable[Series], start: float, end: float) -> float | None:
        """Per-second increase over the window, or None when unknown."""
        d = self.sum_delta(series, start, end)
        return None if d is None else d[0] / d[1]

    def latest_sum(self, series: Iterable[Series], max_age: float) -> float | None:
        """Sum of the newest fresh values of gauges, or None when none is fresh."""
        vals = [v for s in series if (v := s.latest(self.now, max_age)) is not None]
        return sum(vals) if vals else None

    def latest_max(self, series: Iterable[Series], max_age: float) -> float | None:
        """Max of the newest fresh values of gauges, or None."""
        vals = [v for s in series if (v := s.latest(self.now, max_age)) is not None]
        return max(vals) if vals else None

    def compute(
        self, key: SubjectKey, end: float | None = None, window: float | None = None
    ) -> FeatureSet:
        """All features of one subject over the window ending at ``end`` (default: now)."""
        ns, pod, _model = key
        end = self.now if end is None else end
        interval = self.interval(key)
        win = self.window(interval) if window is None else window
        # Anchor tolerance: live scrapes jitter, so look a little past the window start for
        # the anchor point rather than reaching one whole interval further back.
        start = end - win + 0.1 * interval
        max_age = self.stale_after(interval)
        succ_series = self.series("nv_inference_request_success", key)
        newest = max((s.last_time for s in succ_series), default=float("-inf"))
        f = FeatureSet(window_s=win, interval_s=interval, fresh=self.now - newest <= max_age)

        def delta(name: str) -> tuple[float, float] | None:
            return self.sum_delta(self.series(name, key), start, end)

        succ = delta("nv_inference_request_success")
        if succ is not None:
            f.request_rate = succ[0] / succ[1]
        infer = delta("nv_inference_count")
        execs = delta("nv_inference_exec_count")
        if infer is not None:
            f.inference_rate = infer[0] / infer[1]
        if execs is not None:
            f.exec_rate = execs[0] / execs[1]
        n_succ = succ[0] if succ else None
        req_us = delta("nv_inference_request_duration_us")
        queue_us = delta("nv_inference_queue_duration_us")
        cin = delta("nv_inference_compute_input_duration_us")
        cinf = delta("nv_inference_compute_infer_duration_us")
        cout = delta("nv_inference_compute_output_duration_us")
        f.mean_latency_us = _div(req_us[0] if req_us else None, n_succ)
        f.mean_queue_us = _div(queue_us[0] if queue_us else None, n_succ)
        f.queue_share = _div(queue_us[0] if queue_us else None, req_us[0] if req_us else None)
        f.compute_input_us = _div(cin[0] if cin else None, n_succ)
        f.compute_infer_us = _div(cinf[0] if cinf else None, n_succ)
        f.compute_output_us = _div(cout[0] if cout else None, n_succ)
        if cin and cinf and cout:
            comp = cin[0] + cinf[0] + cout[0]
            f.input_share = _div(cin[0], comp)
            f.output_share = _div(cout[0], comp)
            # Triton charges every request of a batch with the whole batch's compute time, so
            # compute per request is compute per execution.
            f.compute_per_exec_us = _div(comp, n_succ)
            if execs and infer:
                f.avg_batch = _div(infer[0], execs[0])
                f.compute_per_inference_us = _div(f.compute_per_exec_us, f.avg_batch)
            if f.compute_per_exec_us is not None and f.exec_rate is not None:
                f.busy_instances = f.compute_per_exec_us / 1e6 * f.exec_rate
        if infer and n_succ:
            f.client_batch = infer[0] / n_succ

        pend = self.series("nv_inference_pending_request_count", key)
        f.pending = self.latest_sum(pend, max_age)
        if pend and f.pending is not None:
            before = [v for s in pend if (i := s.at_or_before(start)) >= 0 for v in (s.values[i],)]
            if before:
                f.pending_change = f.pending - sum(before)

        request_q = _by_label(self.series("nv_inference_request_summary_us", key), "quantile")
        queue_q = _by_label(self.series("nv_inference_queue_summary_us", key), "quantile")
        f.p50_us = self.latest_max(request_q.get("0.5", ()), max_age)
        f.p99_us = self.latest_max(request_q.get("0.99", ()), max_age)
        f.queue_p99_us = self.latest_max(queue_q.get("0.99", ()), max_age)
        if f.p99_us is None:
            # Histograms, where the server exports them instead: quantiles of what the window
            # observed (summaries slide over minutes), in µs.
            for family, scale in HISTOGRAM_LATENCIES:
                buckets = self.series(family, key)
                if buckets:
                    p50 = window_quantile(buckets, 0.5, start, end)
                    p99 = window_quantile(buckets, 0.99, start, end)
                    f.p50_us = None if p50 is None else p50 * scale
                    f.p99_us = None if p99 is None else p99 * scale
                    break
        if f.queue_p99_us is None:
            q99 = window_quantile(self.series(QUEUE_HISTOGRAM, key), 0.99, start, end)
            f.queue_p99_us = q99

        fails = self.series("nv_inference_request_failure", key)
        if fails:
            # Each series' increase taken once, for the total and for its reason's rate.
            deltas = {id(s): s.delta(start, end) for s in fails}
            total = _rate_of(deltas.values())
            f.failure_rate = total
            reasons = _by_label(fails, "reason")
            by = {
                r: _rate_of(deltas[id(s)] for s in reasons.get(r.upper(), ()))
                for r in ("rejected", "canceled", "backend", "other")
            }
            # A reason absent from the exposition while others are present is zero, not unknown:
            # Triton exports the reasons it knows together.
            zero = 0.0 if total is not None else None
            f.failure_rejected = by["rejected"] if by["rejected"] is not None else zero
            f.failure_canceled = by["canceled"] if by["canceled"] is not None else zero
            f.failure_backend = by["backend"] if by["backend"] is not None else zero
            f.failure_other = by["other"] if by["other"] is not None else zero

        self._model_of[(ns, pod)] = key[2]
        self._pod_signals(f, ns, pod, start=start, end=end, max_age=max_age)
        load = self.series("nv_model_load_duration_secs", key)
        f.load_duration_s = self.latest_max(load, max_age)
        return f

    def _pod_signals(
        self, f: FeatureSet, ns: str, pod: str, *, start: float, end: float, max_age: float
    ) -> None:
        memo = (ns, pod, start, end, max_age)
        shared = self._signals_memo.get(memo)
        if shared is None:
            shared = self._signals_memo[memo] = self._shared_signals(
                ns, pod, start=start, end=end, max_age=max_age
            )
        (
            f.gpu_util,
            f.pcie_rx_bps,
            f.pcie_tx_bps,
            f.cpu_host_util,
            f.container_cpu_cores,
            f.cpu_quota_cores,
            f.container_cpu_saturation,
            f.throttled_ratio,
            f.cpu_waiting_share,
            f.node_cpu_busy,
        ) = shared

        model = self._model_of.get((ns, pod), "")
        ingress = self._serving("nginx_ingress_controller_requests", ns, model, pod)
        if ingress:
            f.ingress_rate = self.rate(ingress, start, end)
            timeouts = [s for s in ingress if label(s.labels, "status") in ("499", "504", "408")]
            # gRPC reports failures in trailers: an ingress counts a gRPC storm's requests as
            # 200s, so its lack of timeouts is no evidence either way.
            grpc = any("grpc" in label(s.labels, "path").lower() for s in ingress)
            # ingress-nginx adds a status series at its first request: none yet is zero.
            if timeouts:
                f.ingress_timeout_rate = self.rate(timeouts, start, end)
            elif not grpc:
                f.ingress_timeout_rate = 0.0
            f.ingress_error_rate = self.rate(
                [s for s in ingress if label(s.labels, "status").startswith("5")], start, end
            )
        f.hpa_desired = self.latest_sum(self._hpa("desired", ns, model, pod), max_age)
        f.hpa_current = self.latest_sum(self._hpa("current", ns, model, pod), max_age)

    def _shared_signals(
        self, ns: str, pod: str, *, start: float, end: float, max_age: float
    ) -> _PodSignals:
        """Return the pod's exporter signals, the same for every model it serves."""
        dcgm = self.host_series("DCGM_FI_DEV_GPU_UTIL", ns, pod)
        if dcgm:
            util = self.latest_max(dcgm, max_age)
            gpu_util = None if util is None else util / 100.0
        else:
            gpu_util = self.latest_max(self.pod_series("nv_gpu_utilization", ns, pod), max_age)
        pcie_rx = self.latest_sum(self.host_series("DCGM_FI_PROF_PCIE_RX_BYTES", ns, pod), max_age)
        pcie_tx = self.latest_sum(self.host_series("DCGM_FI_PROF_PCIE_TX_BYTES", ns, pod), max_age)
        cpu_host = self.latest_max(self.pod_series("nv_cpu_utilization", ns, pod), max_age)

        usage = self.pod_series("container_cpu_usage_seconds_total", ns, pod, real_container)
        cores = self.rate(usage, start, end)
        quota = self.latest_sum(
            self.pod_series("container_spec_cpu_quota", ns, pod, real_container), max_age
        )
        period = self.latest_max(
            self.pod_series("container_spec_cpu_period", ns, pod, real_container), max_age
        )
        quota_cores = saturation = throttled_ratio = None
        if quota is not None and quota > 0:
            quota_cores = quota / (period or 100_000.0)
            saturation = _div(cores, quota_cores)
        periods = self.sum_delta(
            self.pod_series("container_cpu_cfs_periods_total", ns, pod, real_container), start, end
        )
        throttled = self.sum_delta(
            self.pod_series("container_cpu_cfs_throttled_periods_total", ns, pod, real_container),
            start,
            end,
        )
        if periods and throttled:
            throttled_ratio = _div(throttled[0], periods[0])
        waiting = self.rate(self.pod_series(CPU_WAITING, ns, pod, real_container), start, end)
        node_busy = self._node_cpu_busy(ns, pod, start, end)
        return (
            gpu_util,
            pcie_rx,
            pcie_tx,
            cpu_host,
            cores,
            quota_cores,
            saturation,
            throttled_ratio,
            waiting,
            node_busy,
        )

    def _serving(self, name: str, ns: str, model: str, pod: str) -> list[Series]:
        """Series of ``name`` that ``serves`` this model or its pod's workload; read-only."""
        # `serves` reads the pod only through its workload, so the workload's pods share.
        memo = (name, ns, model, workload_of(pod))
        out = self._serving_memo.get(memo)
        if out is None:
            out = self._serving_memo[memo] = [
                s for s in self._in_namespace(name, ns) if serves(s.labels, ns, model, pod)
            ]
        return out

    def _in_namespace(self, name: str, ns: str) -> list[Series]:
        """Return a family's series ``serves`` can match in namespace ``ns``, in family order."""
        memo = (name, ns)
        out = self._in_ns.get(memo)
        if out is None:
            out = self._in_ns[memo] = [
                s
                for s in self.store.family(name)
                if not ns or label(s.labels, "namespace") in ("", ns)
            ]
        return out

    def _hpa(self, which: str, ns: str, model: str, pod: str) -> list[Series]:
        """HPA series of the workload serving ``model`` on ``pod`` (by name), not the namespace's."""
        return self._serving(
            f"kube_horizontalpodautoscaler_status_{which}_replicas", ns, model, pod
        )

    def node_cpu_busy(self, ns: str, pod: str, start: float, end: float) -> float | None:
        """Return the busy share of the pod's node CPUs over (start, end], or None unknown."""
        return self._node_cpu_busy(ns, pod, start, end)

    def _node_cpu_busy(self, ns: str, pod: str, start: float, end: float) -> float | None:
        nodes = self._nodes
        if nodes is None:
            # Built once while the family stays the same: a daemon evaluates many times an
            # interval, each time for the few targets just scraped.
            index = self.store.index(NODE_CPU)
            held = index.derived
            if not isinstance(held, _NodeCpu):
                held = index.derived = _NodeCpu(list(self.store.family(NODE_CPU)))
            nodes = self._nodes = held
        if not nodes.family:
            return None
        names: frozenset[str] = frozenset()
        for sns, s in self.store.index("kube_pod_info").by_pod.get(pod, ()):
            if sns in ("", ns):
                names = frozenset({label(s.labels, "node"), label(s.labels, "host_ip")} - {""})
                break
        if not names and len(nodes.nodes) != 1:
            return None
        memo = (names, start, end)
        if memo in self._node_memo:
            return self._node_memo[memo]
        mine, idle_modes = nodes.of(names)
        total = self.rate(mine, start, end)
        idle = self.rate(idle_modes, start, end)
        busy = (
            None
            if total is None or idle is None or total <= 0
            else max(0.0, min(1.0, 1.0 - idle / total))
        )
        self._node_memo[memo] = busy
        return busy


# A pod's exporter signals: GPU util, PCIe RX and TX, host CPU, container CPU cores, quota
# cores, CPU saturation, throttled ratio, CPU waiting share, node CPU busy.
_PodSignals = tuple[
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
]


class _NodeCpu:
    """node-exporter's CPU seconds, by the node names and host addresses pods map to."""

    __slots__ = ("_at", "_of", "family", "nodes")

    def __init__(self, family: list[Series]) -> None:
        self.family = family
        self.nodes = {label(s.labels, "node") or label(s.labels, "instance") for s in family}
        # node-exporter series carry `node` when relabelled, else `instance` = host:port.
        self._at: dict[str, list[int]] = {}
        for k, s in enumerate(family):
            node, host = label(s.labels, "node"), label(s.labels, "instance").rsplit(":", 1)[0]
            self._at.setdefault(node, []).append(k)
            if host != node:
                self._at.setdefault(host, []).append(k)
        self._of: dict[frozenset[str], tuple[list[Series], list[Series]]] = {}

    def of(self, names: frozenset[str]) -> tuple[list[Series], list[Series]]:
        """Return the series of the named node (all, and idle or iowait), in family order.

        No names: the one node in view, where the pod can only be.
        """
        held = self._of.get(names)
        if held is None:
            if names:
                at = sorted({k for n in names for k in self._at.get(n, ())})
                mine = [self.family[k] for k in at]
            else:
                mine = self.family
            idle = [s for s in mine if label(s.labels, "mode") in ("idle", "iowait")]
            held = self._of[names] = (mine, idle)
        return held
