"""Signs that a model was (re)loaded while serving: counter resets, new versions, load times."""

from __future__ import annotations

from tritonguard.core.features import FeatureReader, SubjectKey
from tritonguard.core.samples import label
from tritonguard.core.thresholds import Thresholds


def reload_events(
    reader: FeatureReader, key: SubjectKey, now: float, t: Thresholds
) -> list[tuple[float, str]]:
    """Return (time, kind) of every reload sign within the period lookback, oldest first."""
    horizon = now - t.period_lookback_s
    out: set[tuple[float, str]] = set()
    succ = reader.series("nv_inference_request_success", key)
    for s in succ:
        out.update((r, "counter reset") for r in s.resets if r >= horizon)
    versions = {label(s.labels, "version") for s in succ}
    if len(versions) > 1:
        out.update(
            (s.born, "new version") for s in succ if s.born is not None and s.born >= horizon
        )
    for s in reader.series("nv_model_load_duration_secs", key):
        for k in range(1, len(s.times)):
            if s.times[k] >= horizon and s.values[k] != s.values[k - 1]:
                out.add((s.times[k], "model load"))
    return sorted(out)
