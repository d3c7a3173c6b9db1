"""Everything derived about one subject at one evaluation: the context its signatures read.

The engine only orchestrates: it asks :func:`derive` for each subject's context, runs the
signatures on it and feeds their findings to the incident book. Features, the subject's
birth, its baseline, the symptom gate, per-scrape recurrence and reload signs are all
computed here, once per subject and evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonguard.core.baselines import BaselineHistory
from tritonguard.core.births import birth_of, early_span
from tritonguard.core.features import FeatureReader, SubjectKey
from tritonguard.core.findings import Subject
from tritonguard.core.model_config import ModelConfig
from tritonguard.core.recurrence import find_spikes, per_scrape_ratio
from tritonguard.core.reload_signs import reload_events
from tritonguard.core.signatures.context import Context
from tritonguard.core.symptoms import is_shedding, symptom_of
from tritonguard.core.thresholds import Thresholds


def subject_of(key: SubjectKey) -> Subject:
    """Subject for a (namespace, pod, model) key."""
    return Subject(namespace=key[0], model=key[2], pod=key[1])


@dataclass(frozen=True, slots=True)
class Derived:
    """One subject's context, and what the engine needs besides the signatures' findings."""

    ctx: Context
    # Within its first executions after a birth: not yet a sample of healthy behaviour.
    in_birth: bool
    # The symptom is gone and the server is not shedding: resolution is allowed.
    recovered: bool


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
    per_scrape = per_scrape_ratio(
        reader.series("nv_inference_request_duration_us", key),
        reader.series("nv_inference_request_success", key),
        now - t.period_lookback_s,
        now,
    )
    recent = [v for at, v in per_scrape if at > now - f.window_s + 0.1 * f.interval_s]
    symptom = symptom_of(f, base, t, recent)
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
        reload_events=reload_events(reader, key, now, t),
    )
    in_birth = birth is not None and now - birth.born_at <= early_span(f)
    return Derived(ctx, in_birth, recovered=not symptom.up and not is_shedding(f, t))
