"""Everything derived about one subject at one evaluation: the context its signatures read.

The engine only orchestrates: it asks :func:`derive` for each subject's context, runs the
signatures on it and feeds their findings to the incident book. Features, the subject's
birth, its baseline, the symptom gate, per-scrape recurrence and reload signs are all
computed here, once per subject and evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tritonguard.core.baselines import Baseline, BaselineHistory
from tritonguard.core.births import birth_of, early_span
from tritonguard.core.features import FeatureReader, FeatureSet, SubjectKey
from tritonguard.core.findings import Subject
from tritonguard.core.model_config import ModelConfig
from tritonguard.core.recurrence import (
    after,
    find_spikes,
    increases,
    per_scrape_ratio,
    pooled_points,
    ratio_points,
)
from tritonguard.core.reload_signs import reload_events
from tritonguard.core.signatures.context import Context, Peer, added_work
from tritonguard.core.symptoms import fast_symptom, is_shedding, symptom_of
from tritonguard.core.thresholds import Thresholds


def subject_of(key: SubjectKey) -> Subject:
    """Subject for a (namespace, pod, model) key."""
    return Subject(namespace=key[0], model=key[2], pod=key[1])


@dataclass(frozen=True, slots=True)
class Derived:
    """One subject's context, and what the engine needs besides the signatures' findings."""

    ctx: Context
    # The short window's context when its newest scrapes are abnormal (the fast path).
    fast: Context | None
    # Within its first executions after a birth: not yet a sample of healthy behaviour.
    in_birth: bool
    # The symptom is gone and the server is not shedding: resolution is allowed.
    recovered: bool
    # The newest scrape is beyond the baseline's own noise, below the symptom gate or not:
    # not a sample of healthy behaviour, or a modest fault would erode its own reference.
    shifting: bool = False


def derive(  # noqa: PLR0917 - the evaluation's inputs, each from its owner in the engine
    reader: FeatureReader,
    key: SubjectKey,
    now: float,
    history: BaselineHistory,
    config: ModelConfig | None,
    t: Thresholds,
) -> Derived | None:
    """Return the subject's context at ``now``, or None when its data is not fresh.

    Missing data is unknown: no finding opens on it, and no open incident resolves on it.
    """
    f = reader.compute(key)
    if not f.fresh:
        return None
    birth = birth_of(reader, key, f, now, t)
    base = history.baseline(key, now, f.window_s, f.interval_s, reader.store.started_at)
    if base is None:
        # Saved before the daemon restarted: the subject's own reference, until it has
        # learnt enough history again (a restart must not leave it blind for a minute).
        base = history.carried(key, now)
    if base is None and key[1] and birth is not None:
        # Only a pod born under observation (scale-out, rollout) takes its peers' reference:
        # one that was there before the stream began has history of its own to learn, and
        # pods of one model need not serve alike (another deployment, another share of the
        # traffic), so peers judged it by their load and latency at start-up.
        base = history.fleet_baseline(key, now, f.window_s, f.interval_s, reader.store.started_at)
    # Each counter's per-scrape increases are taken once, over the longest span any check
    # reads, and cut to each check's own span: the increases in (start, now] are those of
    # any longer span at the times after start.
    recent_start = now - f.window_s + 0.1 * f.interval_s
    queue_start = now - max(f.window_s, (t.fast_scrapes + 1) * f.interval_s)
    lookback = now - t.period_lookback_s
    first = min(lookback, recent_start, queue_start)
    latency_inc = increases(reader.series("nv_inference_request_duration_us", key), first, now)
    requests_inc = increases(reader.series("nv_inference_request_success", key), first, now)
    queue_inc = increases(reader.series("nv_inference_queue_duration_us", key), queue_start, now)
    per_scrape = ratio_points(after(latency_inc, lookback), requests_inc)
    # The sustained check, like the steadiness one, reads points of enough requests each.
    recent = [
        v
        for at, v in pooled_points(
            after(latency_inc, recent_start), requests_inc, t.steady_min_requests
        )
    ]
    # Only the no-baseline symptom reads them: a subject with a reference pays nothing.
    shares = (
        None
        if base is not None
        else _window_queue_shares(f, now, t, queue_inc, (latency_inc, requests_inc))
    )
    symptom = symptom_of(f, base, t, recent, shares)
    per_scrape_queue = ratio_points(queue_inc, requests_inc)
    # Steadiness is judged on points of enough requests each: at a few requests a scrape,
    # one that filled a batch at once reads as a burst.
    pooled_queue = pooled_points(queue_inc, requests_inc, t.steady_min_requests)
    if per_scrape and per_scrape[-1][0] >= now - 1.5 * f.interval_s:
        f.scrape_latency_us = per_scrape[-1][1]
    if per_scrape_queue and per_scrape_queue[-1][0] >= now - 1.5 * f.interval_s:
        f.scrape_queue_us = per_scrape_queue[-1][1]
    spikes = find_spikes(
        per_scrape, t.spike_factor, merge_s=max(t.burst_merge_s, 1.5 * f.interval_s)
    )
    ctx = Context(
        subject=subject_of(key),
        now=now,
        features=f,
        baseline=base,
        config=config,
        thresholds=t,
        symptom=symptom,
        birth=birth,
        latency_spikes=spikes,
        scrape_queue=since_shift(
            [v for at, v in pooled_queue if at > now - f.window_s + 0.1 * f.interval_s],
            base.abnormal_above("scrape_queue_us", t.noise_k, t.shift_floor) if base else None,
        ),
    )
    in_birth = birth is not None and now - birth.born_at <= early_span(f)
    fast = _fast_context(
        reader,
        key,
        ctx,
        per_scrape,
        (per_scrape_queue, pooled_queue),
        t,
        (latency_inc, queue_inc, requests_inc),
    )
    if symptom.up or fast is not None or len(spikes.spikes) >= t.period_min_spikes:
        # Reload signs count only for a symptom or for spikes recurring often enough to be a
        # period (model_reload, node_contention): a quiet subject, nearly all of a fleet at
        # every scrape, needs none of them. The spikes' per-scrape latency spans the period
        # lookback, as the reload signs' does.
        ctx.reload_events = reload_events(
            reader, key, now, t, _healthy_compute(base), per_request=per_scrape
        )
        if fast is not None:
            fast.reload_events = ctx.reload_events
    if (symptom.sustained or fast is not None) and base is not None:
        # Only while a cause is read (on the full window or the fast path), so it costs one
        # more window's features per slow subject. The shift that matters to the causes
        # that read it is compute inflating: its first scrape at the signatures' own bar,
        # not the latency gate's noise bar (a busy node moves latency a little for reasons
        # of its own).
        healthy = base.get("compute_per_inference_us")
        began = shift_start(
            _compute_per_inference(reader, key, now - t.period_lookback_s, now),
            None if healthy is None else healthy * t.compute_inflation,
            t.fast_scrapes,
        )
        ctx.shift_began = began
        if fast is not None:
            fast.shift_began = began
        if began is not None:
            ctx.before = before = _before(reader, key, began - f.interval_s, f.window_s, t)
            # The first scrape of the shift straddles its onset: the shift's own queue is in
            # the scrapes after it, once there are any.
            since = [v for at, v in per_scrape_queue if at >= began]
            ctx.queue_since_shift = since[1:] or since
            if fast is not None:
                fast.before, fast.queue_since_shift = before, ctx.queue_since_shift
        if key[1]:
            ctx.peers = _peers(reader, key, now, history)
            if fast is not None:
                fast.peers = ctx.peers
    recovered = not symptom.up and not is_shedding(f, t)
    return Derived(ctx, fast, in_birth, recovered=recovered, shifting=is_shifting(f, base, t))


def _healthy_compute(base: Baseline | None) -> float | None:
    """Compute per request while healthy: the baseline's latency less its queue time."""
    if base is None:
        return None
    latency, queue = base.get("mean_latency_us"), base.get("mean_queue_us")
    return None if latency is None or queue is None else latency - queue


