"""Compile the engine's features and signatures into Prometheus recording and alerting rules.

``tritonguard rules export`` prints what this module builds: one rule group that a Prometheus
(or Thanos Ruler, or Mimir's ruler) evaluates for the whole fleet at once. Every rule keeps the
engine's subject key, (namespace, pod, model), with the engine's target convention
(``core.targets``): ``exported_pod`` or ``pod`` or ``pod_name`` or, outside Kubernetes,
``instance`` names the pod.

The group runs in this order, each step reading the ones before it in the same evaluation:

1. ``tritonguard:<counter>:rate`` and ``:irate``: Triton's counters per subject, over the
   engine's rate window and over the newest scrape.
2. ``tritonguard:<feature>``: one series per ``FeatureSet`` feature (``core.features``), computed
   the way ``FeatureReader.compute`` computes it, exporter joins included.
3. ``tritonguard:<feature>:baseline`` (median) and ``:baseline_sigma`` (robust spread) over the
   subject's healthy history, ``baseline_lookback_s`` back and offset by the gap windows; the
   same model on its other pods stands in for a pod with none of its own.
4. Births, the symptom gate, recurrence and reload signs.
5. ``tritonguard:cause_confidence{cause=...}``: each signature's confidence, with its required
   evidence as gates and its corroborating signs as terms.
6. One alert per cause (label ``cause``), held like an incident and ranked like the engine's
   primary cause.
7. ``tritonguard:healthy`` and the per-feature healthy history the baselines read next time.

Everything is a function of a ``Thresholds`` instance and the scrape interval, so a user's
threshold overrides reach the rules. Where PromQL cannot say what the engine does, the rules
approximate it; docs/detection.md ("Rules export") says where and by how much.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from tritonguard.core.findings import CAUSES
from tritonguard.core.series_store import BIRTH_GRACE_S, BIRTH_PLAUSIBLE_FACTOR
from tritonguard.core.signatures.memory_copy import MIN_GROWN_SHARE
from tritonguard.core.symptoms import QUEUED_SHARE, queue_scrapes
from tritonguard.core.thresholds import Thresholds

BY = "namespace, pod, model"
PREFIX = "tritonguard"
GROUP_NAME = "tritonguard"

# Counters read per subject, over the window and over the newest scrape.
WINDOW_COUNTERS: tuple[str, ...] = (
    "nv_inference_request_success",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)
SCRAPE_COUNTERS: tuple[str, ...] = (
    "nv_inference_request_success",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)

# Features compared against the subject's own healthy history (``core.baselines``), and the
# ones whose noise matters too (the symptom gate, the freeze, the steadiness of the queue).
BASELINE_FEATURES: tuple[str, ...] = (
    "mean_latency_us",
    "mean_queue_us",
    "p99_us",
    "queue_share",
    "compute_per_inference_us",
    "compute_per_exec_us",
    "request_rate",
    "inference_rate",
    "busy_instances",
    "container_cpu_cores",
    "input_share",
    "copy_share",
    "copy_us",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "ingress_rate",
    "node_cpu_busy",
    "cpu_waiting_share",
    "cpu_host_util",
    "scrape_latency_us",
    "scrape_queue_us",
)
# Compute per inference first (it tells whether the window before held the shift already),
# then the node's state before the shift, which node_contention compares against.
BEFORE_SHIFT: tuple[str, ...] = (
    "compute_per_inference_us",
    "node_cpu_busy",
    "cpu_waiting_share",
    "cpu_host_util",
)
SIGMA_FEATURES: tuple[str, ...] = (
    "mean_latency_us",
    "mean_queue_us",
    "p99_us",
    "compute_per_inference_us",
    "scrape_latency_us",
    "scrape_queue_us",
)

# Every metric family the rules read: what a Prometheus must scrape for them, and what a trace
# needs to be replayed through them.
CONSUMED_METRICS: frozenset[str] = frozenset(
    {
        *WINDOW_COUNTERS,
        "nv_inference_request_failure",
        "nv_inference_pending_request_count",
        "nv_inference_request_summary_us",
        "nv_inference_queue_summary_us",
        "nv_inference_compute_infer_summary_us",
        "nv_inference_request_duration_histogram_us_bucket",
        "nv_inference_first_response_histogram_ms_bucket",
        "nv_inference_queue_duration_histogram_us_bucket",
        "nv_model_load_duration_secs",
        "nv_gpu_utilization",
        "nv_cpu_utilization",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "container_cpu_usage_seconds_total",
        "container_cpu_cfs_periods_total",
        "container_cpu_cfs_throttled_periods_total",
        "container_spec_cpu_quota",
        "container_spec_cpu_period",
        "container_pressure_cpu_waiting_seconds_total",
        "node_cpu_seconds_total",
        "kube_pod_info",
        "kube_pod_container_status_restarts_total",
        "nginx_ingress_controller_requests",
    }
)

# The robust standard deviation from quartiles: for normal noise the interquartile range is
# 1.349 sigma, as 1.4826 x MAD is sigma (the engine's spread, which PromQL cannot compute: the
# deviations from a median need the median first).
IQR_PER_SIGMA = 1.349


def series(feature: str) -> str:
    """Return the recorded series of one feature, e.g. ``tritonguard:queue_share``."""
    return f"{PREFIX}:{feature}"


def alert_name(cause: str) -> str:
    """Return the alert of a cause: ``batching_delay`` alerts as ``TritonguardBatchingDelay``."""
    return "Tritonguard" + "".join(part.capitalize() for part in cause.split("_"))


@dataclass(frozen=True, slots=True)
class Rule:
    """One recording or alerting rule, as it goes into a rule group."""

    expr: str
    record: str = ""
    alert: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Return the rule in Prometheus' rule-file form."""
        out: dict[str, Any] = {"record": self.record} if self.record else {"alert": self.alert}
        out["expr"] = pretty(self.expr)
        if self.alert:
            if self.for_s > 0:
                out["for"] = duration(self.for_s)
            if self.keep_firing_for_s > 0:
                out["keep_firing_for"] = duration(self.keep_firing_for_s)
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True, slots=True)
class CauseText:
    """What an alert of one cause says: its mechanism, and the fix as the engine words it."""

    title: str
    mechanism: str
    fix: str
    snippet: str = ""
    flags: str = ""


# The fixes are the signatures' own (``core.signatures``); where a signature fills in numbers
# it only knows from the model config (instance counts), the alert says it in general terms.
CAUSE_TEXT: dict[str, CauseText] = {
    "batching_delay": CauseText(
        "requests wait in the dynamic batcher for batches that do not fill",
        "Queue share of request time high while instances are mostly idle, queueing steady "
        "across scrapes, compute per execution normal.",
        "Lower dynamic_batching.max_queue_delay_microseconds (start near 100-500 µs) and reload "
        "the config through the repository API; for latency-critical low traffic prefer more "
        "instances (instance_group.count) over batching.",
        "dynamic_batching {\n  preferred_batch_size: [ 1, 2, 4 ]\n"
        "  max_queue_delay_microseconds: 200\n}",
    ),
    "too_few_instances": CauseText(
        "every instance is busy and requests queue",
        "All instances busy (compute time per wall second near a whole number of instances), "
        "queue share high, compute per inference normal.",
        "Raise instance_group.count by one (Triton applies an instance-count-only change in "
        "place) while the accelerator has headroom; otherwise scale replicas. Autoscale on "
        "queue time or pending requests rather than CPU.",
        "instance_group [\n  {\n    count: <current + 1>\n  }\n]",
    ),
    "too_many_instances": CauseText(
        "instances fight over the accelerator",
        "More executions in flight, each slower per inference than the model's baseline, "
        "with no more throughput.",
        "Lower instance_group.count (toward half): the instances contend for one saturated "
        "accelerator. Get throughput from dynamic batching, lower precision (FP16/INT8) or "
        "kernel optimisation instead of more instances.",
        "instance_group [\n  {\n    count: <current / 2>\n  }\n]",
    ),
    "cold_start": CauseText(
        "first requests after a deploy, load or scale-out waited behind cold executions",
        "A model, version or pod that just appeared, whose first executions were far slower "
        "than warm ones, with its first requests queued behind them.",
        "Add model_warmup to the model config so each instance runs warm-up executions before "
        "it is Ready; in Kubernetes gate readiness on warm-up (send warm-up requests before the "
        "pod joins the Service) so scale-outs do not serve cold.",
        'model_warmup [\n  {\n    name: "warmup"\n    batch_size: 1\n    count: 5\n'
        '    inputs {\n      key: "INPUT"\n      value: { data_type: TYPE_FP32 dims: [ ... ] '
        "zero_data: true }\n    }\n  }\n]",
    ),
    "cpu_bottleneck": CauseText(
        "Triton is CPU-bound",
        "Triton's own CPU saturated against its quota or throttled (or the host saturated as "
        "its load grew) while the accelerator is underused.",
        "Move pre/post-processing out of Triton (a separate service) or into native code "
        "(DALI, C++/TensorRT/ONNX Runtime backends instead of the Python backend); raise the "
        "container's CPU request/limit so it is not throttled; then scale out.",
        'resources:\n  requests:\n    cpu: "<measured use + 30%>"\n  limits:\n'
        '    cpu: "<request × 1.5 or none>"',
    ),
    "memory_copy": CauseText(
        "moving tensors dominates the slowdown",
        "Input/output handling a large or sharply grown share of compute that explains the "
        "latency rise, or PCIe bytes per inference multiplied.",
        "Cut copies before scaling: send inputs in the layout and dtype the model expects (no "
        "NHWC↔NCHW or FP32→FP16 conversion at run time), pass large tensors through system or "
        "CUDA shared memory (tritonclient.utils.shared_memory / cuda_shared_memory), and use "
        "binary tensor data instead of JSON.",
    ),
    "model_reload": CauseText(
        "the model is being reloaded while it serves",
        "Latency spikes recurring at a period, or repeated reload signs (counter resets, new "
        "versions, load times, bursts of cold executions) at steady traffic.",
        "Stop repository polling in production: run tritonserver with "
        "--model-control-mode=explicit --repository-poll-secs=0 and load models only through "
        "the repository API (POST /v2/repository/models/<m>/load); ship model updates "
        "blue/green or as a canary, and write repository changes atomically (new version "
        "directory, then rename).",
        "",
        "--model-control-mode=explicit --repository-poll-secs=0",
    ),
    "node_contention": CauseText(
        "other work on the node is taking Triton's resources",
        "Compute per inference inflated at unchanged load and concurrency while the node (or "
        "host) got busier, not because of Triton.",
        "Isolate the GPU node: taint it and give Triton a toleration and nodeSelector/affinity "
        "so other workloads stay off; raise Triton's CPU request to what it really uses; drive "
        "the HPA from Triton queue time or pending requests so scale-out starts before the "
        "queue builds.",
        "tolerations:\n- key: nvidia.com/gpu\n  operator: Exists\n  effect: NoSchedule\n"
        'nodeSelector:\n  nvidia.com/gpu.present: "true"',
    ),
    "retry_storm": CauseText(
        "client retries are amplifying an overload",
        "Timeouts or cancellations rising with arrivals and pending requests, or (without "
        "timeout counts) arrivals a multiple of what is served with a backlog no client waits "
        "out.",
        "Shed load at the server so excess fails fast instead of queueing past client timeouts "
        "(queue policy max_queue_size + default_timeout_microseconds with REJECT); make clients "
        "back off exponentially with jitter and a retry cap, and add a circuit breaker.",
        "dynamic_batching {\n  default_queue_policy {\n    timeout_action: REJECT\n"
        "    default_timeout_microseconds: 200000\n    allow_timeout_override: true\n"
        "    max_queue_size: 64\n  }\n}",
    ),
}


