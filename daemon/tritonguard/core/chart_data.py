"""What an incident's chart shows, pure: queue against compute and the deciding signal over time.

Everything is read back from the engine's series store, so the daemon, ``replay`` and the
demo chart the same numbers the engine judged. The store keeps points as far back as its
readers read (``points_kept_s``: the diagnosis' reach, 520 s at a 10 s scrape, or a chart's
10 minutes where charts are drawn), which bounds how far back a chart can reach.

**Per scrape.** Each point is one scrape of the subject's request counter: the increase of
Triton's cumulative counters since the previous scrape, divided by the requests that
completed in between. Queue is ``Δqueue_duration_us / Δrequest_success``; compute is the
request latency less the queue (``Δrequest_duration_us / Δrequest_success`` minus queue), the
same split the root message shows. A point whose data is missing (no requests completed, a
counter not exported, the scrape before it lost) is ``None``: a gap on the chart, never 0.
When more scrapes fall in the window than ``max_points``, consecutive scrapes are merged
(every k-th scrape, each point the increase since the previous kept one).

**The deciding signal** is the heaviest evidence of the finding (``Evidence.weight``, ties in
the signature's own order, as the message lists them) that the chart can follow per scrape
and that the latency panel does not already show: the latency split's own numbers
(``mean_latency_ms``, ``mean_queue_ms``, ``queue_share``, ``p99_ms``, the baselines) and
configured values (``instance_count``, ``max_queue_delay_ms``, ``has_model_warmup``) are
skipped. :data:`SIGNALS` says which feature follows each evidence name: a ratio against the
healthy baseline (``compute_vs_baseline``) is drawn as the feature itself (compute per
inference) with its healthy value as a reference line, so the chart reads in units people
know; a share (``ingress_timeouts_share``) in %. Evidence the table does not know (a count
of reload signs, an age) is passed over for the next one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.baselines import Baseline
from tritonguard.core.features import FeatureReader, FeatureSet, SubjectKey, serves
from tritonguard.core.findings import Evidence, IncidentEvent, Subject
from tritonguard.core.humanize import label as evidence_label
from tritonguard.core.humanize import ranked
from tritonguard.core.humanize import value as evidence_value
from tritonguard.core.samples import label
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.signatures.context import arrivals_of
from tritonguard.core.thresholds import Thresholds

# Points a chart holds at most; beyond it consecutive scrapes merge.
MAX_POINTS = 240
# How much time before the onset a chart shows at least, when the store still holds it.
ONSET_LEAD_S = 60.0
# How much history a chart shows unless told otherwise (the daemon's `slack.chart_minutes`).
DEFAULT_CHART_MINUTES = 10.0

Getter = Callable[[FeatureSet], float | None]
# The reference line of a signal, in the chart's units, from the finding's evidence and the
# subject's baseline.
Reference = Callable[[Mapping[str, Evidence], Baseline | None], float | None]


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else math.fsum(v for v in values if v)


def _ev(name: str, scale: float = 1.0) -> Reference:
    def ref(evidence: Mapping[str, Evidence], _b: Baseline | None) -> float | None:
        e = evidence.get(name)
        return None if e is None or e.value is None else e.value * scale

    return ref


def _base(*names: str, scale: float = 1.0) -> Reference:
    """Return the healthy value: the baseline's median of ``names`` (summed), scaled."""

    def ref(_e: Mapping[str, Evidence], b: Baseline | None) -> float | None:
        if b is None:
            return None
        total = _sum(*(b.get(n) for n in names))
        return None if total is None else total * scale

    return ref


# Reads a value the features left unknown: (reader at the scrape, subject, its features).
Fill = Callable[[FeatureReader, SubjectKey, FeatureSet], float | None]
TIMEOUT_STATUSES = ("499", "504", "408")


