"""Rolling per-series windows with counter-reset handling, staleness and bounded memory."""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from tritonguard.core.metric_names import (
    READ_QUANTILES,
    exporter_of,
    is_consumed,
    is_counter,
    is_read,
)
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.series_index import FamilyIndex
from tritonguard.core.targets import target_of

# Scrape times remembered per target and exporter (and overall) for placing born counters.
MAX_SCRAPES_KEPT = 256
# A target's scrape interval is the median of its newest gaps: one late scrape moves none.
RECENT_GAPS = 5
# A counter first seen from an exporter new to its target is taken as born from zero only
# while its first value is no more than this many times what it gained over the next scrape
# interval, per second of lead. A server that just started serves at most at its later rate
# (cold instances serve slower, not faster); the factor leaves room for scrape jitter and
# traffic noise over one interval. A series that already held far more work existed before
# the daemon saw it (a pod discovered late, a first scrape that failed), not born.
BIRTH_PLAUSIBLE_FACTOR = 3.0
# A pod first seen within this long of the stream's start was there before it, not born: at
# daemon start every target is first scraped at a slightly different time.
BIRTH_GRACE_S = 30.0

SeriesKey = tuple[str, Labels]
# (namespace, pod, exporter): whose scrape a series arrives in (see SeriesStore).
ScrapeKey = tuple[str, str, str]
K = TypeVar("K")
L = TypeVar("L", bound=list[float])
# Metric names whose kind (consumed, counter, exporter) is remembered; past it, forgotten.
MAX_NAMES_KEPT = 65536
# The scrape key of a series the store no longer holds.
DROPPED: Final[ScrapeKey] = ("", "", "\x00dropped")
# What the name memo holds for a family no feature reads.
_SKIPPED: Final = (False, "\x00not consumed")

# What the memory bound counts, measured with tracemalloc on Prometheus-labelled Triton
# series: a series (its object, label tuples, two index entries, its share of the scrape
# times) was about 1.3 KiB; it no longer holds a key tuple and slot in a second map (86
# bytes), an empty resets list (56) or a float object for its last raw value (24), so some
# 1,180 bytes now. The bound still counts 1,344 (it over-counts, so it holds) until the
# ingest tests that size their budget by it move with it. A point is 8 bytes in each of two
# float arrays plus their growth slack: 21.4 bytes measured over scrapes 3 to 12 of a
# 400-subject fleet (benchmarks/bench_memory.py --trace). Rounded up so the bound holds.
SERIES_BYTES = 1344
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
    offset: float = 0.0
    # Set when the series appeared after the stream started (a new model, version or pod).
    born: float | None = None
    # A birth inferred only from the stream's age (its exporter was new to the target), to be
    # checked against the series' own growth at its second sample.
    born_unconfirmed: bool = False
    # Whose scrape it arrives in (its target and exporter); DROPPED once the store let it go,
    # so that an ingester holding it knows to look it up again.
    scrape_key: ScrapeKey = ("", "", "")
    # The raw last value, kept apart only once a reset set an offset: until then it is the
    # newest stored value itself, and a float object of its own would cost 24 bytes a series.
    _last_raw: float = field(default=0.0, init=False, repr=False)
    # Times of counter resets inside the window; None (shared, no list) while there is none,
    # as for nearly every series.
    _resets: list[float] | None = field(default=None, init=False, repr=False)

    @property
    def last_raw(self) -> float:
        """Raw last value, to detect a reset (value going down) the way Prometheus' rate() does."""
        if self.offset:
            return self._last_raw
        return self.values[-1] if self.values else 0.0

    @property
    def resets(self) -> list[float]:
        """Times of the counter resets still in the window, oldest first."""
        return self._resets if self._resets is not None else []

    def _reset_at(self, t: float) -> None:
        if self._resets is None:
            self._resets = [t]
        else:
            self._resets.append(t)

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
            self._reset_at(t)
        elif self.born_unconfirmed and len(self.times) == 2:
            self._confirm_birth(t, raw)
        if self.offset:
            self._last_raw = raw
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
        resets = self._resets
        if resets is not None:
            keep = bisect.bisect_left(resets, before)
            if keep == len(resets):
                self._resets = None
            elif keep:
                del resets[:keep]
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