_BREAK_BEFORE = (" and on (", " unless on (", " or ")


def pretty(expr: str) -> str:
    """Return an expression with a line break before each top-level set operator.

    PromQL reads newlines as spaces; a gate then reads as one condition per line.
    """
    out: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == " " and expr.startswith(_BREAK_BEFORE, i):
            out.append(expr[start:i])
            start = i + 1
        i += 1
    out.append(expr[start:])
    return "\n".join(out)


def duration(seconds: float) -> str:
    """Return a Prometheus duration: whole seconds as ``30s``, anything finer in milliseconds."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def num(value: float) -> str:
    """Return a number as PromQL reads it back unchanged."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def norm(expr: str) -> str:
    """Relabel a vector to the engine's target key: the pod (else ``instance``) and namespace.

    ``core.targets.target_of`` in PromQL: the first non-empty of ``exported_pod``, ``pod``,
    ``pod_name``, ``instance`` becomes ``pod``; ``exported_namespace`` else ``namespace``
    becomes ``namespace``. Label values never contain ``;``, so a join and an anchored regex
    pick the first non-empty one.
    """
    joined = (
        f'label_join(label_join({expr}, "tg_pod", ";", "exported_pod", "pod", "pod_name", '
        f'"instance"), "tg_ns", ";", "exported_namespace", "namespace")'
    )
    return (
        f'label_replace(label_replace({joined}, "pod", "$1", "tg_pod", ";*([^;]+).*"), '
        f'"namespace", "$1", "tg_ns", ";*([^;]*).*")'
    )


def by_subject(expr: str, op: str = "sum") -> str:
    """Aggregate a relabelled vector per subject."""
    return f"{op} by ({BY}) ({norm(expr)})"


def by_pod(expr: str, op: str = "sum") -> str:
    """Aggregate a relabelled vector per (namespace, pod): an exporter's view of a pod."""
    return f"{op} by (namespace, pod) ({norm(expr)})"


SUBJECTS = f"group by ({BY}) ({series('request_rate')})"
# The symptom the signatures need: sustained over the window, or abnormal in most of the
# newest scrapes (the engine's fast path); and up at all, for reload churn.
SUSTAINED = f"({PREFIX}:symptom_sustained or {PREFIX}:symptom_fast)"
SYMPTOM = f"({PREFIX}:symptom or {PREFIX}:symptom_fast)"


def to_subjects(per_pod: str) -> str:
    """Give a pod-level value to every model the pod serves."""
    return f"({per_pod}) * on (namespace, pod) group_right () {SUBJECTS}"


def known(expr: str) -> str:
    """Return 1 for every subject where ``expr`` has a value (a condition that holds)."""
    return f"group by ({BY}) ({expr})"


def term(value: float, cond: str) -> str:
    """Return a confidence term: ``value`` where the condition holds, 0 for other subjects."""
    return f"({num(value)} * {known(cond)} or 0 * {SUBJECTS})"


def score_of(base: float | str, *terms: tuple[float, str]) -> str:
    """Return a confidence: the base, plus each term where its condition holds."""
    return " + ".join(
        [base if isinstance(base, str) else num(base), *(term(v, c) for v, c in terms)]
    )


def either(a: str, b: str) -> str:
    """Elementwise maximum of two vectors with the same label sets."""
    return f"(({a}) >= ({b}) or ({b}))"


def zero_if_absent(expr: str) -> str:
    """Return a value that counts as zero where unknown (only where the engine does so)."""
    return f"(({expr}) or 0 * {SUBJECTS})"


@dataclass(frozen=True, slots=True)
class Windows:
    """The engine's windows at one scrape interval, as PromQL ranges need them."""

    interval_s: float
    t: Thresholds

    @property
    def window_s(self) -> float:
        """The rate window (``FeatureReader.window``)."""
        return max(self.t.rate_window_s, self.t.min_scrapes_per_window * self.interval_s)

    @property
    def rate_range(self) -> str:
        """A range holding the window's anchor scrape: rates extrapolate to exactly the window."""
        return duration(self.window_s + self.interval_s / 2)

    @property
    def scrape_range(self) -> str:
        """A range holding the newest two scrapes whatever the phase of evaluation."""
        return duration(2.5 * self.interval_s)

    @property
    def points_range(self) -> str:
        """A range holding the per-scrape readings inside the window (``derive``'s ``recent``)."""
        return duration(self.window_s - self.interval_s / 2)

    @property
    def gap(self) -> str:
        """The recent windows the baseline leaves out (``baseline_gap_windows``)."""
        return duration(self.t.baseline_gap_windows * self.window_s)

    @property
    def lookback(self) -> str:
        """The baseline's history before the gap: ``baseline_lookback_s`` back from now.

        Half a scrape more, so the oldest snapshot the engine keeps is inside whether or not a
        range includes its left end.
        """
        gap = self.t.baseline_gap_windows * self.window_s
        return duration(
            max(self.t.baseline_lookback_s - gap, self.interval_s) + self.interval_s / 2
        )

    @property
    def period_points(self) -> str:
        """The per-scrape readings of the period lookback (``now - period_lookback_s``, now]."""
        return duration(self.t.period_lookback_s - self.interval_s / 2)

    @property
    def period_events(self) -> str:
        """The events of the period lookback, at most ``period_lookback_s`` old."""
        return duration(self.t.period_lookback_s + self.interval_s / 2)

    @property
    def min_snapshots(self) -> int:
        """Healthy evaluations a baseline needs (``baseline_min_span_s``, one per scrape)."""
        span = max(self.t.baseline_min_span_s, self.interval_s)
        return max(1, math.ceil(span / self.interval_s - 1e-9))

    @property
    def merge_s(self) -> float:
        """Spikes or reload signs this close are one (``find_spikes``' and ``occurrences``')."""
        return max(self.t.burst_merge_s, 1.5 * self.interval_s)

    @property
    def early_span_s(self) -> float:
        """How long after a birth executions count as early (``births.early_span``)."""
        return max(30.0, 3 * self.interval_s)

    @property
    def fast_span_s(self) -> float:
        """The fast path's short window (``symptoms.fast_symptom``): ``fast_scrapes`` scrapes."""
        return self.t.fast_scrapes * self.interval_s

    @property
    def has_fast_path(self) -> bool:
        """Whether the short window is shorter than the full one: else there is no fast path."""
        return self.fast_span_s < self.window_s

    @property
    def newest_range(self) -> str:
        """The range over the fast path's newest scrapes, as many points as it holds."""
        return duration(self.fast_span_s - self.interval_s / 2)

    @property
    def hold_s(self) -> float:
        """The ``for:`` of every alert: the engine's hold before an incident opens.

        ``hold_evaluations`` consecutive evaluations, one per scrape, and at least ``hold_s``;
        one evaluation at scrapes of ``hold_single_scrape_s`` and coarser.
        """
        if self.interval_s >= self.t.hold_single_scrape_s:
            return 0.0
        return max(self.t.hold_s, (self.t.hold_evaluations - 1) * self.interval_s)

    @property
    def resolve_s(self) -> float:
        """How long an alert keeps firing once its cause stops holding (``resolve_after_*``)."""
        return max(self.t.resolve_after_s, self.t.resolve_after_scrapes * self.interval_s)


def _f(name: str) -> str:
    return series(name)


def _base(name: str) -> str:
    return f"{series(name)}:baseline"


def _before(name: str) -> str:
    """Return the feature's series in the window before the shift began (``Context.before``)."""
    return f"{series(name)}:before_shift"


def _each_known(now: str, refs: Sequence[str], holds: Callable[[str], str]) -> str:
    """Return a condition: ``holds(ref)`` for every reference known, and at least one known.

    The engine's ``bool(refs) and all(...)`` over the references it has: an unknown one
    (no window before a shift, no baseline of an exporter) is skipped, not failed.
    """
    each = [f"(({holds(ref)}) or ({now} unless on ({BY}) {ref}))" for ref in refs]
    anyone = " or ".join(refs)
    return f" and on ({BY}) ".join([*each, f"({anyone})"])


def _sigma(name: str) -> str:
    return f"{series(name)}:baseline_sigma"


def _limit(name: str) -> str:
    return f"{series(name)}:abnormal_above"


def _ratio(name: str, floor: float = 0.0) -> str:
    """Return the value over its baseline (``Baseline.ratio``); absent where either is unknown."""
    base = f"clamp_min({_base(name)}, {num(floor)})" if floor > 0 else _base(name)
    return f"({_f(name)} / ({base} > 0))"


def _rate(counter: str) -> str:
    return f"{PREFIX}:{counter}:rate"


def _irate(counter: str) -> str:
    return f"{PREFIX}:{counter}:irate"


def _per(num_expr: str, den_expr: str) -> str:
    """Return a ratio that is unknown, not infinite, where the denominator is zero."""
    return f"{num_expr} / ({den_expr} > 0)"


