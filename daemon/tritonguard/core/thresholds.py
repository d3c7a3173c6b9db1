"""Every tunable number of the engine in one documented, overridable model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    """Thresholds used by features, signatures and incidents.

    Each signature is written for its mechanism; these numbers only set how strong a
    mechanism's evidence must be. Override any of them in the config file under
    ``engine.thresholds``; unknown keys are an error so typos do not silently do nothing.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Windows. Rates use at least `rate_window_s` and at least `min_scrapes_per_window`
    # scrape intervals, so a 30 s scrape interval still sees two increases per window.
    rate_window_s: float = Field(30.0, description="Shortest window for rates and shares.")
    min_scrapes_per_window: float = Field(
        2.0, description="Window spans at least this many scrapes."
    )
    stale_after_scrapes: float = Field(
        3.0, description="Data older than this many intervals is stale."
    )
    stale_after_min_s: float = Field(20.0, description="...and never stale sooner than this.")
    retention_s: float = Field(900.0, description="Series that vanished are dropped after this.")

    # Baseline: the model's own history, excluding the recent past that may hold the onset.
    baseline_lookback_s: float = Field(600.0, description="How far back the baseline looks.")
    baseline_min_span_s: float = Field(30.0, description="Minimum healthy history for a baseline.")
    baseline_gap_windows: float = Field(1.0, description="Recent windows excluded from baseline.")

    # Symptom gate: tail latency or queue time up against the baseline or an SLO. The gate is
    # noise-aware (noise_k, below) and scale-free: every bar is relative to the subject's own
    # baseline, so a sub-millisecond model and a 300 ms generative one are judged alike.
    p99_floor: float = Field(
        1.5,
        description=(
            "A p99 (summary) counts as up from this factor of its baseline: Triton's summaries "
            "slide over minutes, so a single slow batch lifts p99 far more than the mean."
        ),
    )
    min_requests: float = Field(
        20.0,
        description=(
            "A window needs at least this many requests for its mean to be judged: fewer make "
            "one slow request a 'shift'."
        ),
    )
    sustained_ratio: float = Field(
        1.3,
        description=(
            "Lower tercile of per-scrape latency vs baseline for a lasting (not spiky) symptom."
        ),
    )
    # The fast path: the newest scrapes against the baseline's own per-scrape spread.
    fast_scrapes: int = Field(
        4,
        ge=2,
        description=(
            "The short window is this many of the newest scrapes: at a 2 s scrape, 8 s of "
            "data, against the full window's 30 s."
        ),
    )
    fast_abnormal: int = Field(
        3,
        ge=1,
        description=(
            "Of those, this many must be abnormal: one slow scrape is a hiccup, three out of "
            "four is a shift."
        ),
    )
    noise_k: float = Field(
        4.0,
        description=(
            "A scrape is abnormal beyond the baseline's median plus this many robust standard "
            "deviations (1.4826 x MAD of its healthy per-scrape values). For noise near "
            "normal one scrape passes 4 sigma about once in 30 000, three of four about once "
            "in 10^13 evaluations: no false alarm across a large fleet."
        ),
    )
    shift_floor: float = Field(
        1.25,
        description=(
            "...and by at least this factor of its median: a model so steady that its spread "
            "is near zero still needs a quarter more latency (a shift batching and traffic "
            "variation do not produce in a healthy model) to count as abnormal."
        ),
    )
    freeze_k: float = Field(
        2.0,
        description=(
            "A snapshot stays out of the baseline when request time or compute per inference "
            "is this many robust standard deviations above the baseline's median: for noise "
            "near normal that drops the top 2 % of healthy scrapes, which moves the median by "
            "about 0.03 sigma, while a drift too small to open anything no longer becomes "
            "the reference it is judged against."
        ),
    )
    freeze_floor: float = Field(
        1.1,
        description=(
            "...and at least this factor above it: a tenth more request time or compute at "
            "steady load is a drift worth holding out, well under the symptom's 1.25."
        ),
    )
    slo_p99_us: float | None = Field(None, description="Optional absolute p99 SLO (µs).")
    slo_mean_us: float | None = Field(None, description="Optional absolute mean latency SLO (µs).")

    # Shared cause evidence.
    queue_share_high: float = Field(0.4, description="Queue share of request time that is high.")
    busy_saturated: float = Field(0.85, description="Instance busy ratio that counts as saturated.")
    busy_idle: float = Field(0.6, description="Instances busier than this are not 'mostly idle'.")
    compute_inflation: float = Field(1.4, description="Compute per inference vs baseline.")
    load_steady_tolerance: float = Field(0.3, description="Request rate within ±30% is steady.")
    load_increase: float = Field(1.25, description="Request rate up by this factor is a load rise.")
    gpu_saturated: float = Field(0.9, description="Accelerator utilisation that is saturated.")
    gpu_underused: float = Field(0.7, description="Accelerator utilisation that is underused.")
    cpu_saturated: float = Field(0.85, description="CPU use vs quota / host that is saturated.")
    throttled_high: float = Field(0.2, description="Share of CFS periods throttled that is high.")
    input_share_high: float = Field(0.3, description="compute_input(+output) share of compute.")
    copy_share_growth: float = Field(3.0, description="Copy share vs baseline that is growth.")
    copy_explains: float = Field(0.3, description="Share of the latency rise that copies explain.")
    batching_steady: float = Field(
        0.5,
        description=(
            "A batcher's wait is steady: the quietest scrape of the window queues at least "
            "this share of the median scrape. Poisson arrivals move a scrape's mean wait by "
            "well under half; a reload or spike leaves normal scrapes between bursts."
        ),
    )
    queue_delay_match_low: float = Field(
        0.25, description="Queue time / max_queue_delay lower bound."
    )
    timeout_failure_share: float = Field(0.05, description="Timeouts/cancels share of requests.")
    retry_rate_increase: float = Field(1.3, description="Arrivals vs baseline in a retry storm.")
    pending_explosion: float = Field(4.0, description="Pending vs busy instances in a storm.")
    amplified_arrivals: float = Field(
        2.0,
        description=(
            "Without timeout counts: arrivals at least this many times both what is served and "
            "the baseline rate (at least one retry per request on average)."
        ),
    )
    abandoned_backlog_s: float = Field(
        30.0,
        description=(
            "Without timeout counts: pending requests worth this many seconds of service, "
            "longer than clients wait, so queued work is mostly abandoned."
        ),
    )

    # cold start and reloads.
    cold_age_s: float = Field(240.0, description="A subject younger than this may be cold.")
    cold_compute_ratio: float = Field(3.0, description="Early vs steady compute per execution.")
    cold_tail_ratio: float = Field(
        10.0,
        description=(
            "Early per-request compute p99 vs p50 (summaries): a few executions that took "
            "seconds where the rest take milliseconds; batch-size spread stays far below."
        ),
    )
    cold_queue_execs: float = Field(
        1.0,
        description=(
            "The first requests queued at least this many warm executions longer than the "
            "model usually queues: a cold instance holds each arrival behind executions "
            "cold_compute_ratio times slower, so they wait several warm executions; with "
            "warm-up before Ready nobody waits behind the slow ones. Relative to the model's "
            "own compute, so a sub-ms model and a 300 ms one are judged alike."
        ),
    )
    spike_factor: float = Field(3.0, description="Per-scrape latency vs median that is a spike.")
    burst_merge_s: float = Field(
        6.0, description="Spikes this close form one burst (double loads)."
    )
    period_lookback_s: float = Field(420.0, description="Window to look for recurring spikes.")
    period_min_spikes: int = Field(3, description="Spikes needed to call them periodic.")
    period_max_cv: float = Field(0.35, description="Spacing variation allowed for a period.")
    reload_min_events: int = Field(2, description="Reload signs needed at steady traffic.")
    reload_burst_compute: float = Field(
        2.0,
        description=(
            "A scrape whose compute per execution is this many times the model's median, with "
            "its latency spiking, is a reload sign (cold executions in a model already "
            "serving): a cold load costs seconds where warm executions take milliseconds, and "
            "even diluted in a 5-10 s scrape it doubles the scrape's compute."
        ),
    )
    tail_mean_over_p50: float = Field(
        1.5,
        description=(
            "A scrape's per-request compute (counters) this many times the summary's p50: "
            "the scrape held executions far slower than the typical one. Healthy scrapes sit "
            "near 1 (batch-size spread lifts the mean a little above the median)."
        ),
    )
    tail_p99_over_mean: float = Field(
        5.0,
        description=(
            "...while the summary's p99 is this many times that mean: the slowness sits in a "
            "few executions (cold ones, each 10x or more), not in all. When every execution "
            "is slower (contention, too many instances) the p99 stays within 2-3x the mean."
        ),
    )
    reload_burst_max_s: float = Field(
        60.0,
        description=(
            "The longest burst of cold executions that reads as a reload: a model is warm "
            "after its first executions (seconds to tens of seconds for heavy models), while "
            "contention or lost capacity slows scrapes until it is removed."
        ),
    )

    # Incidents.
    open_confidence: float = Field(0.55, description="Confidence needed to open an incident.")
    close_confidence: float = Field(0.35, description="Below this a finding no longer holds.")
    hold_s: float = Field(
        0.0,
        description=(
            "A finding must hold this long before opening, besides hold_evaluations (0: the "
            "consecutive evaluations alone decide, at whatever scrape interval)."
        ),
    )
    hold_evaluations: int = Field(
        2, description="A finding must hold over this many consecutive evaluations."
    )
    hold_single_scrape_s: float = Field(
        15.0,
        description="At scrape intervals this long one evaluation holds: its window spans 2 scrapes.",
    )
    resolve_after_s: float = Field(45.0, description="Healthy this long before resolving.")
    resolve_after_scrapes: float = Field(3.0, description="...and at least this many scrapes.")
    supersede_margin: float = Field(
        0.2, description="A held cause this much more confident replaces the open one."
    )
    update_min_interval_s: float = Field(60.0, description="Rate limit for 'updated' events.")