def _no_timeouts_yet(reader: FeatureReader, key: SubjectKey, f: FeatureSet) -> float | None:
    """Return 0 before the ingress's first timeout, whose status series it adds only then.

    At the time, the engine read a missing status series as no timeouts; read back later, the
    series is in the store and has no point yet, which the features call unknown.
    """
    if f.ingress_rate is None:
        return None
    ns, pod, model = key
    timeouts = [
        s
        for s in reader.store.family("nginx_ingress_controller_requests")
        if label(s.labels, "status") in TIMEOUT_STATUSES and serves(s.labels, ns, model, pod)
    ]
    for s in timeouts:
        i = s.at_or_before(reader.now)
        # Not there yet, or only the zero the store placed at its birth.
        if not (i < 0 or (i == 0 and s.values[0] == 0.0)):
            return None
    return 0.0 if timeouts else None


def _const(v: float) -> Reference:
    return lambda _e, _b: v


@dataclass(frozen=True, slots=True)
class Signal:
    """How one evidence name is followed over time: the feature, its unit and its label."""

    get: Getter
    label: str
    # "%" (a ratio drawn ×100), "ms", "req/s", "s", "MB/s" or "" (a plain number).
    unit: str = ""
    reference: Reference | None = None
    reference_label: str = ""
    # What an unknown reading was, when the data says so after all (see _no_timeouts_yet).
    fill: Fill | None = None


def _copy_us(f: FeatureSet) -> float | None:
    return _sum(f.compute_input_us, f.compute_output_us)


def _copy_share(f: FeatureSet) -> float | None:
    return _sum(f.input_share, f.output_share)


def _canceled_share(f: FeatureSet) -> float | None:
    if f.failure_canceled is None or f.request_rate is None:
        return None
    return _div(f.failure_canceled, f.request_rate + (f.failure_rate or 0.0))


def _arrivals(f: FeatureSet) -> float | None:
    return None if f.request_rate is None else arrivals_of(f)


def _hpa_lag(f: FeatureSet) -> float | None:
    if f.hpa_desired is None or f.hpa_current is None:
        return None
    return f.hpa_desired - f.hpa_current


def _mb(bps: float | None) -> float | None:
    return None if bps is None else bps / 1e6


_COMPUTE_PER_EXEC = Signal(
    lambda f: _ms(f.compute_per_exec_us),
    "Compute per execution",
    "ms",
    _base("compute_per_exec_us", scale=1e-3),
    "healthy",
)
_COLD_COMPUTE = Signal(
    lambda f: _ms(f.compute_per_exec_us),
    "Compute per execution",
    "ms",
    _ev("steady_compute_per_exec_ms"),
    "steady",
)

