"""Turn a recorded trace into ``promtool test rules`` input, to test exported rules on it.

A trace's samples carry their scrape times, with the jitter of a real scrape; promtool's
``input_series`` place the i-th value at ``i x interval`` from 0. Each sample goes to the
nearest slot of the trace's scrape interval counted from its first scrape, so test time ``T``
is ``T`` seconds into the trace. A series absent from a scrape is missing there (``_``); a
series that ends before the trace does is marked stale at its next slot, as Prometheus marks
a series that left the exposition, so its old value does not linger for five minutes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tritonguard.core.samples import Labels, Sample

__all__ = ["InputSeries", "TraceSeries", "first_firing", "input_series", "selector", "values"]


@dataclass(frozen=True, slots=True)
class InputSeries:
    """One ``input_series`` entry: a series selector and its values in promtool's notation."""

    series: str
    values: str

    def as_dict(self) -> dict[str, str]:
        """Return the entry as the test file holds it."""
        return {"series": self.series, "values": self.values}


@dataclass(frozen=True, slots=True)
class TraceSeries:
    """A trace laid out on its scrape grid: the series, and the grid they sit on."""

    series: list[InputSeries]
    start: float
    interval_s: float
    slots: int

    def test_time(self, at: float) -> float:
        """Return the test time (seconds from the first scrape) of a trace time."""
        return at - self.start

    @property
    def end_s(self) -> float:
        """Test time of the last scrape."""
        return (self.slots - 1) * self.interval_s


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def selector(name: str, labels: Labels) -> str:
    """Return ``name{a="b",...}`` with PromQL string escaping."""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return f"{name}{{{inner}}}"


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def values(points: list[float | None], *, stale_after: bool) -> str:
    """Return promtool notation for one value per slot (None: no sample in that slot).

    Leading and inner gaps are ``_`` runs and repeated values ``axN``; nothing is written
    with a step (``a+bxN``), so a value is never rebuilt by repeated addition and never reads
    as hexadecimal. ``stale_after`` marks the series stale in the slot after its last value.
    """
    last = max((i for i, v in enumerate(points) if v is not None), default=-1)
    items: list[str] = []
    i = 0
    while i <= last:
        v = points[i]
        j = i
        while j + 1 <= last and points[j + 1] == v and (v is None or not math.isnan(v)):
            j += 1
        run = j - i + 1
        if v is None:
            items.append("_" if run == 1 else f"_x{run}")
        else:
            text = _number(v)
            items.append(text if run == 1 else f"{text}x{run - 1}")
        i = j + 1
    if stale_after and last + 1 < len(points):
        items.append("stale")
    return " ".join(items)


def input_series(
    samples: Iterable[Sample],
    interval_s: float,
    *,
    names: Iterable[str] | None = None,
) -> TraceSeries:
    """Lay a trace's samples on its scrape grid as promtool ``input_series``.

    ``names`` keeps only those metric families (the ones the rules read), which keeps test
    files small. Raises ValueError for a trace without timestamps or samples.
    """
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"scrape interval {interval_s!r} s: must be a positive number")
    wanted = None if names is None else frozenset(names)
    kept: list[Sample] = []
    for s in samples:
        if s.timestamp is None:
            raise ValueError(f"sample {s.name} has no timestamp; a trace needs one on every sample")
        if wanted is None or s.name in wanted:
            kept.append(s)
    if not kept:
        raise ValueError("the trace holds no samples the rules read")
    start = min(s.timestamp or 0.0 for s in kept)
    by_series: dict[tuple[str, Labels], dict[int, float]] = {}
    slots = 0
    for s in sorted(kept, key=lambda x: x.timestamp or 0.0):
        slot = round(((s.timestamp or 0.0) - start) / interval_s)
        by_series.setdefault((s.name, s.labels), {})[slot] = s.value
        slots = max(slots, slot + 1)
    out = []
    for (name, labels), points in sorted(by_series.items()):
        row: list[float | None] = [points.get(k) for k in range(slots)]
        out.append(InputSeries(selector(name, labels), values(row, stale_after=True)))
    return TraceSeries(out, start, interval_s, slots)


def first_firing(namespace: str, model: str, end_s: float, interval_s: float) -> str:
    """PromQL for when each cause's alert first fired on a model, in test seconds.

    Evaluated at ``end_s``: one series per cause that fired, ``{cause=...}``, valued by the
    first evaluation at which its alert was firing.
    """
    alerts = (
        f'ALERTS{{alertstate="firing", namespace="{_escape(namespace)}", model="{_escape(model)}"}}'
    )
    window = f"{round(end_s * 1000)}ms"
    step = f"{round(interval_s * 1000)}ms"
    return f"min by (cause) (min_over_time(timestamp({alerts})[{window}:{step}]))"