class _KeyedTimes(list[float]):
    """Scrape times of one target's exporter, holding the key object its series share.

    It also holds the key's series (``members``) and two bounds that let an expiry pass
    over all of them at once: no member's second point or oldest reset is older than
    ``due``, and no member's newest point older than ``newest``. Both are taken at each
    pass over the members and lowered to every scrape noted since, the only way a member
    gains a point (a new member, a second point, a reset); points only ever leave from the
    old end. So while the horizon has not reached ``due`` nothing of the key is to trim,
    and while the retention has not reached ``newest`` nothing has vanished.
    """

    __slots__ = ("due", "key", "members", "newest")

    def __init__(self, key: ScrapeKey) -> None:
        super().__init__()
        self.key = key
        self.members: list[Series] = []
        self.due = math.inf
        self.newest = math.inf


# The exporter whose scrape interval sizes every reader's window (:meth:`coarsest_interval`).
READERS_EXPORTER: Final = "triton"

# The slot of a sample ``append_scrape`` passes over (its family is not stored); its key is
# no target's, so it always takes the careful branch.
SKIP: Final = Series("", (), counter=False, scrape_key=("", "", "\x00skip"))


class SeriesStore:
    """All series the engine reads, bounded by a retention window.

    Two spans bound it. ``retention_s`` is how long a series that stopped reporting stays
    (its identity: a counter's reference for the next reset, its birth). ``points_kept_s``
    is how far back a series keeps its points: ``reach`` of the coarsest Triton scrape
    interval in view, the farthest its readers read at that interval (readers' windows grow
    with it, see :meth:`coarsest_interval`); older points go but for one, the anchor a rate
    or a gauge read at the span's start needs.
    ``kept_longer`` gives the few families read farther back (a pod's restart counters) a
    span of their own. Without ``reach``, or before any target has been scraped twice,
    points are kept for the whole retention.
    """

    def __init__(
        self,
        retention_s: float = 900.0,
        birth_grace_s: float = BIRTH_GRACE_S,
        max_bytes: int | None = None,
        reach: Callable[[float], float] | None = None,
        kept_longer: Mapping[str, float] | None = None,
    ) -> None:
        self.retention_s = retention_s
        self._reach = reach
        # Set at each expiry from the coarsest scrape interval then in view.
        self.points_kept_s = retention_s
        self._kept_longer = dict(kept_longer or {})
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
        self._exporter_scrapes: dict[ScrapeKey, _KeyedTimes] = {}
        self._scrapes: dict[tuple[str, str], list[float]] = {}
        self._all_scrapes: list[float] = []
        # Series by family, then labels: the only map of them (a second one keyed by name and
        # labels together would cost a key tuple and a slot, some 90 bytes, a series).
        self._by_name: dict[str, dict[Labels, Series]] = {}
        self._count = 0
        self.started_at: float | None = None
        self.newest: float = float("-inf")
        self.samples_ingested = 0
        # Counts the expiries that dropped series: a holder of Series objects (an ingester)
        # checks its own for the DROPPED key when this moved.
        self.generation = 0
        self._names: dict[str, tuple[bool, str]] = {}
        # Families some reader looked up by subject or pod, kept up to date from then on.
        self._indexes: dict[str, FamilyIndex] = {}

    def __len__(self) -> int:
        return self._count

    @property
    def approx_bytes(self) -> int:
        """Return what the stored series cost, as the memory bound counts it."""
        return self._count * SERIES_BYTES + self.points * POINT_BYTES

    def over_budget(self) -> bool:
        """Return whether the store holds more than its memory bound."""
        return self.max_bytes is not None and self.approx_bytes > self.max_bytes

    def add(self, sample: Sample, now: float) -> None:
        """Add one sample; a sample without timestamp is taken at ``now``."""
        self.add_many((sample,), now)

    def add_many(self, samples: Iterable[Sample], now: float) -> None:
        """Add samples (one scrape, or one step of a replay) in order, as ``add`` would each.

        NaN (a summary quantile with no observations yet) is no information, and neither is a
        negative counter: taken as a point it would read as a reset and a rate that never
        happened. Samples of families no feature reads are not stored, nor summary quantiles
        no feature reads (``metric_names.READ_QUANTILES``).
        """
        names = self._names
        series_of = self.stored
        noted: dict[ScrapeKey, tuple[float | None, float | None]] = {}
        noted_at: float | None = None
        points = 0
        ingested = 0
        for sample in samples:
            name = sample.name
            info = names.get(name)
            if info is None:
                info = self._name_info(name)
            if info is _SKIPPED or (name in READ_QUANTILES and not is_read(name, sample.labels)):
                continue
            value = sample.value
            if not value >= 0.0 and (info[0] or math.isnan(value)):
                continue
            t = now if sample.timestamp is None else sample.timestamp
            if t != noted_at:
                # Noting a scrape time twice is a no-op only while no other time came between.
                noted.clear()
                noted_at = t
                self._saw(t)
            series = series_of(name, sample.labels)
            key = self.scrape_key(sample.labels, info[1]) if series is None else series.scrape_key
            marks = noted.get(key)
            if marks is None:
                marks = noted[key] = self._note_scrape(key, t)
            if series is None:
                self.points += points
                points = 0
                series = self._create(name, sample.labels, key, t, marks)
                if series is None:
                    continue
            ingested += 1
            before_n = len(series.times)
            series.add(t, value)
            points += len(series.times) - before_n
        self.points += points
        self.samples_ingested += ingested

    def append_scrape(self, slots: Sequence[Series], values: Sequence[float], t: float) -> None:
        """Append one scrape, every slot's value at ``t``, exactly as ``add_many`` would.

        A slot is a stored series, ``SKIP`` for a sample of a family no feature reads, or a
        new ``Series`` the store does not hold yet (made by ``new_series``): it is stored
        on the way, unless the memory bound sheds it (``stored`` then says None). Slots of
        one target share scrape-key objects, so a key is noted once per run of it.
        """
        noted_key: ScrapeKey | None = None
        marks: tuple[float | None, float | None] = (None, None)
        # While no series of the key can hold a point at or after t (t is past every
        # scrape time noted for it), the per-series order check is skipped.
        fresh = False
        first = True
        points = 0  # points added since the last sync with self.points
        added = 0  # points added in all
        slow_points = 0  # of which by the rare branch
        ignored = 0  # samples at or before their series' newest point
        slow = 0  # samples the rare branch stored
        for series, raw in zip(slots, values, strict=True):
            if series.scrape_key is not noted_key or series.born_unconfirmed or not raw >= 0.0:
                # The rare cases: a family no feature reads, a new run of keys, a series met
                # first, a birth to confirm, a value that is NaN or negative (no point for a
                # counter).
                if series is SKIP or (not raw >= 0.0 and (series.counter or math.isnan(raw))):
                    continue
                key = series.scrape_key
                if key is not noted_key:
                    if key is DROPPED:
                        raise ValueError(f"{series.name}: the store dropped this series")
                    if first:
                        self._saw(t)
                        first = False
                    known = self._exporter_scrapes.get(key)
                    fresh = not known or t > known[-1]
                    marks = self._note_scrape(key, t)
                    noted_key = key
                if series.born_unconfirmed:
                    stored = self.stored(series.name, series.labels)
                    if stored is None:
                        # The memory bound counts every point added before this one.
                        self.points += points
                        added += points
                        points = 0
                        stored = self._adopt(series, t, marks)
                        if stored is None:
                            continue
                    before_n = len(stored.times)
                    stored.add(t, raw)
                    grown = len(stored.times) - before_n
                    points += grown
                    slow_points += grown
                    slow += 1
                    continue
            times = series.times
            if not fresh and t <= times[-1]:
                ignored += 1
                continue
            # Series.add, inlined: this loop runs once per sample of every scrape.
            if series.counter:
                offset = series.offset
                last = series._last_raw if offset else series.values[-1]
                if raw < last:
                    offset = series.offset = offset + last
                    series._reset_at(t)
                if offset:
                    series._last_raw = raw
                series.values.append(raw + offset)
            else:
                series.values.append(raw)
            times.append(t)
            points += 1
        self.points += points
        added += points
        self.samples_ingested += added - slow_points + ignored + slow

    def scrape_key(self, labels: Labels, exporter: str) -> ScrapeKey:
        """Return the scrape key of a series: one shared object per target and exporter."""
        return self._exporter_times((*target_of(labels), exporter)).key

    def stored(self, name: str, labels: Labels) -> Series | None:
        """Return the stored series of ``name`` and ``labels``, if there is one."""
        family = self._by_name.get(name)
        return None if family is None else family.get(labels)

    @property
    def _series(self) -> dict[SeriesKey, Series]:
        """Every stored series by (name, labels), built on the call: for tests to compare."""
        return {(s.name, s.labels): s for family in self._by_name.values() for s in family.values()}

    def _name_info(self, name: str) -> tuple[bool, str]:
        info: tuple[bool, str] = (
            (is_counter(name), exporter_of(name)) if is_consumed(name) else _SKIPPED
        )
        if len(self._names) > MAX_NAMES_KEPT:
            self._names.clear()
        self._names[name] = info
        return info

    def _saw(self, t: float) -> None:
        self.newest = max(self.newest, t)
        if self.started_at is None or t < self.started_at:
            self.started_at = t

    def _note_scrape(self, key: ScrapeKey, t: float) -> tuple[float | None, float | None]:
        """Note that ``key``'s exporter reported its target at ``t``.

        Return the exporter's previous scrape of the target and the previous scrape of the
        target by any exporter (of any target, when the target is new).
        """
        times = self._exporter_times(key)
        times.due = min(times.due, t)
        times.newest = min(times.newest, t)
        same_exporter = _note_time(times, t)
        target_before = _note_time(self._scrapes.setdefault((key[0], key[1]), []), t)
        any_before = _note_time(self._all_scrapes, t)
        return same_exporter, target_before if target_before is not None else any_before

    def _exporter_times(self, key: ScrapeKey) -> _KeyedTimes:
        times = self._exporter_scrapes.get(key)
        if times is None:
            times = self._exporter_scrapes[key] = _KeyedTimes(key)
        return times

    def new_series(self, name: str, labels: Labels, key: ScrapeKey) -> Series:
        """Return a series for ``append_scrape`` to store when it first gets a value.

        Until then it is not in the store; ``born_unconfirmed`` marks it so.
        """
        return Series(name, labels, is_counter(name), born_unconfirmed=True, scrape_key=key)

    def _create(
        self,
        name: str,
        labels: Labels,
        key: ScrapeKey,
        t: float,
        marks: tuple[float | None, float | None],
    ) -> Series | None:
        """Return the series, stored new if need be; None when the memory bound sheds it."""
        series = self.stored(name, labels)
        if series is not None:
            return series
        return self._adopt(self.new_series(name, labels, key), t, marks)

    def _adopt(
        self, series: Series, t: float, marks: tuple[float | None, float | None]
    ) -> Series | None:
        """Store a new series (None when the memory bound sheds it), placing its birth."""
        if self.max_bytes is not None and self.approx_bytes + SERIES_BYTES > self.max_bytes:
            # Full: a new series is unknown rather than pushing out one in use.
            self.series_shed += 1
            return None
        series.born_unconfirmed = False
        self._by_name.setdefault(series.name, {})[series.labels] = series
        self._exporter_times(series.scrape_key).members.append(series)
        self._count += 1
        index = self._indexes.get(series.name)
        if index is not None:
            index.add(series)
        if series.counter:
            self._place_birth(series, t, *marks)
        return series

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

    def family(self, name: str) -> Iterator[Series]:
        """All series of one metric family."""
        return iter(self._by_name.get(name, {}).values())

    def names(self) -> list[str]:
        """Return every family the store holds a series of."""
        return list(self._by_name)

    def index(self, name: str) -> FamilyIndex:
        """Return one family's series by subject and by pod (built at the first call)."""
        index = self._indexes.get(name)
        if index is None:
            index = self._indexes[name] = FamilyIndex(self.family(name))
        return index

    def points_since(self, name: str, now: float) -> float:
        """Return the oldest time whose points ``name``'s series still hold at ``now``."""
        longer = self._kept_longer.get(name)
        kept = self.points_kept_s
        if longer is not None:
            kept = min(max(longer, kept), self.retention_s)
        return now - kept

    def coarsest_interval(self) -> float | None:
        """Return the longest scrape interval the readers' windows follow (None: none known).

        Those windows are a subject's, sized by its Triton's scrape interval (the spacing of
        its request counter): an exporter scraped less often (kube-state-metrics or cAdvisor
        every 30 s beside Triton every 10 s) is read over the same windows, its point at or
        before each window's start being the anchor every series keeps. So the Triton
        targets' longest interval decides; only where no Triton target has been scraped twice
        (a stream of other families alone) does every exporter's count. Each interval is the
        median of the target's newest gaps between scrapes.
        """
        coarsest: float | None = None
        others: float | None = None
        for key, times in self._exporter_scrapes.items():
            n = len(times)
            if n < 2:
                continue
            gaps = sorted(times[k] - times[k - 1] for k in range(max(1, n - RECENT_GAPS), n))
            gap = gaps[len(gaps) // 2]
            if key[2] != READERS_EXPORTER:
                if others is None or gap > others:
                    others = gap
            elif coarsest is None or gap > coarsest:
                coarsest = gap
        return others if coarsest is None else coarsest

    def _points_kept(self) -> float:
        """Return how far back points are kept now: the reach of the coarsest interval."""
        if self._reach is None:
            return self.retention_s
        interval = self.coarsest_interval()
        if interval is None:
            return self.retention_s
        return min(self._reach(interval), self.retention_s)

    def expire(self, now: float) -> int:
        """Trim windows and drop series that vanished more than a retention ago; return drops.

        Over the memory bound, every series keeps only the points the bound affords it.
        """
        horizon = now - self.retention_s
        self.points_kept_s = self._points_kept()
        dropped = 0
        gone: dict[str, list[Series]] = {}
        trimmed = 0
        stale: list[Series] = []
        since_of = {name: self.points_since(name, now) for name in self._by_name}
        # A key is passed over whole while none of its members can have anything to do:
        # the latest horizon of any family is the strictest test of its ``due``.
        latest = max(since_of.values(), default=-math.inf)
        earliest_of: dict[str, float] = {}
        for name, since in since_of.items():
            exporter = exporter_of(name)
            earliest_of[exporter] = min(since, earliest_of.get(exporter, since))
        for times in self._exporter_scrapes.values():
            if times.due >= latest and times.newest >= horizon:
                continue
            earliest = earliest_of.get(times.key[2], -math.inf)
            trimmed += _expire_key(times, since_of, earliest, horizon, stale)
        self.points -= trimmed
        for series in stale:
            name = series.name
            del self._by_name[name][series.labels]
            self._count -= 1
            self.points -= len(series.times)
            series.scrape_key = DROPPED
            dropped += 1
            if name in self._indexes:
                gone.setdefault(name, []).append(series)
        if dropped:
            self.generation += 1
        for name, series_gone in gone.items():
            self._indexes[name].drop(series_gone)
        # Targets that stopped scraping (churned pods) take their scrape times with them.
        _forget_quiet(self._scrapes, horizon)
        _forget_quiet(self._exporter_scrapes, horizon)
        if self.max_bytes is not None and self.over_budget() and self._count:
            self._squeeze(self.max_bytes)
        return dropped

    def _squeeze(self, max_bytes: int) -> None:
        """Keep each series to an equal share of the points the bound leaves after series."""
        room = max(0, max_bytes - self._count * SERIES_BYTES)
        share = max(MIN_POINTS_KEPT, room // POINT_BYTES // self._count)
        for family in self._by_name.values():
            for series in family.values():
                dropped = series.trim(float("-inf"), max_points=share)
                self.points -= dropped
                self.points_shed += dropped


def _expire_key(
    times: _KeyedTimes,
    since_of: Mapping[str, float],
    earliest: float,
    vanished: float,
    stale: list[Series],
) -> int:
    """Trim one key's members to their family's horizon; return the points cut.

    A member silent since before ``vanished`` is not trimmed but moved to ``stale``. The
    key's bounds are taken again from the members that stay; ``earliest`` is the earliest
    horizon of the key's families.
    """
    trimmed = 0
    newest = math.inf
    members = times.members
    gone = 0
    for series in members:
        points = series.times
        if points[-1] < vanished:
            stale.append(series)
            gone += 1
            continue
        horizon = since_of[series.name]
        resets = series._resets
        old_reset = resets is not None and resets[0] < horizon
        if len(points) < 2 or points[1] >= horizon:
            # Nothing past the rate anchor: only a reset older than the horizon to drop.
            if old_reset:
                trimmed += series.trim(horizon)
        elif (len(points) == 2 or points[2] >= horizon) and not old_reset and series.born is None:
            # The steady state: one scrape aged out since the last pass, and the new
            # anchor is the point after it. This is `trim`'s cut of one point, inlined.
            del points[0]
            del series.values[0]
            trimmed += 1
        else:
            trimmed += series.trim(horizon)
        if points[-1] < newest:  # noqa: PLR1730 - min() is a call per series and pass
            newest = points[-1]
    if gone:
        left = {id(s) for s in stale[-gone:]}
        members = times.members = [s for s in members if id(s) not in left]
    times.newest = newest
    times.due = _due(times, members, earliest)
    return trimmed


def _due(times: _KeyedTimes, members: list[Series], earliest: float) -> float:
    """Return the oldest second point or reset of a key's members, just trimmed.

    Each is one of the key's scrapes (only a birth's zero point, always a first point, is
    not) at or after its family's horizon, so the key's first remembered scrape at or after
    the earliest of those horizons bounds them all, without a look at any member. Where
    the key no longer remembers that far back (more than ``MAX_SCRAPES_KEPT`` scrapes in
    the span), the members are read.
    """
    if times and times[0] <= earliest:
        k = bisect.bisect_left(times, earliest)
        return times[k] if k < len(times) else math.inf
    due = math.inf
    for series in members:
        points = series.times
        if len(points) > 1 and points[1] < due:
            due = points[1]
        resets = series._resets
        if resets is not None and resets[0] < due:
            due = resets[0]
    return due


def _forget_quiet(scrapes: dict[K, L], horizon: float) -> None:
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