# Evidence name → the feature that follows it per scrape (see the module docstring).
SIGNALS: dict[str, Signal] = {
    "busy_instances": Signal(
        lambda f: f.busy_instances, "Busy instances", "", _ev("instance_count"), "configured"
    ),
    "queue_vs_max_delay": Signal(
        lambda f: _ms(f.mean_queue_us),
        "Mean queue time",
        "ms",
        _ev("max_queue_delay_ms"),
        "max_queue_delay",
    ),
    "avg_batch": Signal(lambda f: f.avg_batch, "Average batch (items)"),
    "compute_vs_baseline": Signal(
        lambda f: _ms(f.compute_per_inference_us),
        "Compute per inference",
        "ms",
        _base("compute_per_inference_us", scale=1e-3),
        "healthy",
    ),
    "concurrency_vs_baseline": Signal(
        lambda f: f.busy_instances, "Busy instances", "", _base("busy_instances"), "healthy"
    ),
    "throughput_vs_baseline": Signal(
        lambda f: f.inference_rate,
        "Inferences",
        "req/s",
        _base("inference_rate"),
        "healthy",
    ),
    "pending": Signal(lambda f: f.pending, "Pending requests"),
    "backlog_s": Signal(lambda f: _div(f.pending, f.request_rate), "Backlog", "s"),
    "gpu_util": Signal(lambda f: f.gpu_util, "GPU utilisation", "%"),
    "load_vs_baseline": Signal(
        lambda f: f.request_rate, "Request rate", "req/s", _base("request_rate"), "healthy"
    ),
    "ingress_timeouts_share": Signal(
        lambda f: _div(f.ingress_timeout_rate, f.ingress_rate),
        "Timed out at the ingress",
        "%",
        fill=_no_timeouts_yet,
    ),
    "triton_canceled_share": Signal(_canceled_share, "Cancelled in Triton", "%"),
    "arrivals_vs_served": Signal(
        _arrivals, "Arrivals (served + failed + queued)", "req/s", _base("request_rate"), "healthy"
    ),
    "arrivals_vs_baseline": Signal(
        _arrivals, "Arrivals (served + failed + queued)", "req/s", _base("request_rate"), "healthy"
    ),
    "ingress_vs_baseline": Signal(
        lambda f: f.ingress_rate, "Ingress requests", "req/s", _base("ingress_rate"), "healthy"
    ),
    "rejected_rate": Signal(lambda f: f.failure_rejected, "Rejected (shedding)", "req/s"),
    "container_cpu_vs_quota": Signal(
        lambda f: f.container_cpu_saturation,
        "Container CPU of its quota",
        "%",
        _const(100.0),
        "quota",
    ),
    "throttled_ratio": Signal(lambda f: f.throttled_ratio, "CFS periods throttled", "%"),
    "host_cpu": Signal(lambda f: f.cpu_host_util, "Host CPU", "%"),
    "node_cpu_busy": Signal(
        lambda f: f.node_cpu_busy,
        "Node CPU busy",
        "%",
        _base("node_cpu_busy", scale=100.0),
        "healthy",
    ),
    "cpu_waiting_share": Signal(
        lambda f: f.cpu_waiting_share,
        "Triton waiting for a CPU (cgroup CPU pressure)",
        "%",
        _base("cpu_waiting_share", scale=100.0),
        "healthy",
    ),
    "triton_cpu_vs_baseline": Signal(
        lambda f: f.container_cpu_cores,
        "Triton container CPU (cores)",
        "",
        _base("container_cpu_cores"),
        "healthy",
    ),
    "copy_share_of_compute": Signal(
        _copy_share,
        "Copies' share of compute",
        "%",
        _base("input_share", "output_share", scale=100.0),
        "healthy",
    ),
    "copy_ms": Signal(
        lambda f: _ms(_copy_us(f)),
        "Copy time per request",
        "ms",
        _base("compute_input_us", "compute_output_us", scale=1e-3),
        "healthy",
    ),
    "pcie_rx_bps": Signal(lambda f: _mb(f.pcie_rx_bps), "PCIe RX", "MB/s"),
    "pcie_tx_bps": Signal(lambda f: _mb(f.pcie_tx_bps), "PCIe TX", "MB/s"),
    # Cold starts and reloads show in the executions themselves: the first ones are slow.
    "early_peak_compute_per_exec_ms": _COLD_COMPUTE,
    "decay_ratio": _COLD_COMPUTE,
    "early_vs_reference": _COLD_COMPUTE,
    "early_compute_p99_over_p50": _COLD_COMPUTE,
    "steady_compute_per_exec_ms": _COLD_COMPUTE,
    "reload_events": _COMPUTE_PER_EXEC,
    "spike_period_s": _COMPUTE_PER_EXEC,
    "spikes": _COMPUTE_PER_EXEC,
    "spike_period_cv": _COMPUTE_PER_EXEC,
    "hpa_lag": Signal(_hpa_lag, "HPA desired − current (replicas)"),
    # Nothing better: how much traffic there was.
    "request_rate": Signal(
        lambda f: f.request_rate, "Request rate", "req/s", _base("request_rate"), "healthy"
    ),
}

