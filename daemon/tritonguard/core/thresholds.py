"""Every tunable number of the engine in one documented, overridable model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    """Thresholds used by features, signatures and incidents.

    Each signature is written for its mechanism; these numbers only set how strong a
    mechanism's evidence must be. Override any of them in the config file under
    ``thresholds`` (``tritonguard thresholds --format yaml`` prints them all); unknown keys
    are an error so typos do not silently do nothing.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Windows. Rates use at least `rate_window_s` and at least `min_scrapes_per_window`
    # scrape intervals, so a 30 s scrape interval still sees two increases per window.
    rate_window_s: float = Field(
        30.0,
        description=(
            "Shortest window for rates and shares: at 2-5 s scrapes it holds 6-15 increases, "
            "and at 20 req/s its 600 requests put Poisson noise on the mean near 4 %; the "
            "fast path reads a shift before the window fills."
        ),
    )
    min_scrapes_per_window: float = Field(
        2.0,
        description=(
            "A window spans at least this many scrapes: a rate needs two increases, so at a "
            "30 s scrape the window grows to 60 s."
        ),
    )
    stale_after_scrapes: float = Field(
        3.0,
        description=(
            "Data older than this many intervals is stale: one late scrape is jitter, two a "
            "slow target; after three the numbers no longer describe the server, and nothing "
            "acts on them."
        ),
    )
    stale_after_min_s: float = Field(
        20.0,
        description=(
            "...and never stale sooner than this, so a 2 s scrape rides out a 6 s pause (a "
            "slow 200 KB exposition, a GC) without going blind."
        ),
    )
    retention_s: float = Field(
        900.0,
        description=(
            "Series that vanished are dropped after this: longer than a pod restart or a "
            "rolling update's gap, so a returning pod keeps its series (a counter's reference "
            "for a reset, its birth). Points are kept only as far back as a reader reads: "
            "the period lookback and the window before a shift there (520 s at a 10 s "
            "scrape), or a chart's history where charts are drawn."
        ),
    )

    # Baseline: the model's own history, excluding the recent past that may hold the onset.
    baseline_lookback_s: float = Field(
        600.0,
        description=(
            "How far back the baseline looks: ten minutes hold hundreds of snapshots at a 2 s "
            "scrape and twenty at 30 s, while traffic's daily shape changes little within "
            "them."
        ),
    )
    baseline_min_span_s: float = Field(
        30.0,
        description=(
            "Minimum healthy history for a baseline: one full rate window, the least whose "
            "median is a measurement and not a single window's reading."
        ),
    )
    baseline_gap_windows: float = Field(
        1.0,
        description=(
            "Recent windows excluded from the baseline: the newest window may hold the onset, "
            "and must not enter its own reference before the freeze can tell."
        ),
    )

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
            "Two thirds of the window's scrapes (its lower tercile) at least this factor of "
            "the baseline latency: a lasting cause (capacity, contention, a batcher) slows "
            "every scrape, reload churn one in two or three, whose lower tercile stays near "
            "baseline. Just above shift_floor, so a shift the gate opens on is also "
            "sustained."
        ),
    )
    # The fast path: the newest scrapes against the baseline's own per-scrape spread.
    fast_scrapes: int = Field(
        4,
        ge=2,
        description=(
            "The short window is this many of the newest scrapes: at a 2 s scrape, 8 s of "
            "data, against the full window's 30 s. As many normal scrapes in a row end a "
            "shift: reloads and bursts leave one or two between slow ones."
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
    queue_share_high: float = Field(
        0.4,
        description=(
            "Queue share of request time that is high: an idle unbatched instance takes a "
            "request at once (a few % queued), a batcher at its preferred size waits a "
            "fraction of max_queue_delay; at 40 % requests wait two thirds as long as they "
            "compute."
        ),
    )
    busy_saturated: float = Field(
        0.85,
        description=(
            "Instance busy ratio that counts as saturated: in an M/M/1 queue the wait is "
            "rho/(1-rho) service times, 5.7 at 0.85, the knee past which queueing dominates."
        ),
    )
    busy_idle: float = Field(
        0.6,
        description=(
            "Instances busier than this are not 'mostly idle': below 0.6 an M/M/1 wait stays "
            "under 1.5 service times, so a long queue there is held back (a batcher's timer), "
            "not capacity."
        ),
    )
    compute_inflation: float = Field(
        1.4,
        description=(
            "Compute per inference vs baseline that is inflation: per inference (not per "
            "execution) so batch sizes cancel, and at steady load its window-to-window noise "
            "stays under 15 %; contention, a saturated accelerator or cold executions add far "
            "more. A shift begins at its first scrape this far above the baseline, and the "
            "window before it tells a node that got busy with the shift from one already full."
        ),
    )
    load_steady_tolerance: float = Field(
        0.3,
        description=(
            "Request rate within this share of its baseline is steady: Poisson noise on a "
            "window of at least min_requests (20) requests is at most 1/sqrt(20), 22 %."
        ),
    )
    contention_queue_slack: float = Field(
        0.05,
        description=(
            "too_many_instances needs the queue share no higher than its baseline by more than "
            "shift_floor and this absolute share. More instances than the accelerator can run "
            "take requests as they arrive (an idle instance takes each one), so time moves from "
            "the queue into compute and the queue share falls. When the work itself slows on "
            "the same instances (a noisy neighbour, bigger inputs, a throttled CPU), each "
            "instance stays busy longer, requests wait, and the queue share rises: by M/M/c, "
            "waiting grows faster than utilisation. The slack covers a share's window-to-window "
            "noise near zero, where a relative factor alone would trip on 0.02 to 0.03."
        ),
    )
    contention_own_cpu: float = Field(
        1.2,
        description=(
            "node_contention is more certain when Triton's own container CPU stayed within "
            "this factor of its baseline while the node got busier: contended threads wait on "
            "the run queue, which CPU usage does not count, so at steady load Triton's usage "
            "stays where it was and the node's rise is other work. Set below 1 + "
            "load_steady_tolerance (1.3), what the load alone may move it by, so that only a "
            "rise the load cannot explain away is credited (a 0.1 bonus, never the gate). "
            "Above 1 + load_steady_tolerance Triton itself does more work a request (a "
            "model loading, a neighbour model) on that node, and the node's rise earns "
            "nothing."
        ),
    )
    node_cpu_rise: float = Field(
        0.25,
        description=(
            "node_contention: the node's busy share (or the host's nv_cpu_utilization) up by "
            "this much against both the baseline and the window before the shift, when it did "
            "not reach cpu_saturated: a quarter of the node's cores is a whole core on a "
            "4-core node, more than a model's own CPU moves at steady load, while a shared "
            "node's busy share moves by about 0.1 from window to window in the recorded "
            "baselines."
        ),
    )
    cpu_wait_rise: float = Field(
        0.1,
        description=(
            "node_contention on a node its busy share cannot show (already full): Triton's "
            "cgroup CPU pressure (the share of time a thread of it waited for a CPU) up by "
            "this much against both the baseline and the window before the shift, and by "
            "shift_floor of each. At the compute_inflation bar (1.4x) a CPU-bound execution "
            "spends at least 1 - 1/1.4 = 0.29 of its span waiting, so a model whose "
            "executions are in flight a third of the time or more waits about 0.1 of the "
            "wall time more; the shift_floor factor keeps a node whose threads already "
            "waited much from crediting its noise."
        ),
    )
    load_increase: float = Field(
        1.25,
        description=(
            "Request rate up by this factor is a load rise: beyond the window's Poisson noise "
            "(at most 22 %), and enough to push a model at 0.7 busy past the knee."
        ),
    )
    gpu_saturated: float = Field(
        0.9,
        description=(
            "Accelerator utilisation (share of time a kernel ran) that is saturated: at 0.9 "
            "the device has no idle time left for another instance's kernels."
        ),
    )
    gpu_underused: float = Field(
        0.7,
        description=(
            "Accelerator utilisation below this had idle time: instances slowed there did not "
            "fight over it. Used only without a change that raised the instance count; with "
            "one, the bar is the occupancy the executions imply (busy / count, a bound)."
        ),
    )
    cpu_saturated: float = Field(
        0.85,
        description=(
            "CPU use vs quota or host that is saturated: the busy_saturated knee, for cores."
        ),
    )
    throttled_high: float = Field(
        0.2,
        description=(
            "Share of CFS periods throttled that is high: each throttled period stops the "
            "container's threads until the next 100 ms period, so one in five delays a fifth "
            "of executions by tens of ms; a container below its limit shows none."
        ),
    )
    input_share_high: float = Field(
        0.3,
        description=(
            "compute_input (+output) share of compute that is high: kernels dominate a GPU "
            "model's compute and host-device copies of typical tensors take a few %; at 30 % "
            "the data path, not the model, costs the time."
        ),
    )
    copy_share_growth: float = Field(
        3.0,
        description=(
            "Copy share vs baseline that is growth: a layout or dtype change, or pinned "
            "memory lost, multiplies copy time; noise moves the share by far less than 3x."
        ),
    )
    copy_explains: float = Field(
        0.3,
        description=(
            "Share of the latency rise the copies' growth must explain: below it they are a "
            "bystander of another cause."
        ),
    )
    batching_steady: float = Field(
        0.5,
        description=(
            "A batcher's wait is steady: the quietest scrape of the window queues at least "
            "this share of the median scrape. Poisson arrivals move a scrape's mean wait by "
            "well under half; a reload or spike leaves normal scrapes between bursts."
        ),
    )
    steady_min_requests: float = Field(
        12.0,
        description=(
            "Requests a point of the per-scrape checks holds (the batcher's steadiness, the "
            "sustained tercile): scrapes are pooled, newest first, until each point holds this "
            "many. A batcher's wait is spread over [0, "
            "max_queue_delay], so one request's wait has a coefficient of variation of about "
            "0.58 (uniform) and a mean over n requests 0.58/sqrt(n); with 12, three standard "
            "deviations are 0.5 of the mean, the steadiness bar. Fewer, and a scrape holding one "
            "request that filled a preferred batch at once (waiting 0) reads as a burst."
        ),
    )
    queue_delay_match_low: float = Field(
        0.25,
        description=(
            "Mean queue / max_queue_delay that matches a waiting batcher: the first request "
            "of a batch waits the whole delay, the last none, so at even arrivals the mean is "
            "about half of it; a quarter allows batches that fill early."
        ),
    )
    timeout_failure_share: float = Field(
        0.05,
        description=(
            "Timeouts and cancels as a share of requests that is high: a healthy service "
            "keeps them near zero, and with retries 5 % of timeouts already raise the offered "
            "load by 5 % and climbing."
        ),
    )
    retry_rate_increase: float = Field(
        1.3,
        description=(
            "Arrivals vs baseline in a retry storm: beyond Poisson noise (at most 22 %), as "
            "each timed-out request comes back."
        ),
    )
    pending_explosion: float = Field(
        4.0,
        description=(
            "Pending vs busy instances in a storm: at capacity pending is about one per busy "
            "instance plus a short queue; four per instance make requests wait four "
            "executions, past client timeouts set near p99."
        ),
    )
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
    cold_age_s: float = Field(
        240.0,
        description=(
            "A subject younger than this may be cold: first executions (CUDA context, "
            "TensorRT tactics, allocator growth) settle within a minute or two, and the "
            "summary's tail takes about a minute more to slide past them."
        ),
    )
    cold_compute_ratio: float = Field(
        3.0,
        description=(
            "First executions vs warm ones (early vs steady compute per execution) that are "
            "cold: warm executions vary well under 2x with batch size; lazy initialisation "
            "makes the first ones 10-1000x slower, and even diluted in a 5 s scrape they stay "
            "above 3x."
        ),
    )
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
    spike_factor: float = Field(
        3.0,
        description=(
            "Per-scrape latency vs the median that is a spike: at 20 or more requests a "
            "scrape Poisson and batching noise keep scrapes within about 1.5x; a reload "
            "stalls requests for its load time (seconds against milliseconds)."
        ),
    )
    burst_merge_s: float = Field(
        6.0,
        description=(
            "Spikes this close form one burst: Triton often loads a repository rewritten file "
            "by file twice, one poll interval (1-5 s) apart."
        ),
    )
    period_lookback_s: float = Field(
        420.0,
        description=(
            "Window to look for recurring spikes: seven minutes hold three reloads of churn "
            "every two minutes, the slowest cadence that still hurts every few minutes."
        ),
    )
    period_min_spikes: int = Field(
        4,
        description=(
            "Spikes needed to call them periodic: three spacings. Two cannot tell a period "
            "from chance: for random (Poisson) spikes the spread of two spacings is uniform "
            "on 0-1, so any bar passes that share of random triples (35 % at "
            "period_max_cv); three spacings pass 5 %, four 2 %."
        ),
    )
    period_max_cv: float = Field(
        0.35,
        description=(
            "Largest deviation of a spacing from the median spacing, over the median, "
            "allowed for a period: a job rewriting the repository recurs within a poll "
            "interval and a scrape of its period (2-5 s of 15-20 s), while random hiccups "
            "arrive as a Poisson process, whose spacings vary as much as their mean."
        ),
    )
    reload_min_events: int = Field(
        2,
        description=(
            "Reload signs (merged per reload) needed at steady traffic: one reload is a "
            "deploy, two within the lookback are churn."
        ),
    )
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
    reload_warm_after: float = Field(
        1.5,
        description=(
            "After a burst of cold executions the model is warm: a scrape's compute per "
            "execution back within this many times the model's median. Healthy scrapes sit "
            "there (batch-size spread and scheduling noise: 0.7-1.5x at 2 s scrapes in the "
            "recorded baselines); under contention the scrapes between the worst ones stay "
            "2-5x slower, so their bursts are not reloads."
        ),
    )
    stall_node_busy: float = Field(
        0.95,
        description=(
            "A node whose CPUs were busy for this share of a scrape had a core free for under "
            "a twentieth of it: runnable threads queued for a core nearly throughout, and the "
            "kernel preempts a thread for a scheduling period (several ms), many times a "
            "ms-scale execution. Cold-looking executions there may be scheduling stalls: they "
            "count as reload signs only when several recur at a period (stalls arrive at "
            "random); on a node with idle CPU only the model explains them."
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
    open_confidence: float = Field(
        0.55,
        description=(
            "Confidence needed to open an incident: a mechanism's required evidence alone "
            "gives 0.4-0.6, so opening needs at least one corroborating sign beyond the "
            "weakest mechanisms' base."
        ),
    )
    close_confidence: float = Field(
        0.35,
        description=(
            "Below this a finding no longer holds: a band 0.2 under open_confidence, so a "
            "finding wavering at the bar neither flaps nor closes."
        ),
    )
    hold_s: float = Field(
        0.0,
        description=(
            "A finding must hold this long before opening, besides hold_evaluations (0: the "
            "consecutive evaluations alone decide, at whatever scrape interval)."
        ),
    )
    hold_evaluations: int = Field(
        2,
        description=(
            "A finding must hold over this many consecutive evaluations: one scrape's reading "
            "can be a hiccup; two in a row cost one scrape interval. A settled finding, whose "
            "evidence a later scrape already confirmed (reloads counted from finished bursts), "
            "holds at its first."
        ),
    )
    hold_single_scrape_s: float = Field(
        15.0,
        description=(
            "At scrape intervals this long one evaluation holds: each reading already rests "
            "on a window of two scrapes, and a second evaluation would cost another 15-30 s."
        ),
    )
    resolve_after_s: float = Field(
        45.0,
        description=(
            "Healthy this long before resolving: longer than a rate window, so resolution is "
            "judged on a window without a faulty scrape."
        ),
    )
    resolve_after_scrapes: float = Field(
        3.0,
        description=("...and at least this many scrapes, for coarse scrape intervals."),
    )
    supersede_margin: float = Field(
        0.2,
        description=(
            "A held cause this much more confident replaces the open one: corroborating signs "
            "add 0.05-0.2 each, so the margin is at least one more sign, not noise."
        ),
    )
    update_min_interval_s: float = Field(
        60.0,
        description=(
            "At most one 'updated' event per subject this often, so a Slack thread stays readable."
        ),
    )

    def stale_after(self, interval_s: float) -> float:
        """Return the age beyond which data scraped every ``interval_s`` is stale."""
        return max(self.stale_after_min_s, self.stale_after_scrapes * interval_s)

    def window(self, interval_s: float) -> float:
        """Return the rate window for data scraped every ``interval_s``."""
        return max(self.rate_window_s, self.min_scrapes_per_window * interval_s)
