"""Rolling per-series windows with counter-reset handling, staleness and bounded memory."""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from tritonguard.core.metric_names import exporter_of, is_consumed, is_counter
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.targets import target_of

# Scrape times remembered per target and exporter (and overall) for placing born counters.
MAX_SCRAPES_KEPT = 256
# A counter first seen from an exporter new to its target is taken as born from zero only
# while its first value is no more than this many times what it gained over the next scrape
# interval, per second of lead. A server that just started serves at most at its later rate
# (cold instances serve slower, not faster); the factor leaves room for scrape jitter and
# traffic noise over one interval. A series that already held far more work existed before
# the daemon saw it (a pod discovered late, a first scrape that failed), not born.
BIRTH_PLAUSIBLE_FACTOR = 3.0

SeriesKey = tuple[str, Labels]
K = TypeVar("K")

# What the memory bound counts, measured with tracemalloc on Prometheus-labelled Triton
# series: a series (its object, label tuples, two index entries) about 1.1 KiB, a point
# 8 bytes in each of two float arrays plus their growth slack. Rounded up so the bound holds.
SERIES_BYTES = 1280
POINT_BYTES = 24
# However tight the budget, a series keeps enough points for two rate windows at the
# coarsest scrape intervals and a few spikes to compare: fewer reads as no data, not as
# wrong data.
MIN_POINTS_KEPT = 16


def _floats() -> array[float]:
    return array("d")