# Evidence the latency panel already shows, or that is configured rather than measured.
SHOWN_OR_CONFIGURED = frozenset(
    {
        "mean_latency_ms",
        "mean_queue_ms",
        "queue_share",
        "p99_ms",
        "baseline_mean_latency_ms",
        "baseline_p99_ms",
        "early_mean_queue_ms",
        "early_mean_latency_ms",
        "instance_count",
        "max_queue_delay_ms",
        "has_model_warmup",
        "age_s",
    }
)


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment on the chart: an action (ran, planned, failed, rolled back) or a verification."""

    at: float
    text: str
    kind: str  # "ran", "planned", "failed", "rolled_back", "verify"


@dataclass(frozen=True, slots=True)
class ChartData:
    """The numbers of one chart; ``None`` where the data did not say (drawn as a gap, never 0).

    Point ``i`` covers ``[starts[i], times[i]]``: the scrape interval it was measured over.
    """

    title: str
    start: float
    end: float
    starts: list[float]
    times: list[float]
    queue_ms: list[float | None]
    compute_ms: list[float | None]
    # The evidence name the signal follows ("" when no evidence could be followed).
    signal: str
    signal_label: str
    signal_unit: str
    signal_values: list[float | None]
    onset: float
    # Why this signal: the evidence as the message shows it ("Timed out at the ingress 98 %").
    signal_evidence: str = ""
    signal_reference: float | None = None
    signal_reference_label: str = ""
    marks: list[Mark] = field(default_factory=list)
    resolved_at: float | None = None
    baseline_ms: float | None = None

    def has_data(self) -> bool:
        """Whether there is any latency to draw."""
        return any(v is not None for v in (*self.queue_ms, *self.compute_ms))


def deciding_signal(evidence: Mapping[str, Evidence]) -> str | None:
    """Return the heaviest evidence the chart can follow per scrape (module docstring), or None."""
    for name, _ in ranked(evidence):
        if name not in SHOWN_OR_CONFIGURED and name in SIGNALS:
            return name
    return None


_STATUS_TEXT = {"planned": "would run", "failed": "failed", "rolled_back": "rolled back"}


def marks_of(records: Sequence[ActionRecord], start: float, end: float) -> list[Mark]:
    """Return the actions and verifications of the records that fall in ``[start, end]``.

    Notifications (``slack.post``) and guard decisions (``*``, skipped, deferred) change
    nothing on the server and are not marked.
    """
    out: list[Mark] = []
    for rec in records:
        if rec.action in ("*", "slack.post") or not start <= rec.at <= end:
            continue
        if rec.action == "verify" and rec.status in ("ran", "failed"):
            text = "verified" if rec.status == "ran" else "verification failed"
            out.append(Mark(rec.at, text, "verify"))
        elif rec.status in ("ran", "planned", "failed", "rolled_back"):
            tail = _STATUS_TEXT.get(rec.status)
            out.append(Mark(rec.at, rec.action + (f" ({tail})" if tail else ""), rec.status))
    return sorted(out, key=lambda m: m.at)


def scrape_times(reader: FeatureReader, key: SubjectKey, start: float, end: float) -> list[float]:
    """Return the subject's scrape times in ``(start, end]``, with the one before as an anchor.

    A model-wide subject sums pods scraped at their own times: a time closer than half an
    interval to the one before is the same round of scrapes, so each point spans one interval.
    """
    series = reader.series("nv_inference_request_success", key) or reader.series(
        "nv_inference_exec_count", key
    )
    seen: set[float] = set()
    anchor = float("-inf")
    for s in series:
        for t in s.times:
            if start < t <= end:
                seen.add(t)
            elif t <= start:
                anchor = max(anchor, t)
    times = ([anchor] if anchor > float("-inf") else []) + sorted(seen)
    if len(series) < 2:
        return times
    near = 0.5 * reader.interval(key)
    rounds: list[float] = []
    for t in reversed(times):
        if not rounds or rounds[-1] - t >= near:
            rounds.append(t)
    return rounds[::-1]


def newest_time(store: SeriesStore, subject: Subject) -> float | None:
    """Return the time of the subject's newest scrape in the store, or None."""
    reader = FeatureReader(store, Thresholds(), 0.0)
    key: SubjectKey = (subject.namespace, subject.pod, subject.model)
    series = reader.series("nv_inference_request_success", key) or reader.series(
        "nv_inference_exec_count", key
    )
    return max((s.last_time for s in series if len(s.times)), default=None)


