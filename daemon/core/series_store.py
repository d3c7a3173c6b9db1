"""Rolling per-series windows with counter-reset handling, staleness and bounded memory."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from daemon.core.metric_names import is_consumed, is_counter
from daemon.core.samples import Labels, Sample, label

# Scrape times remembered per target (and overall) for placing the start of born counters.
MAX_SCRAPES_KEPT = 256

SeriesKey = tuple[str, Labels]


@dataclass(slots=True)
class Series:
    """One series' recent points; counters are stored reset-adjusted, as `rate()` sees them."""

    name: str
    labels: Labels
    counter: bool
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    # Raw last value, to detect a reset (value going down) the way Prometheus' rate() does.
    last_raw: float = 0.0
    offset: float = 0.0
    resets: list[float] = field(default_factory=list)
    first_seen: float = 0.0
    first_raw: float = 0.0
    # Set when the series appeared after the stream started (a new model, version or pod).
    born: float | None = None

    @property
    def last_time(self) -> float:
        """Time of the newest point."""
        return self.times[-1]

    def add(self, t: float, raw: float) -> None:
        """Append a point; out-of-order or duplicate timestamps are ignored."""
        if self.times and t <= self.times[-1]:
            return
        if not self.times:
            self.first_seen = t
            self.first_raw = raw
        elif self.counter and raw < self.last_raw:
            self.offset += self.last_raw
            self.resets.append(t)
        self.last_raw = raw
        self.times.append(t)
        self.values.append(raw + self.offset if self.counter else raw)

    def trim(self, before: float) -> None:
        """Drop points older than ``before``, keeping one point before it as a rate anchor."""
        cut = bisect.bisect_left(self.times, before) - 1
        if cut > 0:
            del self.times[:cut]
            del self.values[:cut]
        keep = bisect.bisect_left(self.resets, before)
        if keep:
            del self.resets[:keep]

    def at_or_before(self, t: float) -> int:
        """Index of the newest point at or before ``t``, or -1."""
        return bisect.bisect_right(self.times, t) - 1

    def latest(self, now: float, max_age: float) -> float | None:
        """Newest value if it is not older than ``max_age``; unknown otherwise."""
        i = self.at_or_before(now)
        if i < 0 or now - self.times[i] > max_age:
            return None
        return self.values[i]

    def delta(self, start: float, end: float) -> tuple[float, float] | None:
        """Increase and elapsed time between the points bracketing [start, end], or None."""
        j = self.at_or_before(end)
        if j < 1:
            return None
        # Anchor on the newest point at or before `start`, so consecutive windows tile exactly.
        i = self.at_or_before(start)
        if i < 0 and self.born is not None:
            # Born inside the window: it was zero before birth, so its increase spans the window.
            return self.values[j] - self.values[0], self.times[j] - start
        i = max(i, 0)
        if i >= j:
            return None
        return self.values[j] - self.values[i], self.times[j] - self.times[i]

    def interval(self) -> float | None:
        """Median spacing of recent points: the scrape interval this series arrives at."""
        n = len(self.times)
        if n < 2:
            return None
        gaps = sorted(self.times[k] - self.times[k - 1] for k in range(max(1, n - 12), n))
        return gaps[len(gaps) // 2]


class SeriesStore:
    """All series the engine reads, bounded by a retention window."""

    def __init__(self, retention_s: float = 900.0, birth_grace_s: float = 30.0) -> None:
        self.retention_s = retention_s
        self.birth_grace_s = birth_grace_s
        self._targets: dict[tuple[str, str], float] = {}
        # Each target's recent scrape times: a counter that appears mid-stream began at zero
        # after the same target's previous scrape, whatever order samples arrive in (a
        # Prometheus range read returns series by series, other targets scrape at other times).
        self._scrapes: dict[tuple[str, str], list[float]] = {}
        self._all_scrapes: list[float] = []
        self._series: dict[SeriesKey, Series] = {}
        self._by_name: dict[str, dict[Labels, Series]] = {}
        self.started_at: float | None = None
        self.newest: float = float("-inf")
        self.samples_ingested = 0

    def __len__(self) -> int:
        return len(self._series)

    def add(self, sample: Sample, now: float) -> None:
        """Add one sample; a sample without timestamp is taken at ``now``."""
        if not is_consumed(sample.name) or math.isnan(sample.value):
            # NaN (e.g. a summary quantile with no observations yet) is no information.
            return
        t = now if sample.timestamp is None else sample.timestamp
        key = (sample.name, sample.labels)
        series = self._series.get(key)
        self.newest = max(self.newest, t)
        if self.started_at is None or t < self.started_at:
            self.started_at = t
        target = (
            label(sample.labels, "namespace"),
            label(sample.labels, "pod") or label(sample.labels, "instance"),
        )
        before = _note_time(self._scrapes.setdefault(target, []), t)
        any_before = _note_time(self._all_scrapes, t)
        if before is None:
            # A target seen for the first time (a new pod): its counters began after the
            # stream's previous observation, whichever target that was.
            before = any_before
        if series is None:
            series = Series(sample.name, sample.labels, is_counter(sample.name))
            self._series[key] = series
            self._by_name.setdefault(sample.name, {})[sample.labels] = series
            if series.counter and before is not None and self._born_mid_stream(sample, before, t):
                # A counter that appears mid-stream belongs to a model or pod that just started:
                # its counters began at zero after its target's previous scrape, as Triton's do.
                series.add(before, 0.0)
                series.born = before
            self._targets.setdefault(target, t)
        series.add(t, sample.value)
        self.samples_ingested += 1

    def _born_mid_stream(self, sample: Sample, before: float, t: float) -> bool:
        assert self.started_at is not None
        if before < self.started_at:
            return False
        target = (
            label(sample.labels, "namespace"),
            label(sample.labels, "pod") or label(sample.labels, "instance"),
        )
        seen = self._targets.get(target)
        # A target first seen now is new only once the stream has run past its first scrapes;
        # at daemon start every target is first scraped at a slightly different time.
        return (seen is not None and seen < t) or t - self.started_at > self.birth_grace_s

    def add_many(self, samples: Iterable[Sample], now: float) -> None:
        """Add a batch of samples (one scrape, or one step of a replay)."""
        for sample in samples:
            self.add(sample, now)

    def family(self, name: str) -> Iterator[Series]:
        """All series of one metric family."""
        return iter(self._by_name.get(name, {}).values())

    def expire(self, now: float) -> int:
        """Trim windows and drop series that vanished more than a retention ago; return drops."""
        horizon = now - self.retention_s
        dropped = 0
        for key, series in list(self._series.items()):
            if series.last_time < horizon:
                del self._series[key]
                del self._by_name[key[0]][key[1]]
                dropped += 1
            else:
                series.trim(horizon)
        return dropped


def _note_time(times: list[float], t: float) -> float | None:
    """Insert ``t`` into the sorted, bounded ``times``; return the time just before it."""
    i = bisect.bisect_left(times, t)
    if i == len(times) or times[i] != t:
        times.insert(i, t)
        if len(times) > MAX_SCRAPES_KEPT:
            del times[0]
            if i == 0:
                return None  # older than everything remembered
            i -= 1
    return times[i - 1] if i > 0 else None
