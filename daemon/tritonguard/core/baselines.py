"""Each subject's own healthy history, and the baseline (medians) signatures compare against."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from statistics import median

from tritonguard.core.features import FeatureSet, SubjectKey
from tritonguard.core.thresholds import Thresholds

# Features the baseline keeps: each is compared against the model's own healthy history.
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
    "pending",
    "container_cpu_cores",
    "input_share",
    "output_share",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "ingress_rate",
    "node_cpu_busy",
    "cpu_host_util",
)


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


@dataclass(slots=True)
class _Snapshot:
    t: float
    values: dict[str, float]
    healthy: bool


class BaselineHistory:
    """Per-subject snapshots of the baseline features, each marked healthy or not."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.t = thresholds
        self._history: dict[SubjectKey, deque[_Snapshot]] = {}

    def remember(self, key: SubjectKey, now: float, f: FeatureSet, healthy: bool) -> None:
        """Add this evaluation's features; drop snapshots older than the lookback."""
        hist = self._history.setdefault(key, deque())
        values = {n: v for n in BASELINE_FEATURES if isinstance(v := getattr(f, n), float)}
        hist.append(_Snapshot(now, values, healthy))
        horizon = now - self.t.baseline_lookback_s
        while hist and hist[0].t < horizon:
            hist.popleft()

    def forget(self, key: SubjectKey) -> None:
        """Drop a subject that is gone."""
        self._history.pop(key, None)

    def baseline(
        self, key: SubjectKey, now: float, window: float, interval: float, started: float | None
    ) -> Baseline | None:
        """Return the medians of the subject's healthy snapshots, or None without enough of them.

        ``started`` is when the stream began: a window reaching before the first sample holds
        less data than its nominal length.
        """
        hist = self._history.get(key)
        if not hist:
            return None
        # Exclude the recent past: an onset inside the current window must not become "normal".
        cutoff = now - self.t.baseline_gap_windows * window
        snaps = [s for s in hist if s.healthy and s.t <= cutoff]
        if not snaps:
            return None
        first = started if started is not None else snaps[0].t
        span = snaps[-1].t - max(snaps[0].t - window, first)
        if span < max(self.t.baseline_min_span_s, interval):
            return None
        values: dict[str, float] = {}
        for name in BASELINE_FEATURES:
            vals = [s.values[name] for s in snaps if name in s.values]
            if vals:
                values[name] = median(vals)
        return Baseline(values, span, len(snaps))