def chart_data(
    store: SeriesStore,
    thresholds: Thresholds,
    event: IncidentEvent,
    records: Sequence[ActionRecord] = (),
    *,
    now: float,
    minutes: float = DEFAULT_CHART_MINUTES,
    baseline: Baseline | None = None,
    resolved_at: float | None = None,
    max_points: int = MAX_POINTS,
) -> ChartData:
    """Return the chart of ``event``'s subject over the last ``minutes`` up to ``now``.

    The window reaches back to at least ``ONSET_LEAD_S`` before the onset when the store
    still holds that time (an incident open longer than ``minutes``). ``baseline`` is the
    subject's healthy baseline, for the signal's reference line; ``resolved_at`` marks the
    resolution.
    """
    s = event.subject
    key: SubjectKey = (s.namespace, s.pod, s.model)
    end = now
    start = end - minutes * 60.0
    if event.opened_at - ONSET_LEAD_S < start:
        start = max(event.opened_at - ONSET_LEAD_S, end - store.points_kept_s)
    name = deciding_signal(event.evidence)
    sig = SIGNALS.get(name or "")
    probe = FeatureReader(store, thresholds, end)
    interval = probe.interval(key)
    times = scrape_times(probe, key, start, end)
    if times and times[0] > start:
        start = times[0]  # nothing older in view: the chart starts with the data
    step = max(1, math.ceil((len(times) - 1) / max(max_points, 1)))
    # Every step-th scrape, counted back from the newest; the oldest kept is only an anchor.
    kept = times[::-1][::step][::-1]
    gap = max(probe.stale_after(interval), 2.5 * step * interval)

    starts: list[float] = []
    points: list[float] = []
    queue: list[float | None] = []
    compute: list[float | None] = []
    values: list[float | None] = []
    for before, t in itertools.pairwise(kept):
        starts.append(before)
        points.append(t)
        if t - before > gap:
            # A hole in the data: the increase over it is no scrape's reading.
            queue.append(None)
            compute.append(None)
            values.append(None)
            continue
        reader = FeatureReader(store, thresholds, t)
        f = reader.compute(key, end=t, window=t - before)
        q, lat = _ms(f.mean_queue_us), _ms(f.mean_latency_us)
        queue.append(q)
        compute.append(None if q is None or lat is None else max(0.0, lat - q))
        values.append(_reading(sig, reader, key, f))

    reference = None
    if sig is not None and sig.reference is not None:
        reference = sig.reference(event.evidence, baseline)
    base = event.evidence.get("baseline_mean_latency_ms")
    base_ms = base.value if base is not None and base.value is not None else None
    if base_ms is None and baseline is not None:
        base_ms = _ms(baseline.get("mean_latency_us"))
    why = ""
    if name is not None:
        why = f"{evidence_label(name)} {evidence_value(name, event.evidence[name], event.evidence)}"
    return ChartData(
        title=f"{event.cause} · {s.namespace}/{s.model}" + (f" on {s.pod}" if s.pod else ""),
        start=start,
        end=end,
        starts=starts,
        times=points,
        queue_ms=queue,
        compute_ms=compute,
        signal=name or "",
        signal_label=_with_unit(sig) if sig is not None else "",
        signal_unit=sig.unit if sig is not None else "",
        signal_values=values,
        onset=event.opened_at,
        signal_evidence=why,
        signal_reference=reference,
        signal_reference_label=sig.reference_label if reference is not None and sig else "",
        marks=marks_of(records, start, end),
        resolved_at=resolved_at,
        baseline_ms=base_ms,
    )


def _reading(
    sig: Signal | None, reader: FeatureReader, key: SubjectKey, f: FeatureSet
) -> float | None:
    """Return the signal's value in the chart's units, or None when unknown."""
    if sig is None:
        return None
    raw = sig.get(f)
    if raw is None and sig.fill is not None:
        raw = sig.fill(reader, key, f)
    if raw is None:
        return None
    return raw * 100.0 if sig.unit == "%" else raw


def _with_unit(sig: Signal) -> str:
    return f"{sig.label} ({sig.unit})" if sig.unit else sig.label
