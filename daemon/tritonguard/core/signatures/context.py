"""What a signature sees: features, the model's baseline, its config, and shared helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import Evidence, Subject
from tritonguard.core.model_config import ModelConfig
from tritonguard.core.recurrence import Recurrence
from tritonguard.core.thresholds import Thresholds


@dataclass(frozen=True, slots=True)
class Baseline:
    """The model's own healthy history: median feature values and how much history backs them."""

    values: dict[str, float]
    span_s: float
    snapshots: int

    def get(self, name: str) -> float | None:
        """Median of one feature over the baseline period, or None if never known."""
        return self.values.get(name)

    def ratio(self, name: str, current: float | None, floor: float = 0.0) -> float | None:
        """Return current value over baseline; None when either is unknown or the baseline is ~0."""
        base = self.values.get(name)
        if current is None or base is None:
            return None
        base = max(base, floor)
        return current / base if base > 0 else None


@dataclass(frozen=True, slots=True)
class Symptom:
    """Whether tail latency or queue time is up against the baseline or an SLO, and why."""

    up: bool
    reasons: tuple[str, ...]
    # Up for most scrapes of the window, not just through a few spikes: what a lasting cause
    # (capacity, contention, batching) produces, as opposed to reloads' recurring spikes.
    sustained: bool
    latency_ratio: float | None
    p99_ratio: float | None
    queue_ratio: float | None


@dataclass(frozen=True, slots=True)
class Birth:
    """How a subject that started during observation began (new model, version or pod)."""

    born_at: float
    early: FeatureSet
    early_exec_peak_us: float | None
    latest_exec_us: float | None
    # Per-request compute quantiles soon after birth (summaries), robust to coarse scrapes.
    early_compute_p99_us: float | None = None
    early_compute_p50_us: float | None = None


@dataclass(slots=True)
class Context:
    """Everything one signature evaluation may use; all pure data."""

    subject: Subject
    now: float
    features: FeatureSet
    baseline: Baseline | None
    config: ModelConfig | None
    thresholds: Thresholds
    symptom: Symptom
    birth: Birth | None
    latency_spikes: Recurrence | None
    reload_events: list[tuple[float, str]] = field(default_factory=list)

    def ev(
        self, value: float | None, unit: str, what: str, window_s: float | None = None
    ) -> Evidence:
        """Evidence measured over the current window unless told otherwise."""
        return Evidence(value, unit, self.features.window_s if window_s is None else window_s, what)


def clamp(conf: float) -> float:
    """Keep a confidence inside (0, 0.97]: no finding is ever certain."""
    return max(0.0, min(0.97, conf))


def symptom_of(
    f: FeatureSet, base: Baseline | None, t: Thresholds, recent: list[float] | None = None
) -> Symptom:
    """Tail latency or queue time up against the model's own baseline or an SLO.

    ``recent`` holds the per-scrape mean latencies inside the current window.
    """
    reasons: list[str] = []
    lat_r = p99_r = q_r = None
    if base is not None:
        lat_r = base.ratio("mean_latency_us", f.mean_latency_us)
        base_lat = base.get("mean_latency_us")
        if (
            lat_r is not None
            and base_lat is not None
            and f.mean_latency_us is not None
            and lat_r >= t.symptom_latency_ratio
            and f.mean_latency_us - base_lat >= t.symptom_min_increase_us
        ):
            reasons.append(f"mean latency {lat_r:.1f}x baseline")
        p99_r = base.ratio("p99_us", f.p99_us)
        base_p99 = base.get("p99_us")
        if (
            p99_r is not None
            and base_p99 is not None
            and f.p99_us is not None
            and p99_r >= t.symptom_p99_ratio
            and f.p99_us - base_p99 >= t.symptom_min_increase_us
        ):
            reasons.append(f"p99 {p99_r:.1f}x baseline")
        q_r = base.ratio("mean_queue_us", f.mean_queue_us, floor=100.0)
        base_q = base.get("mean_queue_us") or 0.0
        if (
            q_r is not None
            and f.mean_queue_us is not None
            and q_r >= t.symptom_latency_ratio
            and f.mean_queue_us - base_q >= t.symptom_min_increase_us
        ):
            reasons.append(f"queue time {q_r:.1f}x baseline")
    elif f.mean_queue_us is not None and f.mean_queue_us >= t.no_baseline_queue_us:
        reasons.append(f"queue time {f.mean_queue_us / 1000:.0f} ms with no healthy history")
    if t.slo_p99_us is not None and f.p99_us is not None and f.p99_us > t.slo_p99_us:
        reasons.append(f"p99 {f.p99_us / 1000:.0f} ms over SLO {t.slo_p99_us / 1000:.0f} ms")
    if (
        t.slo_mean_us is not None
        and f.mean_latency_us is not None
        and f.mean_latency_us > t.slo_mean_us
    ):
        reasons.append(f"mean latency over SLO {t.slo_mean_us / 1000:.0f} ms")
    sustained = bool(reasons)
    base_lat = base.get("mean_latency_us") if base is not None else None
    if sustained and recent and base_lat:
        # Two thirds of the window's scrapes must be slow: spikes in every other scrape (reload
        # churn) lift the mean and even the median, but not the lower tercile.
        low = lower_tercile(recent)
        sustained = (
            low >= t.sustained_ratio * base_lat and low - base_lat >= t.sustained_min_increase_us
        )
    return Symptom(bool(reasons), tuple(reasons), sustained, lat_r, p99_r, q_r)