# What a cause moves first: request time and each inference's compute (per inference, not per
# execution, so a healthy ramp that fills bigger batches does not read as a shift).
SHIFT_FEATURES = ("scrape_latency_us", "compute_per_inference_us")


def is_shifting(f: FeatureSet, base: Baseline | None, t: Thresholds) -> bool:
    """Return whether the newest readings drift beyond the baseline's noise, gate or not.

    The bar is lower than the symptom gate's (``freeze_k``, ``freeze_floor``): a shift too
    small to open anything is still kept out of the baseline, so the reference stays where
    the subject was healthy and a modest fault cannot erode its own reference. A shift that
    lasts longer than ``baseline_lookback_s`` outlives the frozen baseline, which is then
    learnt again at the new level: it has become the subject's normal.
    """
    if base is None:
        return False
    for name in SHIFT_FEATURES:
        limit = base.abnormal_above(name, t.freeze_k, t.freeze_floor)
        value = getattr(f, name)
        if limit is not None and value is not None and value > limit:
            return True
    return False


def since_shift(points: list[float], limit: float | None) -> list[float]:
    """Return the window's per-scrape points from the first abnormal one on.

    While the window still straddles the onset, its healthy scrapes before the shift would
    read as queueing in bursts. Only leading normal scrapes go: a normal scrape between two
    abnormal ones is kept, so bursts (reloads, spikes) still show as bursts.
    """
    if limit is None:
        return points
    for k, v in enumerate(points):
        if v > limit:
            return points[k:]
    return points