@dataclass(slots=True)
class Series:
    """One series' recent points; counters are stored reset-adjusted, as `rate()` sees them."""

    name: str
    labels: Labels
    counter: bool
    # Packed floats: a point costs 16 bytes instead of two float objects and two pointers.
    times: array[float] = field(default_factory=_floats)
    values: array[float] = field(default_factory=_floats)
    # Raw last value, to detect a reset (value going down) the way Prometheus' rate() does.
    last_raw: float = 0.0
    offset: float = 0.0
    resets: list[float] = field(default_factory=list)
    # Set when the series appeared after the stream started (a new model, version or pod).
    born: float | None = None
    # A birth inferred only from the stream's age (its exporter was new to the target), to be
    # checked against the series' own growth at its second sample.
    born_unconfirmed: bool = False

    @property
    def last_time(self) -> float:
        """Time of the newest point."""
        return self.times[-1]

    def add(self, t: float, raw: float) -> None:
        """Append a point; out-of-order or duplicate timestamps are ignored."""
        if self.times and t <= self.times[-1]:
            return
        if self.times and self.counter and raw < self.last_raw:
            self.offset += self.last_raw
            self.resets.append(t)
        elif self.born_unconfirmed and len(self.times) == 2:
            self._confirm_birth(t, raw)
        self.last_raw = raw
        self.times.append(t)
        self.values.append(raw + self.offset if self.counter else raw)

    def _confirm_birth(self, t: float, raw: float) -> None:
        """Keep an unconfirmed birth only if the first value fits a start from zero."""
        self.born_unconfirmed = False
        born, first_t, first = self.times[0], self.times[1], self.values[1]
        gained, gap = raw - first, t - first_t
        lead = max(first_t - born, gap)
        if gap > 0 and first > BIRTH_PLAUSIBLE_FACTOR * max(gained, 0.0) * lead / gap:
            del self.times[0]
            del self.values[0]
            self.born = None

    def trim(self, before: float, max_points: int | None = None) -> int:
        """Drop points older than ``before`` (keeping one as a rate anchor); return how many.

        ``max_points`` also caps how many points stay, newest kept.
        """
        cut = bisect.bisect_left(self.times, before) - 1
        if max_points is not None:
            cut = max(cut, len(self.times) - max_points)
        if cut > 0:
            if self.born is not None and self.born < self.times[cut]:
                self.born = None  # the start from zero is no longer in the window's reach
            del self.times[:cut]
            del self.values[:cut]
        keep = bisect.bisect_left(self.resets, before)
        if keep:
            del self.resets[:keep]
        return max(cut, 0)

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
            # Born inside the window: it was zero before birth and has existed only since, so
            # its increase is over its age: a model born at onset that is fully busy reads
            # fully busy, not half busy over a window it spent half of not existing.
            return self.values[j] - self.values[0], self.times[j] - self.times[0]
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

    def __init__(
        self,
        retention_s: float = 900.0,
        birth_grace_s: float = 30.0,
        max_bytes: int | None = None,
    ) -> None:
        self.retention_s = retention_s
        self.birth_grace_s = birth_grace_s
        # The memory bound (None: unbounded, for replay and tests of small inputs). Over it,
        # series that are new are not stored (existing ones keep their history), and points
        # beyond what each series can afford are dropped, oldest first.
        self.max_bytes = max_bytes
        self.points = 0
        self.series_shed = 0
        self.points_shed = 0
        # Recent scrape times per (target, exporter) and per target. One exporter's exposition
        # is atomic: a counter missing from a target's previous Triton scrape and present in
        # this one was born in between, whatever order samples arrive in (a Prometheus range
        # read returns series by series, other targets scrape at other times). Another
        # exporter of the same pod (cAdvisor, the lab's) says nothing about Triton's series.
        self._exporter_scrapes: dict[tuple[str, str, str], list[float]] = {}
        self._scrapes: dict[tuple[str, str], list[float]] = {}
        self._all_scrapes: list[float] = []
        self._series: dict[SeriesKey, Series] = {}
        self._by_name: dict[str, dict[Labels, Series]] = {}
        self.started_at: float | None = None
        self.newest: float = float("-inf")
        self.samples_ingested = 0

    def __len__(self) -> int:
        return len(self._series)

    @property
    def approx_bytes(self) -> int:
        """Return what the stored series cost, as the memory bound counts it."""
        return len(self._series) * SERIES_BYTES + self.points * POINT_BYTES

    def over_budget(self) -> bool:
        """Return whether the store holds more than its memory bound."""
        return self.max_bytes is not None and self.approx_bytes > self.max_bytes

    def add(self, sample: Sample, now: float) -> None:
        """Add one sample; a sample without timestamp is taken at ``now``."""
        value = sample.value
        if not is_consumed(sample.name) or math.isnan(value):
            # NaN (e.g. a summary quantile with no observations yet) is no information.
            return
        if value < 0 and is_counter(sample.name):
            # A counter never goes below zero: taken as a point it would read as a reset and a
            # rate that never happened, so it is no information either.
            return
        t = now if sample.timestamp is None else sample.timestamp
        key = (sample.name, sample.labels)
        series = self._series.get(key)
        self.newest = max(self.newest, t)
        if self.started_at is None or t < self.started_at:
            self.started_at = t
        target = target_of(sample.labels)
        exporter = (*target, exporter_of(sample.name))
        same_exporter = _note_time(self._exporter_scrapes.setdefault(exporter, []), t)
        target_before = _note_time(self._scrapes.setdefault(target, []), t)
        any_before = _note_time(self._all_scrapes, t)
        if series is None:
            if self.max_bytes is not None and self.approx_bytes + SERIES_BYTES > self.max_bytes:
                # Full: a new series is unknown rather than pushing out one in use.
                self.series_shed += 1
                return
            series = Series(sample.name, sample.labels, is_counter(sample.name))
            self._series[key] = series
            self._by_name.setdefault(sample.name, {})[sample.labels] = series
            if series.counter:
                earlier = target_before if target_before is not None else any_before
                self._place_birth(series, t, same_exporter, earlier)
        before_n = len(series.times)
        series.add(t, sample.value)
        self.points += len(series.times) - before_n
        self.samples_ingested += 1

    def _place_birth(
        self, series: Series, t: float, same_exporter: float | None, earlier: float | None
    ) -> None:
        # The synthetic zero point counts toward the bound like any other.
        before_n = len(series.times)
        self._place_birth_point(series, t, same_exporter, earlier)
        self.points += len(series.times) - before_n

    def _place_birth_point(
        self, series: Series, t: float, same_exporter: float | None, earlier: float | None
    ) -> None:
        """Start a counter that appeared mid-stream at zero, as Triton's new models do."""
        if same_exporter is not None:
            # The exporter reported this target at its previous scrape without this series:
            # a model, version or status that appeared since.
            series.add(same_exporter, 0.0)
            series.born = same_exporter
            return
        # An exporter new to the target is a new pod only once the stream has run past its
        # first scrapes (at daemon start every target is first scraped at a slightly
        # different time), and only if its first values fit a start from zero.
        if earlier is None or self.started_at is None or earlier < self.started_at:
            return
        if t - self.started_at > self.birth_grace_s:
            series.add(earlier, 0.0)
            series.born = earlier
            series.born_unconfirmed = True

    def add_many(self, samples: Iterable[Sample], now: float) -> None:
        """Add a batch of samples (one scrape, or one step of a replay)."""
        for sample in samples:
            self.add(sample, now)

    def family(self, name: str) -> Iterator[Series]:
        """All series of one metric family."""
        return iter(self._by_name.get(name, {}).values())

    def expire(self, now: float) -> int:
        """Trim windows and drop series that vanished more than a retention ago; return drops.

        Over the memory bound, every series keeps only the points the bound affords it.
        """
        horizon = now - self.retention_s
        dropped = 0
        for key, series in list(self._series.items()):
            if series.last_time < horizon:
                del self._series[key]
                del self._by_name[key[0]][key[1]]
                self.points -= len(series.times)
                dropped += 1
            else:
                self.points -= series.trim(horizon)
        # Targets that stopped scraping (churned pods) take their scrape times with them.
        _forget_quiet(self._scrapes, horizon)
        _forget_quiet(self._exporter_scrapes, horizon)
        if self.max_bytes is not None and self.over_budget() and self._series:
            self._squeeze(self.max_bytes)
        return dropped

    def _squeeze(self, max_bytes: int) -> None:
        """Keep each series to an equal share of the points the bound leaves after series."""
        room = max(0, max_bytes - len(self._series) * SERIES_BYTES)
        share = max(MIN_POINTS_KEPT, room // POINT_BYTES // len(self._series))
        for series in self._series.values():
            dropped = series.trim(float("-inf"), max_points=share)
            self.points -= dropped
            self.points_shed += dropped


def _forget_quiet(scrapes: dict[K, list[float]], horizon: float) -> None:
    """Drop the targets whose newest scrape is older than ``horizon``."""
    for target in [k for k, times in scrapes.items() if not times or times[-1] < horizon]:
        del scrapes[target]


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