def lower_tercile(values: list[float]) -> float:
    """Return the 1/3 quantile (linear interpolation), the value two thirds of scrapes exceed."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) / 3
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def symptom_evidence(ctx: Context) -> dict[str, Evidence]:
    """Return the latency evidence every finding carries."""
    f, b = ctx.features, ctx.baseline
    out = {
        "mean_latency_ms": ctx.ev(
            ms(f.mean_latency_us), "ms", "Δrequest_duration_us / Δrequest_success"
        ),
        "mean_queue_ms": ctx.ev(ms(f.mean_queue_us), "ms", "Δqueue_duration_us / Δrequest_success"),
        "queue_share": ctx.ev(f.queue_share, "ratio", "Δqueue_duration_us / Δrequest_duration_us"),
        "request_rate": ctx.ev(f.request_rate, "req/s", "rate(nv_inference_request_success)"),
    }
    if f.p99_us is not None:
        out["p99_ms"] = ctx.ev(ms(f.p99_us), "ms", "nv_inference_request_summary_us{quantile=0.99}")
    if b is not None:
        out["baseline_mean_latency_ms"] = ctx.ev(
            ms(b.get("mean_latency_us")), "ms", "median over the model's healthy history", b.span_s
        )
        if b.get("p99_us") is not None:
            out["baseline_p99_ms"] = ctx.ev(
                ms(b.get("p99_us")), "ms", "median healthy p99", b.span_s
            )
    return out


def ms(us: float | None) -> float | None:
    """Convert microseconds to milliseconds, keeping unknown as None."""
    return None if us is None else us / 1000.0


@dataclass(frozen=True, slots=True)
class Amplification:
    """Arrivals against what is served and against the baseline, and the backlog in seconds."""

    arrivals: float
    vs_served: float
    vs_baseline: float | None
    backlog_s: float | None

    def holds(self, t: Thresholds) -> bool:
        """Arrivals far beyond service and history, with a backlog no client waits out."""
        return (
            self.vs_served >= t.amplified_arrivals
            and self.vs_baseline is not None
            and self.vs_baseline >= t.amplified_arrivals
            and self.backlog_s is not None
            and self.backlog_s >= t.abandoned_backlog_s
        )


def arrivals_of(f: FeatureSet) -> float:
    """Return requests arriving per second: served + failed + growth of the pending queue."""
    served = f.request_rate or 0.0
    return served + (f.failure_rate or 0.0) + max(0.0, (f.pending_change or 0.0) / f.window_s)


def amplification(ctx: Context) -> Amplification | None:
    """Return how far arrivals (served + failed + pending growth) outrun service, or None.

    When a backlog holds more seconds of work than any client waits, the server works on
    requests whose clients already left; if arrivals are then a multiple of both what it serves
    and what it used to get, clients are re-sending: the positive feedback of a retry storm,
    visible in Triton's own counters when no timeout count is exported.
    """
    f, b = ctx.features, ctx.baseline
    served = f.request_rate
    if not served or f.pending is None:
        return None
    arrivals = arrivals_of(f)
    base = b.get("request_rate") if b else None
    return Amplification(
        arrivals=arrivals,
        vs_served=arrivals / served,
        vs_baseline=arrivals / base if base else None,
        backlog_s=f.pending / served,
    )