COMPUTE_COUNTERS = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


def _compute_per_inference(
    reader: FeatureReader, key: SubjectKey, start: float, end: float
) -> list[tuple[float, float]]:
    """Return each scrape's own compute per inference (µs), as the features define it.

    Triton charges every request of a batch with the whole batch's compute: compute per
    request is compute per execution, divided by the scrape's inferences per execution.
    """
    compute = [s for name in COMPUTE_COUNTERS for s in reader.series(name, key)]
    per_exec = per_scrape_ratio(
        compute, reader.series("nv_inference_request_success", key), start, end
    )
    batch = dict(
        per_scrape_ratio(
            reader.series("nv_inference_count", key),
            reader.series("nv_inference_exec_count", key),
            start,
            end,
        )
    )
    return [(at, v / b) for at, v in per_exec if (b := batch.get(at))]


def _peers(
    reader: FeatureReader, key: SubjectKey, now: float, history: BaselineHistory
) -> list[Peer]:
    """Return the other models on the subject's pod, each against its own baseline."""
    out = []
    for other in reader.pod_subjects(key[0], key[1]):
        if other == key:
            continue
        g = reader.compute(other)
        base = history.baseline(other, now, g.window_s, g.interval_s, reader.store.started_at)
        load = base.ratio("request_rate", g.request_rate) if base is not None else None
        out.append(Peer(model=other[2], load=load, added_work_s=added_work(g, base)))
    return out


def points_reach_s(t: Thresholds, interval: float) -> float:
    """Return how far back the diagnosis reads a series' points, scraped every ``interval``.

    The farthest read is the window before a shift (:func:`_before`) that began at the
    period lookback's first scrape: one scrape before it, two rate windows, and a gauge's
    staleness before those (a gauge is read as of the second window's start). The reload
    signs, per-scrape spikes and compute per inference read the lookback itself, a birth
    its cold age, and every feature window is shorter.
    """
    before = interval + 2 * t.window(interval) + t.stale_after(interval)
    return max(t.period_lookback_s + before, t.cold_age_s, t.rate_window_s)


def _before(
    reader: FeatureReader, key: SubjectKey, then: float, window: float, t: Thresholds
) -> FeatureSet:
    """Return the features of the window ending at ``then`` (just before a shift began).

    Readers of their own, so gauges are read as of that window and not now. The host's
    ``nv_cpu_utilization`` is a gauge: it counts as saturated over the window only as low
    as it was at either end, as counters average over it.
    """
    before = FeatureReader(reader.store, t, then).compute(key, end=then)
    start = FeatureReader(reader.store, t, then - window).compute(key, end=then - window)
    if before.cpu_host_util is not None and start.cpu_host_util is not None:
        before.cpu_host_util = min(before.cpu_host_util, start.cpu_host_util)
    return before


def shift_start(points: list[tuple[float, float]], limit: float | None, quiet: int) -> float | None:
    """Return when the current shift began: the time of its first abnormal scrape.

    Walking back from the newest scrape, the shift is the stretch whose abnormal scrapes are
    separated by fewer than ``quiet`` normal ones in a row: reloads and bursts leave a normal
    scrape or two between slow ones, a healthy period is longer. None when no scrape of the
    stretch is abnormal or the baseline has no limit.
    """
    if limit is None:
        return None
    began: float | None = None
    normal = 0
    for at, v in reversed(points):
        if v > limit:
            began, normal = at, 0
            continue
        normal += 1
        if normal >= quiet:
            break
    return began


def _window_queue_shares(
    f: FeatureSet,
    now: float,
    t: Thresholds,
    queue_inc: dict[float, float],
    latency_and_requests: tuple[dict[float, float], dict[float, float]],
) -> list[float] | None:
    """Return each scrape's queue share of request time in the window, once it is seen long.

    None while the subject's request counter has been seen for less than ``rate_window_s``
    (the daemon just started, or the model just appeared): a server's first seconds hold
    start-up transients (the first slow executions, a repository poll reloading the model
    once) that queue requests for a few seconds and are no evidence of lasting overload.
    Seconds, not scrapes, since the transient lasts as long at any interval; from about 20 s
    scrapes up, one scrape can hold all of it, and a burst inside the first one still reads
    as queueing. A model loaded long ago that gets its first traffic, or a restarted
    container (its counters continue, reset-adjusted), is held back by the majority rule
    of ``symptoms._queued_now`` alone.
    """
    latency_inc, requests_inc = latency_and_requests
    first = min(requests_inc, default=None)
    # The first increase arrives one scrape after the first point; a tenth of one of jitter,
    # as the window's own anchor allows (the rules' `offset (rate_window_s - interval)`).
    if first is None or first > now - t.rate_window_s + 1.1 * f.interval_s:
        return None
    start = now - f.window_s + 0.1 * f.interval_s
    return [v for _, v in ratio_points(after(queue_inc, start), after(latency_inc, start))]