class _Builder:
    """Builds the rule group in evaluation order; one instance per export."""

    def __init__(self, t: Thresholds, interval_s: float) -> None:
        self.t = t
        self.w = Windows(interval_s, t)
        self.rules: list[Rule] = []

    def record(self, name: str, expr: str, labels: Mapping[str, str] | None = None) -> None:
        self.rules.append(Rule(expr=expr, record=name, labels=dict(labels or {})))

    def feature(self, name: str, expr: str) -> None:
        self.record(series(name), expr)

    # ---- 1. counters ------------------------------------------------------------------
    def _pod_known(self, ago: str) -> str:
        """Pods in view ``ago`` ago (``tritonguard:pod_seen``, recorded every evaluation)."""
        return f"{PREFIX}:pod_seen offset {ago}"

    def _started(self, sel: str, ago: str) -> str:
        """Series of ``sel`` that started from zero within ``ago``; valued by all they counted.

        A series is born, not merely first seen, when its pod was in view before it (another
        model or version, Triton's own CPU gauge, cAdvisor): the first scrapes of a Prometheus,
        or of a trace, see everything at once and birth nothing (the series store's rule).
        """
        new = norm(f"{sel} unless {sel} offset {ago}")
        return f"({new} and on (namespace, pod) {self._pod_known(ago)})"

    def window_rate(self, sel: str) -> str:
        """Per-series rate over the window, as the engine's ``Series.delta`` measures it.

        The increase since the sample at the window's start, over the window: Prometheus'
        ``rate`` extrapolates instead, by an amount that depends on the counter's value (its
        zero point), so two counters of one target would be stretched differently and their
        ratio (queue share, compute per execution) would drift where counters are young. A
        series that reset in the window falls back to ``rate``, which knows resets; one first
        seen inside the window (the first window of a Prometheus, a trace or a target) is
        rated over the time it was seen, as the engine rates it.
        """
        w = self.w
        rng, ago = w.rate_range, duration(w.window_s)
        # `or` keeps the first alternative a series has: rate where it reset, else the
        # increase since the window's anchor, else (no anchor) since it was first seen.
        reset = f"(rate({sel}[{rng}]) and resets({sel}[{rng}]) > 0)"
        anchored = f"({sel} - {sel} offset {ago}) / {num(w.window_s)}"
        seen = f"(count_over_time({sel}[{rng}]) - 1) * {num(w.interval_s)} > 0"
        young = f"({sel} - min_over_time({sel}[{rng}])) / ({seen})"
        return f"({reset} or {anchored} or {young})"

    def subject_rate(self, sel: str, *, scrape: bool = False) -> str:
        """Per-second increase of a counter per subject, over the window or the newest scrape.

        ``rate``/``irate`` miss what a series counted before its first sample; the series
        store counts a born series from zero (its first executions are often the slow ones),
        so a series born inside the range adds its whole value.
        """
        w = self.w
        if scrape:
            span, increase = w.interval_s, f"irate({sel}[{w.scrape_range}])"
        else:
            span, increase = w.window_s, self.window_rate(sel)
        # `or` takes a born series' whole count first, and the rate of every other one.
        started = self._started(sel, duration(span))
        return f"sum by ({BY}) ({started} / {num(span)} or {norm(increase)})"

    def counters(self) -> None:
        # Pods in view: with Triton's series, or their container's CPU (cAdvisor), which a
        # new pod shows before its models are loaded.
        refs = " or ".join(
            norm(metric)
            for metric in (
                "nv_inference_request_success",
                "nv_cpu_utilization",
                "container_cpu_usage_seconds_total",
            )
        )
        self.record(f"{PREFIX}:pod_seen", f"group by (namespace, pod) ({refs})")
        for c in WINDOW_COUNTERS:
            self.record(_rate(c), self.subject_rate(c))
        for c in SCRAPE_COUNTERS:
            self.record(_irate(c), self.subject_rate(c, scrape=True))
        compute = " + ".join(
            _rate(f"nv_inference_compute_{p}_duration_us") for p in ("input", "infer", "output")
        )
        self.record(f"{PREFIX}:compute_duration_us:rate", compute)
        compute_scrape = " + ".join(
            _irate(f"nv_inference_compute_{p}_duration_us") for p in ("input", "infer", "output")
        )
        self.record(f"{PREFIX}:compute_duration_us:irate", compute_scrape)

    # ---- 2. features ------------------------------------------------------------------
    def triton_features(self) -> None:
        w = self.w
        succ = _rate("nv_inference_request_success")
        comp = f"{PREFIX}:compute_duration_us:rate"
        self.feature("request_rate", succ)
        self.feature("inference_rate", _rate("nv_inference_count"))
        self.feature("exec_rate", _rate("nv_inference_exec_count"))
        self.feature("mean_latency_us", _per(_rate("nv_inference_request_duration_us"), succ))
        self.feature("mean_queue_us", _per(_rate("nv_inference_queue_duration_us"), succ))
        self.feature(
            "queue_share",
            _per(
                _rate("nv_inference_queue_duration_us"), _rate("nv_inference_request_duration_us")
            ),
        )
        for part in ("input", "infer", "output"):
            self.feature(
                f"compute_{part}_us", _per(_rate(f"nv_inference_compute_{part}_duration_us"), succ)
            )
        # Triton charges every request of a batch with the batch's compute: compute per request
        # is compute per execution (features.py).
        self.feature("compute_per_exec_us", _per(comp, succ))
        self.feature("input_share", _per(_rate("nv_inference_compute_input_duration_us"), comp))
        self.feature("output_share", _per(_rate("nv_inference_compute_output_duration_us"), comp))
        copy = (
            f"({_rate('nv_inference_compute_input_duration_us')} + "
            f"{_rate('nv_inference_compute_output_duration_us')})"
        )
        self.feature("copy_share", _per(copy, comp))
        self.feature("copy_us", _per(copy, succ))
        self.feature(
            "avg_batch", _per(_rate("nv_inference_count"), _rate("nv_inference_exec_count"))
        )
        self.feature("compute_per_inference_us", _per(_f("compute_per_exec_us"), _f("avg_batch")))
        self.feature("busy_instances", f"{_f('compute_per_exec_us')} / 1e6 * {_f('exec_rate')}")
        self.feature("client_batch", _per(_rate("nv_inference_count"), succ))
        pending = "nv_inference_pending_request_count"
        self.feature("pending", by_subject(pending))
        self.feature(
            "pending_change",
            f"{_f('pending')} - " + by_subject(f"{pending} offset {duration(w.window_s)}"),
        )
        for q, name in (("0.5", "p50_us"), ("0.99", "p99_us")):
            summary = by_subject(f'nv_inference_request_summary_us{{quantile="{q}"}}', "max")
            hist = self._histogram_quantile(
                q, "nv_inference_request_duration_histogram_us_bucket", 1.0
            )
            first = self._histogram_quantile(
                q, "nv_inference_first_response_histogram_ms_bucket", 1000.0
            )
            self.feature(name, f"{summary} or {hist} or {first}")
        self.feature(
            "queue_p99_us",
            by_subject('nv_inference_queue_summary_us{quantile="0.99"}', "max")
            + " or "
            + self._histogram_quantile(
                "0.99", "nv_inference_queue_duration_histogram_us_bucket", 1.0
            ),
        )
        fail = "nv_inference_request_failure"
        self.feature("failure_rate", self.subject_rate(fail))
        for reason in ("rejected", "canceled", "backend", "other"):
            # Triton exports the reasons it knows together: one absent while others are
            # present is zero, not unknown (features.py).
            sel = f'{fail}{{reason="{reason.upper()}"}}'
            self.feature(
                f"failure_{reason}", self.subject_rate(sel) + f" or 0 * {_f('failure_rate')}"
            )
        self.feature("load_duration_s", by_subject("nv_model_load_duration_secs", "max"))
        self.feature(
            "scrape_latency_us",
            _per(
                _irate("nv_inference_request_duration_us"), _irate("nv_inference_request_success")
            ),
        )
        self.feature(
            "scrape_queue_us",
            _per(_irate("nv_inference_queue_duration_us"), _irate("nv_inference_request_success")),
        )
        # Each scrape's queue share of request time, flagged where requests waited longer
        # than they computed: the no-baseline symptom reads how many of the newest did.
        self.feature(
            "scrape_queue_share",
            _per(
                _irate("nv_inference_queue_duration_us"), _irate("nv_inference_request_duration_us")
            ),
        )
        self.record(
            f"{series('scrape_queue_share')}:queued",
            known(f"{_f('scrape_queue_share')} > {num(QUEUED_SHARE)}"),
        )
        self.feature(
            "scrape_compute_per_exec_us",
            _per(f"{PREFIX}:compute_duration_us:irate", _irate("nv_inference_request_success")),
        )
        self.feature(
            "scrape_compute_infer_us",
            _per(
                _irate("nv_inference_compute_infer_duration_us"),
                _irate("nv_inference_request_success"),
            ),
        )
        # Per-request compute p99 over p50 of each summary series, then the subject's worst.
        self.feature(
            "compute_tail",
            by_subject(
                'nv_inference_compute_infer_summary_us{quantile="0.99"} / ignoring (quantile) '
                '(nv_inference_compute_infer_summary_us{quantile="0.5"} > 0)',
                "max",
            ),
        )

    def _histogram_quantile(self, q: str, bucket: str, scale: float) -> str:
        inner = (
            f"histogram_quantile({q}, sum by ({BY}, le) "
            f"({norm('rate(' + bucket + '[' + self.w.rate_range + '])')}))"
        )
        scaled = inner if scale == 1.0 else f"{num(scale)} * {inner}"
        # No observations in the window give NaN, which is unknown here.
        return f"({scaled} >= 0)"

    def exporter_features(self) -> None:
        gpu = (
            f"{by_pod('DCGM_FI_DEV_GPU_UTIL', 'max')} / 100 or "
            f"{by_pod('nv_gpu_utilization', 'max')}"
        )
        self.feature("gpu_util", to_subjects(gpu))
        self.feature("pcie_rx_bps", to_subjects(by_pod("DCGM_FI_PROF_PCIE_RX_BYTES")))
        self.feature("pcie_tx_bps", to_subjects(by_pod("DCGM_FI_PROF_PCIE_TX_BYTES")))
        self.feature("cpu_host_util", to_subjects(by_pod("nv_cpu_utilization", "max")))

        def containers(metric: str, *, rate: str = "") -> str:
            # cAdvisor also exports a pod-level aggregate (container="") and the pause container;
            # old cAdvisors name the container `container_name`.
            new = f'{metric}{{container!~"|POD"}}'
            old = f'{metric}{{container="", container_name!~"|POD"}}'
            if rate == "window":
                return f"{self.window_rate(new)} or {self.window_rate(old)}"
            if rate:
                # A ratio of one container's own counters: Prometheus' extrapolation cancels.
                rr = self.w.rate_range
                return f"rate({new}[{rr}]) or rate({old}[{rr}])"
            return f"{new} or {old}"

        cores = by_pod(containers("container_cpu_usage_seconds_total", rate="window"))
        self.feature("container_cpu_cores", to_subjects(cores))
        quota = by_pod(f"({containers('container_spec_cpu_quota')}) > 0")
        period = by_pod(containers("container_spec_cpu_period"), "max")
        self.feature(
            "cpu_quota_cores",
            to_subjects(
                f"{quota} / on (namespace, pod) ({period} or on (namespace, pod) (0 * {quota} + 100000))"
            ),
        )
        self.feature(
            "container_cpu_saturation",
            _per(_f("container_cpu_cores"), _f("cpu_quota_cores")),
        )
        throttled = by_pod(containers("container_cpu_cfs_throttled_periods_total", rate="ratio"))
        periods = by_pod(containers("container_cpu_cfs_periods_total", rate="ratio"))
        self.feature(
            "throttled_ratio", to_subjects(f"{throttled} / on (namespace, pod) ({periods} > 0)")
        )
        waiting = by_pod(containers("container_pressure_cpu_waiting_seconds_total", rate="window"))
        self.feature("cpu_waiting_share", to_subjects(waiting))
        self.feature("node_cpu_busy", to_subjects(self._node_busy()))
        self._ingress()

    def _node_busy(self) -> str:
        cpu = "node_cpu_seconds_total"
        idle = f'{cpu}{{mode=~"idle|iowait"}}'

        def busy(key: str, relabel: str = "") -> str:
            def wrap(sel: str) -> str:
                # A ratio of one node's own counters: Prometheus' extrapolation cancels.
                inner = f"rate({sel}[{self.w.rate_range}])"
                return relabel.replace("{}", inner) if relabel else inner

            return (
                f"clamp(1 - sum by ({key}) ({wrap(idle)}) / "
                f"(sum by ({key}) ({wrap(cpu)}) > 0), 0, 1)"
            )

        on_node = norm('kube_pod_info{node!=""}')
        on_host = norm('kube_pod_info{host_ip!=""}')
        via_node = (
            f"{busy('node')} * on (node) group_right () group by (namespace, pod, node) ({on_node})"
        )
        # node-exporter series without a `node` label carry the host in `instance`.
        host = 'label_replace({}, "host_ip", "$1", "instance", "(.+):[0-9]+")'
        via_host = (
            f"{busy('host_ip', host)} * on (host_ip) group_right () "
            f"group by (namespace, pod, host_ip) ({on_host})"
        )
        return f"max by (namespace, pod) ({via_node} or on (namespace, pod) {via_host})"

    def _ingress(self) -> None:
        metric = "nginx_ingress_controller_requests"

        def by_model(sel: str) -> str:
            # The model an ingress series serves (features.serves): its own `model` label, a
            # `/models/<m>` path, else an ingress or service named like the model.
            # A status series appears at its first request: counted from zero, as the series
            # store counts a counter born while its exporter was in view.
            ago = duration(self.w.window_s)
            born = (
                f"(({sel} unless {sel} offset {ago}) and on (instance) "
                f"group by (instance) ({metric} offset {ago}))"
            )
            e = f"({born} / {num(self.w.window_s)} or {self.window_rate(sel)})"
            e = f'label_replace({e}, "tg_model", "$1", "model", "(.+)")'
            e = f'label_replace({e}, "model", "$1", "service", "(.+)")'
            e = f'label_replace({e}, "model", "$1", "ingress", "(.+)")'
            e = f'label_replace({e}, "model", "$1", "path", ".*/models/([^/]+).*")'
            e = f'label_replace({e}, "model", "$1", "tg_model", "(.+)")'
            ns = f'label_replace({e}, "namespace", "$1", "exported_namespace", "(.+)")'
            return f"sum by (namespace, model) ({ns})"

        def expand(per_model: str) -> str:
            return f"({per_model}) * on (namespace, model) group_right () {SUBJECTS}"

        self.feature("ingress_rate", expand(by_model(metric)))
        timeouts = by_model(f'{metric}{{status=~"499|504|408"}}')
        # ingress-nginx adds a status series at its first request: none yet is zero. gRPC
        # reports failures in trailers, so a gRPC ingress's lack of timeouts says nothing.
        not_grpc = by_model(f'{metric}{{path!~"(?i).*grpc.*"}}')
        self.feature("ingress_timeout_rate", expand(f"{timeouts} or 0 * {not_grpc}"))
        self.feature("ingress_error_rate", expand(by_model(f'{metric}{{status=~"5.."}}')))

    # ---- 3. baselines -----------------------------------------------------------------
    def baselines(self) -> None:
        w = self.w
        hist = f"[{w.lookback}] offset {w.gap}"
        self.record(
            f"{PREFIX}:baseline_snapshots",
            f"count_over_time({series('request_rate')}:healthy{hist})",
        )
        enough = f"on ({BY}) ({PREFIX}:baseline_snapshots >= {w.min_snapshots})"
        for name in BASELINE_FEATURES:
            own = f"quantile_over_time(0.5, {series(name)}:healthy{hist}) and {enough}"
            self.record(_base(name), self._or_fleet(own))
        for name in SIGMA_FEATURES:
            own = (
                f"(quantile_over_time(0.75, {series(name)}:healthy{hist}) - "
                f"quantile_over_time(0.25, {series(name)}:healthy{hist})) / {IQR_PER_SIGMA} "
                f"and {enough}"
            )
            self.record(_sigma(name), self._or_fleet(own))

    @staticmethod
    def _or_fleet(own: str) -> str:
        """Return the subject's own value, else the median of the model's other pods' own values."""
        fleet = (
            f"quantile by (namespace, model) (0.5, {own}) "
            f"* on (namespace, model) group_right () {SUBJECTS}"
        )
        return f"({own}) or ({fleet})"

    def limits(self) -> None:
        t = self.t
        for name, floor in (
            ("mean_latency_us", t.shift_floor),
            ("p99_us", t.p99_floor),
            ("scrape_latency_us", t.shift_floor),
            ("scrape_queue_us", t.shift_floor),
        ):
            self.record(_limit(name), self._above(name, t.noise_k, floor))

    @staticmethod
    def _above(name: str, k: float, floor: float) -> str:
        """``Baseline.abnormal_above``: beyond the median by k sigma and by ``floor`` of it."""
        return f"{_base(name)} + " + either(
            f"{num(k)} * {_sigma(name)}", f"{num(floor - 1)} * {_base(name)}"
        )

    # ---- 4. births, symptom, recurrence, reload signs ---------------------------------
    def births(self) -> None:
        w, t = self.w, self.t
        iv = duration(w.interval_s)
        succ = "nv_inference_request_success"
        edge = f"{PREFIX}:birth_edge"
        # Series that started from zero since the previous scrape: new ones, and ones that
        # reset. Like the series store, a counter born from zero started after that scrape.
        started = f"{self._started(succ, iv)} or {norm(f'{succ} < {succ} offset {iv}')}"
        # A new pod (nothing of it in view before) is born at the scrape before its series
        # appeared, as the series store places it: once the stream has run past its grace,
        # and only if the first value fits a start from zero, which the next scrape tells.
        iv2 = duration(2 * w.interval_s)
        first = f"({succ} offset {iv} unless {succ} offset {iv2})"
        gained = f"clamp_min({succ} - {succ} offset {iv}, 0)"
        new_pod = (
            f"({norm(f'{first} <= {num(BIRTH_PLAUSIBLE_FACTOR)} * {gained}')} "
            f"unless on (namespace, pod) {self._pod_known(iv2)}) "
            f"and on () group({self._pod_known(duration(BIRTH_GRACE_S + w.interval_s))})"
        )
        self.record(
            edge,
            f"(time() - {num(w.interval_s)}) * {known(started)} "
            f"or (time() - {num(2 * w.interval_s)}) * {known(new_pod)}",
        )
        self.record(f"{PREFIX}:born_at", f"max_over_time({edge}[{duration(t.cold_age_s)}])")
        # births.first_served: a subject begins serving at the scrape before its counter
        # leaves zero, which for a pod Ready before its traffic is tens of seconds after its
        # series appeared; never before the birth. (The engine also reads a counter born
        # above zero as first serving when it next rises; here such a birth is its own start.)
        served_edge = f"{PREFIX}:served_edge"
        leaves_zero = norm(f"{succ} > 0 and {succ} offset {iv} == 0")
        self.record(served_edge, f"(time() - {num(w.interval_s)}) * {known(leaves_zero)}")
        served_at = f"{PREFIX}:served_at"
        self.record(
            served_at,
            either(f"max_over_time({served_edge}[{duration(t.cold_age_s)}])", f"{PREFIX}:born_at"),
        )
        age = f"(time() - {served_at})"
        self.record(f"{PREFIX}:in_birth", known(f"{age} <= {num(w.early_span_s)}"))
        # births.birth_of's early window: a span from the series' birth, and at least past
        # the first request's scrape; the first requests and their queueing in it, as
        # increments per scrape, kept so later evaluations of the birth can read them.
        early_end = either(
            f"{PREFIX}:born_at + {num(w.early_span_s)}",
            f"{served_at} + {num(max(30.0, w.interval_s))}",
        )
        in_early = f"({early_end} >= time())"
        early = f"* {num(w.interval_s)} and on ({BY}) {in_early}"
        for name, increase in (
            ("requests", _irate(succ)),
            ("queue_us", _irate("nv_inference_queue_duration_us")),
        ):
            self.record(f"{PREFIX}:early_{name}", f"{increase} {early}")
        # The slowest early execution is sought a whole span past the first request, as the
        # engine's per-scrape points are.
        self.record(
            f"{series('scrape_compute_per_exec_us')}:early",
            f"{_f('scrape_compute_per_exec_us')} and on ({BY}) ({age} <= {num(w.early_span_s)})",
        )
        self.record(
            f"{series('compute_tail')}:early", f"{_f('compute_tail')} and on ({BY}) {in_early}"
        )

    def shifting(self) -> None:
        # The freeze (derive.is_shifting): request time or compute per inference drifting
        # beyond the baseline's noise keeps the snapshot out of the baseline.
        parts = [
            f"{_f(name)} > {self._above_freeze(name)}"
            for name in ("scrape_latency_us", "compute_per_inference_us")
        ]
        self.record(f"{PREFIX}:shifting", known(" or ".join(parts)))

    def _above_freeze(self, name: str) -> str:
        t = self.t
        return (
            f"({_base(name)} + "
            + either(
                f"{num(t.freeze_k)} * {_sigma(name)}", f"{num(t.freeze_floor - 1)} * {_base(name)}"
            )
            + ")"
        )

    def symptom(self) -> None:
        t, w = self.t, self.w
        lat_base = _base("mean_latency_us")
        enough = f"{_f('request_rate')} * {num(w.window_s)} >= {num(t.min_requests)}"
        # symptoms._queued_now: more than half of the newest queue_scrapes, the newest among
        # them; and rate_window_s seen, as the engine's first request increase that far back.
        queued = f"{series('scrape_queue_share')}:queued"
        scrapes = queue_scrapes(t, w.interval_s)
        newest = duration(scrapes * w.interval_s - w.interval_s / 2)
        lasting_queue = (
            f"count_over_time({queued}[{newest}]) > {scrapes // 2} and on ({BY}) {queued}"
        )
        seen = t.rate_window_s - w.interval_s
        if seen > 0:
            lasting_queue += f" and on ({BY}) ({_f('request_rate')} offset {duration(seen)})"
        queue_bar = either(
            f"{num(t.noise_k)} * {_sigma('mean_queue_us')}",
            f"{num(t.shift_floor - 1)} * {lat_base}",
        )
        gated = " or ".join(
            (
                f"{_f('mean_latency_us')} > {_limit('mean_latency_us')}",
                f"{_f('p99_us')} > {_limit('p99_us')}",
                f"({_f('mean_queue_us')} - {_base('mean_queue_us')}) > {queue_bar} "
                f"and on ({BY}) ({lat_base} > 0)",
                # Without a healthy history, requests that wait longer than they compute,
                # over a whole window seen and in most of its newest scrapes
                # (symptoms.symptom_of): a start-up burst of queueing that passed is none.
                f"({_f('queue_share')} > {num(QUEUED_SHARE)} and on ({BY}) ({lasting_queue}))"
                f" unless on ({BY}) {lat_base}",
            )
        )
        parts = [f"({gated}) and on ({BY}) ({enough})"]
        if t.slo_p99_us is not None:
            parts.append(f"{_f('p99_us')} > {num(t.slo_p99_us)}")
        if t.slo_mean_us is not None:
            parts.append(f"{_f('mean_latency_us')} > {num(t.slo_mean_us)}")
        self.record(f"{PREFIX}:symptom", known(" or ".join(f"({p})" for p in parts)))
        tercile = f"quantile_over_time({num(1 / 3)}, {_f('scrape_latency_us')}[{w.points_range}])"
        self.record(
            f"{PREFIX}:symptom_sustained",
            known(
                f"({PREFIX}:symptom and on ({BY}) ({tercile} >= {num(t.sustained_ratio)} * {lat_base})) "
                f"or ({PREFIX}:symptom unless on ({BY}) ({lat_base} and on ({BY}) {tercile}))"
            ),
        )

    def abnormal_scrapes(self) -> None:
        """Flag each scrape beyond the baseline's per-scrape noise, judged when it arrives.

        The engine judges a window's scrapes against the baseline of now; these flags use the
        baseline of each scrape's own time, which the freeze keeps still through a shift.
        """
        for name in ("scrape_latency_us", "scrape_queue_us"):
            self.record(f"{series(name)}:abnormal", known(f"{_f(name)} > {_limit(name)}"))

    def before_shift(self) -> None:
        """Record the window before the shift began (``derive._before``), for node_contention.

        ``derive.shift_start`` walks back from the newest scrape to the last run of
        ``fast_scrapes`` scrapes whose compute per inference stayed under ``compute_inflation``
        of the baseline; the window before the shift is the one ending at that run's last
        scrape. Here each evaluation that ends such a run is calm, and the window before is
        the newest calm evaluation's, within the period lookback, while the newest is not
        calm (no shift, no window before it). As in the engine, a window before that already
        held the inflation (contention that builds up slowly) is none. The host's
        ``nv_cpu_utilization`` is read at that window's end only, where the engine takes the
        lower of its two ends: the rules call the host busy before the shift a little more
        often, which makes them quieter, not louder.
        """
        t, w = self.t, self.w
        per_inference = "scrape_compute_per_inference_us"
        batch = _per(_irate("nv_inference_count"), _irate("nv_inference_exec_count"))
        self.feature(per_inference, _per(_f("scrape_compute_per_exec_us"), f"({batch})"))
        inflated = f"{series(per_inference)}:inflated"
        self.record(
            inflated,
            known(
                f"{_f(per_inference)} > {num(t.compute_inflation)} * "
                f"{_base('compute_per_inference_us')}"
            ),
        )
        newest = w.newest_range
        calm = f"{PREFIX}:calm"
        self.record(
            calm,
            f"{known(_f(per_inference))} unless on ({BY}) "
            f"(count_over_time({inflated}[{newest}]) > 0)",
        )
        lookback = duration(t.period_lookback_s)
        healthy_then = (
            f"(last_over_time({series('compute_per_inference_us')}:calm[{lookback}]) < "
            f"{num(t.compute_inflation)} * {_base('compute_per_inference_us')})"
        )
        for name in BEFORE_SHIFT:
            self.record(f"{series(name)}:calm", f"{_f(name)} and on ({BY}) {calm}")
        for name in BEFORE_SHIFT[1:]:
            self.record(
                _before(name),
                f"last_over_time({series(name)}:calm[{lookback}]) unless on ({BY}) {calm} "
                f"and on ({BY}) {healthy_then}",
            )

    def steadiness(self) -> None:
        w = self.w
        pts = w.points_range
        queue = _f("scrape_queue_us")
        flags = f"{series('scrape_queue_us')}:abnormal"
        since = f"{series('scrape_queue_us')}:since_shift"
        # derive.since_shift: the window's per-scrape queue from its first abnormal scrape on;
        # the whole window when none is abnormal or there is no baseline to tell.
        self.record(since, f"{queue} and on ({BY}) max_over_time({flags}[{pts}])")
        shifted = (
            f"on ({BY}) ({_limit('scrape_queue_us')} and on ({BY}) max_over_time({flags}[{pts}]))"
        )

        def steadiness(points: str) -> str:
            return (
                f"min_over_time({points}[{pts}]) / (quantile_over_time(0.5, {points}[{pts}]) > 0) "
                f"and on ({BY}) (count_over_time({points}[{pts}]) >= 3)"
            )

        # batching_delay.past_the_onset: the shift's scrapes after its first, which straddles
        # the onset when it is the lowest of them; two of them left are judged as a pair
        # (the lower over the higher), as the engine's pair of the shift's own scrapes.
        after = f"{series('scrape_queue_us')}:since_shift_after"
        self.record(after, f"{since} and on ({BY}) ({since} offset {duration(w.interval_s)})")
        straddled = (
            f"on ({BY}) ((count_over_time({after}[{pts}]) >= 2) and on ({BY}) "
            f"(min_over_time({since}[{pts}]) < on ({BY}) min_over_time({after}[{pts}])))"
        )
        pair = (
            f"min_over_time({after}[{pts}]) / (max_over_time({after}[{pts}]) > 0) "
            f"and on ({BY}) (count_over_time({after}[{pts}]) == 2)"
        )
        self.record(
            f"{PREFIX}:queue_steadiness",
            f"((({steadiness(after)}) or ({pair})) and {straddled} and {shifted}) "
            f"or (({steadiness(since)} and {shifted}) unless {straddled}) "
            f"or ({steadiness(queue)} unless {shifted})",
        )

    def fast_symptom(self) -> None:
        """``symptoms.fast_symptom``: most of the newest scrapes beyond the baseline's noise.

        Only where the short window is shorter than the full one. Unlike the engine, the
        signatures then still read the full window's features, but for batching_delay's idle
        instances (``_idle_on_the_fast_path``); the short window changes only the symptom
        they need.
        """
        t, w = self.t, self.w
        if not w.has_fast_path:
            return
        newest = w.newest_range
        parts = []
        for name in ("scrape_latency_us", "scrape_queue_us"):
            flags = f"{series(name)}:abnormal"
            parts.append(
                f"(count_over_time({flags}[{newest}]) >= {t.fast_abnormal} and on ({BY}) {flags} "
                f"and on ({BY}) (count_over_time({_f(name)}[{newest}]) >= {t.fast_scrapes}) "
                f"and on ({BY}) ({_base(name)} > 0))"
            )
        requests = (
            f"sum_over_time({_irate('nv_inference_request_success')}[{newest}]) "
            f"* {num(w.interval_s)} >= {num(t.min_requests)}"
        )
        self.record(
            f"{PREFIX}:symptom_fast", known(f"({' or '.join(parts)}) and on ({BY}) ({requests})")
        )
        # The short window's busy instances, which the engine's fast path reads where the
        # full window still mixes in the healthy scrapes before the onset: a backlog that
        # filled the instances at the onset reads half busy on the full window.
        scrape_busy = f"{series('busy_instances')}:scrape"
        self.record(
            scrape_busy,
            f"{_f('scrape_compute_per_exec_us')} / 1e6 * {_irate('nv_inference_exec_count')}",
        )
        self.record(f"{series('busy_instances')}:newest", f"avg_over_time({scrape_busy}[{newest}])")

    def recurrence(self) -> None:
        t, w = self.t, self.w
        iv = w.interval_s
        points, period = w.period_points, w.period_events
        typical = f"quantile_over_time(0.5, {_f('scrape_latency_us')}[{points}])"
        spike = f"{PREFIX}:latency_spike"
        high = known(f"{_f('scrape_latency_us')} >= {num(t.spike_factor)} * {typical}")
        self.record(spike, f"time() * {high}")
        onset = f"{PREFIX}:spike_onset"
        self.record(onset, self._onsets(spike))
        gap = f"{PREFIX}:spike_gap"
        self.record(
            gap, f"{onset} - on ({BY}) max_over_time({onset}[{period}] offset {duration(iv)})"
        )
        gaps = f"{gap}[{period}]"
        mid = f"quantile_over_time(0.5, {gaps})"
        cv = num(t.period_max_cv)
        # recurrence.regularity: every spacing within period_max_cv of the median spacing.
        self.record(
            f"{PREFIX}:periodic",
            known(
                f"count_over_time({onset}[{period}]) >= {t.period_min_spikes} and on ({BY}) "
                f"((max_over_time({gaps}) - {mid}) / ({mid} > 0) <= {cv}) and on ({BY}) "
                f"(({mid} - min_over_time({gaps})) / ({mid} > 0) <= {cv})"
            ),
        )

    def _onsets(self, marks: str) -> str:
        """Return the marks (valued by their time) more than ``merge_s`` after the previous one."""
        w = self.w
        # Marks sit on the scrape grid: the previous ones that merge are 1..k scrapes back. The
        # range reaches half a scrape past the k-th, so neither scrape jitter nor whether a
        # range includes its left end (Prometheus 2 does, 3 does not) moves the boundary.
        k = max(1, math.floor(w.merge_s / w.interval_s + 1e-9))
        back = duration((k - 1) * w.interval_s + w.interval_s / 2)
        return f"{marks} unless on ({BY}) max_over_time({marks}[{back}] offset {duration(w.interval_s)})"

    def reload_signs(self) -> None:
        t, w = self.t, self.w
        iv = duration(w.interval_s)
        points, period = w.period_points, w.period_events
        succ = "nv_inference_request_success"
        # A reset a container restart explains is the pod restarting, not a reload. The
        # restart count may arrive a scrape or two after the reset, so resets are judged two
        # scrapes late, against restarts around them.
        late = duration(2 * w.interval_s)
        earlier = duration(3 * w.interval_s)
        restarts = by_pod(
            f"increase(kube_pod_container_status_restarts_total[{duration(4.5 * w.interval_s)}]) > 0"
        )
        dropped = norm(f"{succ} offset {late} < {succ} offset {earlier}")
        resets = f"{dropped} unless on (namespace, pod) {restarts}"
        seen = norm(f"last_over_time({succ}[{period}])")
        versions = f"count by ({BY}) (count by ({BY}, version) ({seen})) > 1"
        new_version = f"{self._started(succ, iv)} and on ({BY}) ({versions})"
        load = "nv_model_load_duration_secs"
        load_changed = norm(f"{load} != {load} offset {iv}")
        cold = f"{PREFIX}:cold_scrape"
        per_exec = _f("scrape_compute_per_exec_us")
        cold_cond = (
            f"{per_exec} >= {num(t.reload_burst_compute)} * quantile_over_time(0.5, {per_exec}[{points}]) "
            f"and on ({BY}) {_f('scrape_latency_us')} >= {num(t.spike_factor)} * "
            f"quantile_over_time(0.5, {_f('scrape_latency_us')}[{points}])"
        )
        self.record(cold, f"{known(cold_cond)} or 0 * {SUBJECTS}")
        # A burst must strike a model serving below the spike bar: a cold scrape whose
        # scrape before was under the bar, or carries on a burst that began so. On latency
        # already up (a batcher's delay, a backlog) a compute stall is no reload.
        floored = f"{PREFIX}:cold_floored"
        lat = _f("scrape_latency_us")
        under = (
            f"{lat} offset {iv} < {num(t.spike_factor)} * "
            f"quantile_over_time(0.5, {lat}[{points}] offset {iv})"
        )
        self.record(
            floored,
            f"{known(f'{cold} == 1 and on ({BY}) ({under} or {floored} offset {iv} == 1)')}"
            f" or 0 * {SUBJECTS}",
        )
        # A burst of cold executions counts once it is over, only if it was short and the
        # scrape after it is warm: cold executions end in a warm model, contention lasts
        # until it is removed. (The engine also judges warm against the baseline's compute;
        # here the lookback's median stands for it.)
        burst_range = duration(t.reload_burst_max_s + 1.5 * w.interval_s)
        warm = (
            f"{per_exec} <= {num(t.reload_warm_after)} * "
            f"quantile_over_time(0.5, {per_exec}[{points}])"
        )
        burst_end = (
            f"{cold} == 0 and on ({BY}) ({floored} offset {iv} == 1) and on ({BY}) "
            f"(min_over_time({cold}[{burst_range}] offset {iv}) == 0) and on ({BY}) ({warm})"
        )
        # A new model's first executions are its cold start, not a reload of a serving one.
        # On a node with no CPU to spare they are the scheduler's stalls (the engine judges
        # the burst's own scrape; here the window's node busy share, which vetoes less).
        # Triton's host gauge only where node-exporter is absent, as in the engine.
        stalled = (
            f"{_f('node_cpu_busy')} >= {num(t.stall_node_busy)} or "
            f"({_f('cpu_host_util')} >= {num(t.stall_node_busy)} "
            f"unless on ({BY}) {_f('node_cpu_busy')})"
        )
        burst_end = f"({burst_end}) unless on ({BY}) ({PREFIX}:born_at or {stalled})"
        sign = f"{PREFIX}:reload_sign"
        signs = known(f"{resets} or {new_version} or {load_changed} or {burst_end}")
        self.record(sign, f"time() * {signs}")
        self.record(f"{PREFIX}:reload_onset", self._onsets(sign))
        tail = f"{PREFIX}:cold_tail"
        if w.interval_s >= t.burst_merge_s:
            # Where one reload fits in about one scrape, the summary tells a few very slow
            # executions (a reload's) from all executions slower (contention).
            p50 = by_subject('nv_inference_compute_infer_summary_us{quantile="0.5"}')
            p99 = by_subject('nv_inference_compute_infer_summary_us{quantile="0.99"}')
            mean = _f("scrape_compute_infer_us")
            cond = (
                f"{mean} >= {num(t.tail_mean_over_p50)} * {p50} and on ({BY}) "
                f"{p99} >= {num(t.tail_p99_over_mean)} * {mean}"
            )
            self.record(
                tail,
                f"(time() * {known(cond)}) unless on ({BY}) ({PREFIX}:born_at or {stalled})",
            )
        signed = f"{PREFIX}:reloads_signed"
        self.record(signed, zero_if_absent(f"count_over_time({PREFIX}:reload_onset[{period}])"))
        tails = zero_if_absent(f"count_over_time({tail}[{period}])")
        # n scrapes with cold executions in the tail are n - 1 reloads (one may spill over).
        self.record(f"{PREFIX}:reloads", f"{signed} >= ({tails} - 1) or ({tails} - 1)")
        self.record(
            f"{PREFIX}:recent_reload_sign",
            known(
                f"max_over_time({sign}[{duration(2 * w.window_s)}]) or "
                f"max_over_time({tail}[{duration(2 * w.window_s)}])"
            ),
        )

    def arrivals(self) -> None:
        t, w = self.t, self.w
        served = _f("request_rate")
        self.record(
            f"{PREFIX}:arrivals",
            f"{served} + {zero_if_absent(_f('failure_rate'))} + "
            f"clamp_min({zero_if_absent(_f('pending_change'))}, 0) / {num(w.window_s)}",
        )
        arr = f"{PREFIX}:arrivals"
        self.record(
            f"{PREFIX}:amplified",
            known(
                f"{_per(arr, served)} >= {num(t.amplified_arrivals)} and on ({BY}) "
                f"({arr} / ({_base('request_rate')} > 0) >= {num(t.amplified_arrivals)}) "
                f"and on ({BY}) ({_per(_f('pending'), served)} >= {num(t.abandoned_backlog_s)})"
            ),
        )

    # ---- 5. confidences ---------------------------------------------------------------
    def confidences(self) -> None:
        for cause in CAUSES:
            gate, score = getattr(self, f"_{cause}")()
            self.record(
                f"{PREFIX}:cause_confidence",
                f"clamp(0 * {known(gate)} + {score}, 0, 0.97)",
                {"cause": cause},
            )

    def _batching_delay(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        steady = f"{PREFIX}:queue_steadiness"
        gate = (
            f"{sust} and on ({BY}) ({f('queue_share')} >= {num(t.queue_share_high)}) "
            f"and on ({BY}) ({f('busy_instances')} < {num(t.busy_idle)}) "
            f"{self._idle_on_the_fast_path()}"
            # A growing backlog is not a batcher waiting.
            f"unless on ({BY}) ({f('pending_change')} > 4 * clamp_min({f('pending')}, 1) "
            f"and on ({BY}) {f('busy_instances')} > 0) "
            # Requests wait behind slower executions (reloads, contention), not a timer. Per
            # inference, as the engine reads it: the batches a longer delay fills cost more an
            # execution without any inference costing more.
            f"unless on ({BY}) ({_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}) "
            # Queueing in bursts (reloads, spikes) is not a batcher's steady wait.
            f"unless on ({BY}) ({steady} < {num(t.batching_steady)})"
        )
        score = score_of(
            0.45,
            (0.15, steady),
            (0.05, f"{f('p99_us')} / ({f('p50_us')} > 0) >= 3"),
            (0.05, f"{f('queue_share')} >= 0.6"),
        )
        return gate, score

    def _idle_on_the_fast_path(self) -> str:
        """Return batching_delay's veto on the fast path: instances busy in the newest scrapes.

        Read on the fast path alone, its instances must be idle in the newest scrapes too, as
        the engine reads them there: a batcher leaves them idle in every scrape. Nothing
        where there is no fast path (the short window is no shorter than the full one).
        """
        t, w = self.t, self.w
        if not w.has_fast_path:
            return ""
        return (
            f"unless on ({BY}) (({series('busy_instances')}:newest >= {num(t.busy_idle)}) "
            f"unless on ({BY}) {PREFIX}:symptom_sustained) "
        )

    def _too_few_instances(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        busy, th = f("busy_instances"), num(t.busy_saturated)
        frac = f"({busy} - floor({busy}))"
        # Saturated near a whole number of instances (the count is unknown to Prometheus).
        saturated = f"{busy} >= {th} and on ({BY}) ({frac} <= {num(1 - t.busy_saturated)} or {frac} >= {th})"
        inflation = _ratio("compute_per_inference_us")
        gate = (
            f"{sust} and on ({BY}) ({f('queue_share')} >= {num(t.queue_share_high)}) "
            f"and on ({BY}) ({saturated}) "
            f"unless on ({BY}) ({inflation} >= {num(t.compute_inflation)})"
        )
        timeouts = f"({zero_if_absent(f('failure_canceled'))} + {zero_if_absent(f('ingress_timeout_rate'))})"
        storm = (
            f"{_per(timeouts, f('request_rate'))} >= {num(t.timeout_failure_share)} "
            f"or ({PREFIX}:amplified unless on ({BY}) {f('ingress_rate')})"
        )
        score = score_of(
            0.6,
            (0.05, inflation),
            (0.1, f"{f('pending')} >= {busy} or {f('pending_change')} > 0"),
            (0.1, f"{f('gpu_util')} < {num(t.gpu_saturated)}"),
            (-0.1, f"{f('gpu_util')} >= {num(t.gpu_saturated)}"),
            (0.1, f"{_ratio('request_rate')} >= {num(t.load_increase)}"),
            # Timeouts and retries point at a storm amplifying the load.
            (-0.15, storm),
        )
        return gate, score

    def _too_many_instances(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        busy_up = _ratio("busy_instances", 0.05)
        gate = (
            f"{sust} and on ({BY}) ({f('busy_instances')} >= 1.3) "
            f"and on ({BY}) ({_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}) "
            # The accelerator is not what they fight over.
            f"unless on ({BY}) ({f('gpu_util')} < {num(t.gpu_underused)}) "
            # Requests wait longer for the same instances: the work got slower under them.
            f"unless on ({BY}) ({f('queue_share')} > {_base('queue_share')} * "
            f"{num(t.shift_floor)} and on ({BY}) {f('queue_share')} > {_base('queue_share')} + "
            f"{num(t.contention_queue_slack)})"
        )
        score = score_of(
            0.55,
            (0.15, f"{busy_up} >= 1.5"),
            (0.1, f"{_ratio('inference_rate')} <= {num(t.load_increase)}"),
            (0.15, f"{f('gpu_util')} >= {num(t.gpu_saturated)}"),
            # The CPU, not the accelerator, may be the contended resource.
            (-0.15, f"{f('container_cpu_saturation')} >= {num(t.cpu_saturated)}"),
            (
                -0.2,
                f"{f('node_cpu_busy')} >= {num(t.cpu_saturated)} and on ({BY}) ({busy_up} < 1.2)",
            ),
        )
        return gate, score

    def _cold_start(self) -> tuple[str, str]:
        t = self.t
        cold_age = duration(t.cold_age_s)
        peak = f"max_over_time({series('scrape_compute_per_exec_us')}:early[{cold_age}])"
        latest = _f("scrape_compute_per_exec_us")
        # A warm execution: the model's own (its last version's, or its other pods') compute
        # per execution, else the latest scrape, which is warm once the warm-up is over.
        warm = f"({_base('compute_per_exec_us')} > 0 or {latest})"
        slow_first = (
            f"{peak} / clamp_min({latest}, 1) >= {num(t.cold_compute_ratio)} or "
            f"{peak} / clamp_min({warm}, 1) >= {num(t.cold_compute_ratio)} or "
            f"max_over_time({series('compute_tail')}:early[{cold_age}]) >= {num(t.cold_tail_ratio)}"
        )
        q_early = f"sum_over_time({PREFIX}:early_queue_us[{cold_age}])"
        n_early = f"sum_over_time({PREFIX}:early_requests[{cold_age}])"
        early_queue = _per(q_early, n_early)
        usual = zero_if_absent(_base("mean_queue_us"))
        # Slower than the reference but alike from the first execution to the latest, with
        # no cold executions in the compute summary: heavier code, not a warm-up (the engine's
        # cold_start holds then). Without the summary only the decay can show a warm-up.
        heavier = (
            f"({peak} / clamp_min({latest}, 1) < {num(t.cold_compute_ratio)}) unless on ({BY}) "
            f"(max_over_time({series('compute_tail')}:early[{cold_age}]) >= {num(t.cold_tail_ratio)})"
        )
        gate = (
            f"{PREFIX}:born_at and on ({BY}) ({slow_first}) "
            f"and on ({BY}) ({early_queue} >= {usual} + {num(t.cold_queue_execs)} * {warm}) "
            f"unless on ({BY}) ({heavier})"
        )
        return gate, "0.7"

    def _cpu_bottleneck(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        own = f"{f('container_cpu_saturation')} >= {num(t.cpu_saturated)}"
        throttled = f"{f('throttled_ratio')} >= {num(t.throttled_high)}"
        host = f"{f('cpu_host_util')} >= {num(t.cpu_saturated)}"
        load = _ratio("request_rate")
        grew = f"{load} >= {num(t.load_increase)}"
        own_cpu = _ratio("container_cpu_cores", 0.01)
        own_or_throttled = f"({own} or {throttled})"
        # Triton uses less CPU than before at the same load: a neighbour took it.
        branch_own = (
            f"{own_or_throttled} unless on ({BY}) (({own_cpu} < 0.85) unless on ({BY}) ({grew}))"
        )
        # Only the host is busy: Triton's doing when its load grew and the host was not
        # saturated before it did, or latency followed the load up on the pinned host (compute
        # per inference inflated, Triton's CPU grown with its load where cAdvisor shows it).
        # The engine also leaves a newborn's slow first executions to cold_start.
        pinned = (
            f"({_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}) "
            f"unless on ({BY}) ({own_cpu} * {num(t.shift_floor)} < {load})"
        )
        branch_host = (
            f"({host}) and on ({BY}) ({grew}) "
            f"unless on ({BY}) (({_base('cpu_host_util')} >= {num(t.cpu_saturated)}) "
            f"unless on ({BY}) ({pinned})) "
            f"unless on ({BY}) {own_or_throttled}"
        )
        gate = (
            f"{sust} and on ({BY}) ({known(branch_own)} or {known(branch_host)}) "
            f"unless on ({BY}) ({f('gpu_util')} >= {num(t.gpu_saturated)})"
        )
        score = score_of(
            0.55,
            (0.1, own),
            (0.15, throttled),
            (0.1, f"{f('gpu_util')} <= {num(t.gpu_underused)}"),
            (0.1, grew),
            (0.05, f"{_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}"),
        )
        return gate, score

    def _copies_multiplied(self) -> str:
        """Return the condition that the copy share of compute multiplied since the baseline."""
        floor = f"{num(MIN_GROWN_SHARE)} * {SUBJECTS}"
        grown = f"{num(self.t.copy_share_growth)} * {_base('copy_share')}"
        return f"{_f('copy_share')} >= {either(floor, grown)}"

    def _memory_copy(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        share = f("copy_share")
        base_share = _base("copy_share")
        rise = f"({f('mean_latency_us')} - {_base('mean_latency_us')})"
        explains = f"({f('copy_us')} - {_base('copy_us')}) / ({rise} > 0)"
        large = (
            f"{share} >= {num(t.input_share_high)} and on ({BY}) "
            f"(({share} unless on ({BY}) {base_share}) or {share} >= {base_share} + 0.1 "
            f"or {share} >= 1.5 * {base_share})"
        )
        grown = f"{self._copies_multiplied()} and on ({BY}) ({explains} >= {num(t.copy_explains)})"
        bytes_up = (
            f"({_per(f('pcie_rx_bps'), f('inference_rate'))}) / "
            f"({_per(_base('pcie_rx_bps'), _base('inference_rate'))} > 0)"
        )
        heavier = (
            f"{bytes_up} >= {num(t.copy_share_growth)} and on ({BY}) "
            f"({_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}) and on ({BY}) "
            f"({f('input_share')} >= 2 * ({_base('input_share')} or 1 * {SUBJECTS}))"
        )
        gate = (
            f"{sust} and on ({BY}) {f('input_share')} and on ({BY}) {f('output_share')} "
            f"and on ({BY}) ({known(large)} or {known(grown)} or {known(heavier)}) "
            # Copies may be slow because the CPU is starved: cpu_bottleneck owns that.
            f"unless on ({BY}) ({f('container_cpu_saturation')} >= 0.95)"
        )
        score = score_of(
            0.6,
            (0.1, base_share),
            (0.1, f"{explains} >= {num(t.copy_explains)}"),
            (0.1, f"{bytes_up} >= {num(t.copy_share_growth)}"),
            (0.1, f"{_ratio('pcie_rx_bps', 1.0)} >= 1.5"),
            (0.1, f"{_ratio('pcie_tx_bps', 1.0)} >= 1.5"),
            (0.05, f"{f('container_cpu_saturation')} < {num(t.cpu_saturated)}"),
        )
        return gate, score

    def _model_reload(self) -> tuple[str, str]:
        t = self.t
        periodic = f"{PREFIX}:periodic"
        reloads = f"{PREFIX}:reloads"
        load = _ratio("request_rate")
        swing = 2 * t.load_steady_tolerance
        gate = (
            f"({periodic} or ({reloads} >= {t.reload_min_events} and on ({BY}) {SYMPTOM})) "
            # Traffic swings explain latency better than reloads.
            f"unless on ({BY}) ({load} > {num(1 + swing)} or {load} < {num(1 - swing)})"
        )
        steady = (
            f"{load} <= {num(1 + t.load_steady_tolerance)} and on ({BY}) "
            f"({load} >= {num(1 - t.load_steady_tolerance)})"
        )
        score = score_of(
            f"0.5 + 0.1 * clamp_max({zero_if_absent(reloads)}, 3)",
            (0.2, periodic),
            (0.05, steady),
            (0.05, SYMPTOM),
        )
        return gate, score

    def _node_contention(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        load = _ratio("request_rate")
        conc = _ratio("busy_instances", 0.05)
        exec_time = _ratio("compute_per_exec_us")
        own_cpu = _ratio("container_cpu_cores", 0.01)
        # Triton's threads wait for a CPU more than when healthy and than before the shift
        # (waited_more): other work on a node whose busy share cannot show it (already full).
        wait = f("cpu_waiting_share")
        waited = _each_known(
            wait,
            (_base("cpu_waiting_share"), _before("cpu_waiting_share")),
            lambda ref: (
                f"{wait} - {ref} >= {num(t.cpu_wait_rise)} and on ({BY}) "
                f"{wait} >= {num(t.shift_floor)} * {ref}"
            ),
        )
        # Less load is no cause of slower work, but a fall has causes of its own that slow it
        # (smaller batches, traffic moved to a warming pod): a fall needs each execution
        # itself slower and Triton's threads seen waiting for a CPU.
        fell_starved = f"({waited}) and on ({BY}) ({exec_time} >= {num(t.compute_inflation)})"
        gate = (
            f"{sust} and on ({BY}) ({_ratio('compute_per_inference_us')} >= {num(t.compute_inflation)}) "
            f"and on ({BY}) ({load} <= {num(1 + t.load_steady_tolerance)}) "
            f"and on ({BY}) ({load} >= {num(1 - t.load_steady_tolerance)} or {fell_starved}) "
            # More executions in flight than slower work explains: a concurrency change.
            f"unless on ({BY}) ({conc} > {num(1 + t.load_steady_tolerance)} * {exec_time}) "
            # The copies' share multiplied while Triton's own CPU is not known steady: this
            # model's copies grew (memory_copy).
            f"unless on ({BY}) (({self._copies_multiplied()}) unless on ({BY}) "
            f"({own_cpu} <= {num(t.contention_own_cpu)})) "
            # The config or version just changed: not the same workload.
            f"unless on ({BY}) {PREFIX}:recent_reload_sign "
            # Requests wait less while executions got slower: more instances serve them
            # (too_many_instances). The window's mean; the engine reads the shift's own scrapes.
            f"unless on ({BY}) ({f('mean_queue_us')} * {num(t.shift_floor)} < "
            f"{_base('mean_queue_us')} and on ({BY}) ({_base('mean_queue_us')} - "
            f"{f('mean_queue_us')} >= {num(t.contention_queue_slack)} * {_base('mean_latency_us')}))"
        )
        node = f("node_cpu_busy")
        own = _ratio("container_cpu_cores", 0.01)
        rise = num(t.node_cpu_rise)
        # node_contention.busier: busier than when healthy, both over the baseline and in the
        # window before the shift began; a node saturated in either explains nothing that
        # changed (a packed node, a busy machine before the onset).
        sat = num(t.cpu_saturated)

        def busier(now: str, name: str, reach: bool) -> str:
            refs = (_base(name), _before(name))
            risen = _each_known(now, refs, lambda ref: f"{now} - {ref} >= {rise}")
            if reach:
                risen = f"{now} >= {sat} or ({risen})"
            return f"({risen}) " + " ".join(f"unless on ({BY}) ({r} >= {sat})" for r in refs)

        up = f"(({busier(node, 'node_cpu_busy', True)}) or ({waited}))"
        host_up = (
            f"({busier(f('cpu_host_util'), 'cpu_host_util', False)}) "
            f"unless on ({BY}) ({node} or ({waited}))"
        )
        # Triton's own CPU up by more than the load moves it: the node's rise is Triton's
        # own work (a model loading, a neighbour model), no sign of other work.
        own_work = f"{own} > {num(1 + t.load_steady_tolerance)}"
        score = score_of(
            0.4,
            (0.25, f"{up} unless on ({BY}) ({own_work})"),
            # The node got busier but not because of Triton.
            (
                0.1,
                f"{up} and on ({BY}) (({SUBJECTS} unless on ({BY}) {own}) "
                f"or {own} <= {num(t.contention_own_cpu)})",
            ),
            (-0.15, f"{node} unless on ({BY}) {up}"),
            (0.2, f"({host_up}) unless on ({BY}) ({own_work})"),
            (0.1, f"{f('throttled_ratio')} >= {num(t.throttled_high)}"),
        )
        return gate, score

    def _retry_storm(self) -> tuple[str, str]:
        t = self.t
        sust, f = SUSTAINED, _f
        offered = f"({f('request_rate')} + {zero_if_absent(f('failure_rate'))})"
        triton = f"{_per(f('failure_canceled'), offered)} >= {num(t.timeout_failure_share)}"
        ingress = f"{_per(f('ingress_timeout_rate'), f('ingress_rate'))} >= {num(t.timeout_failure_share)}"
        counted = f"({triton} or {ingress})"
        # The ingress is the authority on client timeouts: with its counters in view and no
        # timeouts there, amplification alone is a surge, not a storm.
        inferred = f"{PREFIX}:amplified unless on ({BY}) {f('ingress_rate')}"
        gate = f"{sust} and on ({BY}) ({known(counted)} or {known(inferred)})"
        busy = f"clamp_min(({f('busy_instances')} or 1 * {SUBJECTS}), 1)"
        score = score_of(
            0.6,
            (
                0.15,
                f"{PREFIX}:arrivals / ({_base('request_rate')} > 0) >= {num(t.retry_rate_increase)}",
            ),
            (0.1, f"{_ratio('ingress_rate')} >= {num(t.retry_rate_increase)}"),
            (0.1, f"{f('pending')} >= {num(t.pending_explosion)} * {busy}"),
        )
        return gate, score

    # ---- 6. alerts --------------------------------------------------------------------
    def alerts(self) -> None:
        t, w = self.t, self.w
        conf = f"{PREFIX}:cause_confidence"
        for i, cause in enumerate(CAUSES):
            mine = f'{conf}{{cause="{cause}"}}'
            opening = f"{mine} >= {num(t.open_confidence)}"
            # The engine opens the most confident cause; a tie goes to the cause earlier in
            # the catalogue (incidents._rank).
            earlier, later = CAUSES[:i], CAUSES[i + 1 :]
            if earlier:
                rivals = "|".join(earlier)
                opening += (
                    f' unless on ({BY}) ({conf}{{cause=~"{rivals}"}} >= {num(t.open_confidence)} '
                    f">= on ({BY}) group_left () {mine})"
                )
            if later:
                rivals = "|".join(later)
                opening += (
                    f' unless on ({BY}) ({conf}{{cause=~"{rivals}"}} >= {num(t.open_confidence)} '
                    f"> on ({BY}) group_left () {mine})"
                )
            # An open incident holds while its finding stays above close_confidence.
            holding = (
                f"{mine} >= {num(t.close_confidence)} and on ({BY}) "
                f'ALERTS{{alertname="{alert_name(cause)}", alertstate="firing"}}'
            )
            opening, for_s = self._held(cause, opening)
            text = CAUSE_TEXT[cause]
            annotations = {
                "summary": (
                    "{{ $labels.model }} on {{ $labels.namespace }}/{{ $labels.pod }}: "
                    f"{text.title}"
                ),
                "description": text.mechanism,
                "confidence": "{{ $value }}",
                "fix": text.fix,
            }
            if text.snippet:
                annotations["fix_config_snippet"] = text.snippet
            if text.flags:
                annotations["fix_flags"] = text.flags
            self.rules.append(
                Rule(
                    expr=f"({opening}) or ({holding})",
                    alert=alert_name(cause),
                    labels={"cause": cause},
                    annotations=annotations,
                    for_s=for_s,
                    keep_firing_for_s=w.resolve_s,
                )
            )

    def _held(self, cause: str, opening: str) -> tuple[str, float]:
        """Return an alert's opening condition and its ``for:``: the engine's hold.

        Reload churn counted from finished signs (``Finding.settled``) opens at once in the
        engine, while its periodic and compute-tail readings wait out the hold like every
        other cause. One ``for:`` cannot do both, so model_reload's hold is in its expression:
        the opening condition, recorded, held at each of the evaluations ``for:`` would ask
        for, unless the signed count already reaches ``reload_min_events``.
        """
        w = self.w
        if cause != "model_reload" or w.hold_s <= 0:
            return opening, w.hold_s
        recorded = f"{PREFIX}:opening"
        self.record(recorded, opening, {"cause": cause})
        # ``for: H`` fires at the first evaluation at least H after the first true one: every
        # evaluation in the last ceil(H / interval) intervals, and this one, held.
        spans = math.ceil(w.hold_s / w.interval_s - 1e-9)
        reach = duration((spans + 0.5) * w.interval_s)
        held = f'count_over_time({recorded}{{cause="{cause}"}}[{reach}]) >= {spans + 1}'
        settled = f"{PREFIX}:reloads_signed >= {self.t.reload_min_events}"
        return f"({opening}) and on ({BY}) ({settled} or {held})", 0.0

    # ---- 7. healthy history -----------------------------------------------------------
    def healthy(self) -> None:
        t = self.t
        healthy = f"{PREFIX}:healthy"
        # engine.py: a snapshot is healthy with requests, no symptom, no finding holding, no
        # incident open, outside a birth, and not drifting (the freeze).
        serving = known(f"{_f('request_rate')} > 0")
        self.record(
            healthy,
            f"{serving} "
            f"unless on ({BY}) {PREFIX}:symptom "
            f"unless on ({BY}) ({PREFIX}:cause_confidence >= {num(t.close_confidence)}) "
            f'unless on ({BY}) ALERTS{{alertname=~"Tritonguard.+", alertstate="firing"}} '
            f"unless on ({BY}) {PREFIX}:in_birth "
            f"unless on ({BY}) {PREFIX}:shifting",
        )
        for name in BASELINE_FEATURES:
            self.record(f"{series(name)}:healthy", f"{_f(name)} and on ({BY}) {healthy}")

    def build(self) -> list[Rule]:
        self.counters()
        self.triton_features()
        self.exporter_features()
        self.baselines()
        self.limits()
        self.births()
        self.shifting()
        self.symptom()
        self.abnormal_scrapes()
        self.before_shift()
        self.steadiness()
        self.fast_symptom()
        self.recurrence()
        self.reload_signs()
        self.arrivals()
        self.confidences()
        self.alerts()
        self.healthy()
        return self.rules


def compile_rules(thresholds: Thresholds, scrape_interval_s: float) -> list[Rule]:
    """Return every rule, in evaluation order, for Tritons scraped every ``scrape_interval_s``."""
    if not (math.isfinite(scrape_interval_s) and scrape_interval_s > 0):
        raise ValueError(f"scrape interval {scrape_interval_s!r} s: must be a positive number")
    return _Builder(thresholds, scrape_interval_s).build()


def rule_group(thresholds: Thresholds, scrape_interval_s: float) -> dict[str, Any]:
    """Return the one rule group, evaluated at the scrape interval (as the engine evaluates)."""
    return {
        "name": GROUP_NAME,
        "interval": duration(scrape_interval_s),
        "rules": [r.as_dict() for r in compile_rules(thresholds, scrape_interval_s)],
    }


def rule_file(groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return a plain Prometheus rule file (``rule_files:``) holding ``groups``."""
    return {"groups": [dict(g) for g in groups]}


def prometheus_rule(
    groups: Sequence[Mapping[str, Any]],
    *,
    name: str = "tritonguard",
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return a PrometheusRule manifest (monitoring.coreos.com/v1) holding ``groups``."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {"app.kubernetes.io/name": "tritonguard", **dict(labels or {})}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": {"groups": [dict(g) for g in groups]},
    }


class _Dumper(yaml.SafeDumper):
    """Block scalars for multi-line text (snippets, long expressions) so the output reads well."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_yaml(document: Mapping[str, Any]) -> str:
    """Return a document as YAML, keys in the order built."""
    # Long lines stay whole rather than fold where YAML would fold them.
    return yaml.dump(
        dict(document), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000
    )


def recorded_features(rules: Iterable[Rule]) -> list[str]:
    """Return the feature names the rules record (``tritonguard:<feature>``), in order."""
    out = []
    for r in rules:
        name = r.record.removeprefix(f"{PREFIX}:")
        if r.record.startswith(f"{PREFIX}:") and ":" not in name and not r.labels:
            out.append(name)
    return out
