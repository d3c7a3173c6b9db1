"""What a signature sees: features, the model's baseline, its config, and shared helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from tritonguard.core.baselines import Baseline
from tritonguard.core.births import Birth
from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import Evidence, Subject
from tritonguard.core.model_config import ModelConfig
from tritonguard.core.recurrence import Recurrence
from tritonguard.core.symptoms import Symptom
from tritonguard.core.thresholds import Thresholds


@dataclass(frozen=True, slots=True)
class Peer:
    """Another model on the same pod, as the CPU or accelerator they share sees it."""

    model: str
    # Request rate vs its own baseline (None without one).
    load: float | None
    # Work added since its baseline, in compute seconds per second at its healthy speed:
    # its healthy compute per inference x the inferences per second it gained.
    added_work_s: float | None


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
    # Each scrape's own mean queue time within the window, oldest first.
    scrape_queue: list[float] = field(default_factory=list)
    # When the subject's model config or pod template last changed, if that may have been
    # within the baseline's lookback (config_changes.py): the workload is not the one the
    # baseline describes.
    changed_at: float | None = None
    # The model's instance count before that change, when the change was a config read (None
    # for a rollout or ConfigMap change alone, or a config without an instance_group).
    instances_before: int | None = None
    # When the subject's model config was last read (config_changes.py), and when the
    # current shift's first abnormal scrape was (None without a shift in view): a config
    # read before the shift began may predate the deploy that caused it.
    config_read_at: float | None = None
    shift_began: float | None = None
    # The features over the window that ended just before the current shift's first abnormal
    # scrape (None without a shift in view): what the server looked like while the model was
    # still healthy, to tell a node that got busy with the shift from one that already was.
    before: FeatureSet | None = None
    # Each scrape's own mean queue time since that first abnormal scrape, oldest first: the
    # queue of the shift alone, which the window mixes with the healthy scrapes before it.
    queue_since_shift: list[float] = field(default_factory=list)
    # The pod's other models while this one's symptom lasts: who else uses its CPU or GPU.
    peers: list[Peer] = field(default_factory=list)

    def config_current(self) -> bool:
        """Whether the config was read since the shift began (within the window without one).

        A read from before the shift may predate the deploy that caused it: the count or
        delay it holds is the one the deploy replaced.
        """
        since = (
            self.shift_began if self.shift_began is not None else self.now - self.features.window_s
        )
        return self.config_read_at is not None and self.config_read_at >= since

    def ev(
        self, value: float | None, unit: str, what: str, window_s: float | None = None
    ) -> Evidence:
        """Evidence measured over the current window unless told otherwise."""
        return Evidence(value, unit, self.features.window_s if window_s is None else window_s, what)


# Evidence weights (``Evidence.weight``): a condition the signature cannot fire without; a
# number that belongs with such a condition (the configured count next to the busy count);
# corroborating signs weigh the confidence they can add.
GATE = 1.0
BESIDE_GATE = 0.9


def weigh(evidence: dict[str, Evidence], weights: Mapping[str, float]) -> dict[str, Evidence]:
    """Return the evidence with the signature's weights set; names it lacks are ignored."""
    return {
        name: replace(e, weight=weights[name]) if name in weights else e
        for name, e in evidence.items()
    }


def clamp(conf: float) -> float:
    """Keep a confidence inside (0, 0.97]: no finding is ever certain."""
    return max(0.0, min(0.97, conf))


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


def added_work(f: FeatureSet, base: Baseline | None) -> float | None:
    """Return work added since the baseline, in compute seconds per second at healthy speed.

    Not the compute seconds themselves: a model slowed by a saturated neighbour spends more
    of them on the same work, while the neighbour that saturated the resource did more work.
    """
    if base is None:
        return None
    per_inference, rate = base.get("compute_per_inference_us"), base.get("inference_rate")
    if per_inference is None or rate is None or f.inference_rate is None:
        return None
    return per_inference / 1e6 * (f.inference_rate - rate)


def culprit_elsewhere(ctx: Context) -> Peer | None:
    """Return the pod's model whose added work saturated what they share, when not this one.

    A CPU or accelerator shared by several models slows all of them once one takes more of
    it: every model's compute inflates, but only the culprit's work grew. A model whose own
    load is steady, beside a peer whose load grew (load_increase) and added work, is a
    bystander of that peer's saturation: naming it would move the fix to the wrong model.
    """
    t = ctx.thresholds
    load = ctx.baseline.ratio("request_rate", ctx.features.request_rate) if ctx.baseline else None
    if load is None or load >= t.load_increase:
        return None
    grown = [
        p
        for p in ctx.peers
        if p.load is not None
        and p.load >= t.load_increase
        and p.added_work_s is not None
        and p.added_work_s > 0
    ]
    return max(grown, key=lambda p: p.added_work_s or 0.0, default=None)


def work_share(ctx: Context) -> float | None:
    """Return this model's share of the work its pod's models added (None alone or unknown)."""
    if not ctx.peers:
        return None
    mine = added_work(ctx.features, ctx.baseline)
    if mine is None or mine <= 0:
        return None
    return mine / (mine + sum(max(0.0, p.added_work_s or 0.0) for p in ctx.peers))