def _fast_context(  # noqa: PLR0917 - the full context and the per-scrape points it came from
    reader: FeatureReader,
    key: SubjectKey,
    ctx: Context,
    per_scrape: list[tuple[float, float]],
    queues: tuple[list[tuple[float, float]], list[tuple[float, float]]],
    t: Thresholds,
    counts: tuple[dict[float, float], dict[float, float], dict[float, float]],
) -> Context | None:
    """Return the short window's context when its newest scrapes are abnormal, else None.

    Only where the short window is shorter than the full one (scrapes faster than a quarter
    of ``rate_window_s``): at coarser scrapes the full window already spans few scrapes.
    ``queues`` are the queue per request of each scrape and pooled (see ``pooled_ratio``).
    ``counts`` are the latency, queue and request increases per scrape: a model too quiet
    for ``fast_scrapes`` scrapes to hold ``min_requests`` requests is read on a longer short
    window of pooled points from them (see :func:`low_rate_points`).
    """
    f, base = ctx.features, ctx.baseline
    per_scrape_queue, pooled_queue = queues
    span = t.fast_scrapes * f.interval_s
    if base is None or span >= f.window_s:
        return None
    horizon = ctx.now - (t.fast_scrapes + 0.5) * f.interval_s
    latency = [v for at, v in per_scrape if at > horizon]
    queue = [v for at, v in per_scrape_queue if at > horizon]
    symptom = fast_symptom(latency, queue, base, t)
    short = None
    if symptom is not None:
        short = reader.compute(key, window=span)
        if short.request_rate is None or short.request_rate * span < t.min_requests:
            short = None
    if short is None:
        # Too few requests in the newest scrapes for their means to say anything: a quiet
        # model is read on a longer short window of pooled points, if one is short enough.
        newest = ctx.now - (t.fast_scrapes - 0.5) * f.interval_s
        if sum(v for at, v in counts[2].items() if at > newest) >= t.min_requests:
            return None
        low = low_rate_points(counts, ctx.now, f.interval_s, f.window_s, t)
        if low is None:
            return None
        scrapes, latency, queue = low
        symptom = fast_symptom(latency, queue, base, t, pooled=True)
        if symptom is None:
            return None
        span = scrapes * f.interval_s
        short = reader.compute(key, window=span)
        horizon = ctx.now - (scrapes + 0.5) * f.interval_s
        if short.request_rate is None:
            return None
    if symptom is None:
        return None
    # Steadiness is judged on the scrapes since the shift: the short window still holds the
    # healthy scrapes before the onset, which would read as queueing in bursts.
    pooled = [v for at, v in pooled_queue if at > horizon]
    return replace(ctx, features=short, symptom=symptom, scrape_queue=pooled[-t.fast_abnormal :])


def low_rate_points(
    counts: tuple[dict[float, float], dict[float, float], dict[float, float]],
    now: float,
    interval: float,
    window: float,
    t: Thresholds,
) -> tuple[int, list[float], list[float]] | None:
    """Return the low-traffic short window: its scrapes and its pooled latency and queue points.

    ``fast_scrapes`` scrapes of a quiet model hold fewer than ``min_requests`` requests, so
    their mean says nothing and each scrape's mean (a request or two) even less. The short
    window grows scrape by scrape from ``fast_scrapes`` until it holds ``fast_scrapes``
    points of at least ``min_requests / fast_scrapes`` requests each (scrapes pooled newest
    back, as :func:`pooled_points`): together ``min_requests``, the count a mean needs, and
    split as a busy model's ``fast_scrapes`` scrapes would be. None once that span would
    reach the full window (the full window then reads as soon as the fast path could).
    """
    latency_inc, queue_inc, requests_inc = counts
    per_point = math.ceil(t.min_requests / t.fast_scrapes)
    for scrapes in range(t.fast_scrapes, math.ceil(window / interval)):
        if scrapes * interval >= window:
            break
        # The increases of the newest ``scrapes`` scrapes (half a scrape of jitter).
        start = now - (scrapes - 0.5) * interval
        latency = pooled_points(after(latency_inc, start), requests_inc, per_point)
        if len(latency) < t.fast_scrapes:
            continue
        queue = pooled_points(after(queue_inc, start), requests_inc, per_point)
        return scrapes, [v for _, v in latency], [v for _, v in queue]
    return None
