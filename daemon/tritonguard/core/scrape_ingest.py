"""One target's scrapes parsed straight into the series store: a known line costs a compare.

``TargetIngest`` remembers, per target, the last exposition line by line: the text before
each sample's value, the series it feeds, the line itself and its value. A steady
exposition (the same series in the same order every scrape, as Triton's is) then costs per
sample one string compare against last time's line, made in C; a line that is the same
keeps its value (gauges, quantiles, idle models' counters), and one that differs costs a
partition, a compare of the text before its value and a share of one bulk float
conversion. The store's append follows: no label parsing, no relabelling, no ``Sample``
objects. Lines that moved or are new are found by their series text, and a series never
seen is parsed carefully once. The result is the store that
``parse_exposition``, relabelling and ``SeriesStore.add_many`` give, with one documented
difference:

- A sample of a family no feature reads (``metric_names.is_consumed``) is passed over
  without reading its labels. Its value is still checked as a number, but a malformed label
  set in such a family does not drop the scrape, as it does through ``parse_exposition``;
  nothing of the family is stored either way, so no evidence can differ.

Anything else the fast path does not decide (a malformed line, an OpenMetrics payload, a
sample with its own timestamp, the sample limit) goes through ``parse_exposition``, which
refuses the scrape with the reason or reads it the slow way. The store is written only once
the whole exposition has been read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from operator import ne

from tritonguard.core.exposition import (
    ExpositionError,
    SeriesCache,
    SeriesEntry,
    check_line_lengths,
    ends_with_eof,
    is_eof_line,
    is_value_token,
    metric_name_at,
    parse_exposition,
    read_sample_line,
    read_text_comment,
    shared_cache,
    to_floats,
)
from tritonguard.core.metric_names import exporter_of, is_consumed, is_read
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.series_store import DROPPED, SKIP, ScrapeKey, Series, SeriesStore

__all__ = ["IngestResult", "TargetIngest", "relabelled"]

# Metric names whose keep decision is remembered; past it, forgotten.
MAX_NAMES_KEPT = 65536
# Past this share of changed lines, comparing whole no longer pays and the target is read
# line by line (``scan_layout``). In units of one line's partition-and-check (about 150 ns
# here), measured on the capture (46 % of lines changed) and a 100-pod fleet (89 %): the
# steady scan costs 0.24 + 1.66 f a line (the C compare, then each changed line's
# partition, check, conversion and patch), the line-by-line one 1.45 (every line
# partitioned, every value converted); even at f = 0.73, rounded to 3/4. At fleet scale
# keeping each target's last lines also costs cache misses the line-by-line read does not
# have (the 100-pod fleet read line by line ran 1.28x faster), so the share is not shaded
# towards comparing whole.
STEADY_SHARE = 0.75
# After a target went back to line by line, this many scrapes pass before its layout is
# compared whole again (doubling each time it does not pay, up to MAX_STEADY_WAIT): a
# layout costs about one line-by-line read to learn.
STEADY_WAIT = 8
MAX_STEADY_WAIT = 256
# In a layout, the text of a line never to be matched again (a line read the slow way, a
# series the memory bound shed): no line holds a line feed.
_NEVER = "\n"


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one exposition held: its samples, and how many of them the store took."""

    samples: int
    stored: int


def relabelled(labels: Labels, extra: Labels, *, honor_labels: bool) -> Labels:
    """Attach a target's labels as Prometheus does (``ScrapeSource.relabel``'s rule).

    On a clash the exporter's label is kept as ``exported_<name>`` (``honor_labels: false``)
    or wins outright (``honor_labels: true``).
    """
    if not extra:
        return labels
    existing = dict(labels)
    for name, value in extra:
        if name in existing:
            if honor_labels:
                continue
            existing[f"exported_{name}"] = existing[name]
        existing[name] = value
    return tuple(sorted(existing.items()))


def scan_layout(
    lines: list[str],
    heads: list[str],
    layout: list[Series | None],
    *,
    slots: list[Series],
    raws: list[str],
) -> int:
    """Read lines while each matches the previous exposition's line at the same place.

    ``heads[i]`` is the text before the last space of sample line ``i`` (``layout[i]`` its
    slot), or the whole line for a comment or blank line (``layout[i]`` None), which must
    then be the same line. Return the first line that differs (or the shorter length).
    """
    add_slot = slots.append
    add_raw = raws.append
    for index, (line, known, slot) in enumerate(zip(lines, heads, layout, strict=False)):
        if slot is None:
            # A comment must be the same line, not only the same up to its last word: a
            # changed '# TYPE' is checked by the careful path.
            if line != known:
                return index
            continue
        head, _, raw = line.rpartition(" ")
        if head != known:
            return index
        add_slot(slot)
        add_raw(raw)
    return min(len(lines), len(heads))


def scan_steady(lines: list[str], steady: SteadyLayout) -> tuple[list[int], list[str]] | None:
    """Compare an exposition with the last one read whole; return what changed (None: moved).

    A line equal to the last exposition's line at its place holds the same value, so only
    the lines that differ are partitioned: return the places of their values in
    ``steady.values`` and their value tokens. None when a line differs in more than its
    value (or is a comment that differs at all): the caller reads the exposition by
    ``scan_layout`` then.
    """
    previous = steady.lines
    if len(lines) != len(previous):
        return None
    places: list[int] = []
    raws: list[str] = []
    add_place = places.append
    add_raw = raws.append
    # The unchanged lines are found in C (most lines of a steady exposition: gauges,
    # quantiles and idle models' counters), and passed over in C; Python code runs for
    # the others only. A changed line's text before its value is checked against the
    # previous line, just read by the compare, rather than a stored copy: at fleet scale
    # each target's last lines are out of the CPU caches, and one read is half the misses.
    changed = list(map(ne, lines, previous))
    for line, before, cut, place in zip(
        compress(lines, changed),
        compress(previous, changed),
        compress(steady.cuts, changed),
        compress(steady.where, changed),
        strict=True,
    ):
        head, _, raw = line.rpartition(" ")
        if len(head) != cut or not before.startswith(head):
            return None  # more than the value changed, or a comment (cut -1) did
        add_place(place)
        add_raw(raw)
    return places, raws


@dataclass(slots=True)
class SteadyLayout:
    """The last exposition read whole: its lines, the slots it fed and their values.

    ``where[i]`` is the place in ``slots``/``values`` of line ``i``'s value (-1 for a
    comment or blank line); the last place, fed to ``SKIP``, takes the values of every
    family not stored. ``cuts[i]`` is the length of the text before the value, -1 where
    a changed line must be read by its text (a comment, a series waiting on the store).
    ``samples`` counts the sample lines; ``waiting`` are the slots not stored yet, on
    ``waiting_lines``. It is kept only while every sample line feeds a slot (none is read the
    slow way), so that a line equal to last time's is fully decided by that equality.
    """

    lines: list[str]
    where: list[int]
    cuts: list[int]
    slots: list[Series]
    values: list[float]
    samples: int
    waiting: list[Series]
    waiting_lines: list[int]

    def layout_heads(self) -> list[str]:
        """Return what ``scan_layout`` matches each line by (see ``TargetIngest._heads``)."""
        heads = [
            line[:cut] if cut >= 0 else line
            for line, cut in zip(self.lines, self.cuts, strict=True)
        ]
        for index in self.waiting_lines:
            heads[index] = _NEVER
        return heads


class TargetIngest:
    """Read one target's expositions into a store, remembering what each line feeds.

    ``extra_labels`` are the target's own (instance, namespace, pod), attached as a scrape
    would; ``keep`` narrows what is stored further than ``is_consumed`` does. One instance
    serves one target: what it remembers is per target, because its labels are.
    """

    def __init__(
        self,
        store: SeriesStore,
        *,
        extra_labels: Labels = (),
        honor_labels: bool = False,
        keep: Callable[[str], bool] | None = None,
        source: str = "<target>",
        max_samples: int | None = None,
        max_line_length: int | None = 65536,
        cache: SeriesCache | None = None,
    ) -> None:
        self.store = store
        self.extra_labels = extra_labels
        self.honor_labels = honor_labels
        self.keep = keep
        self.source = source
        self.max_samples = max_samples
        self.max_line_length = max_line_length
        self.cache = cache if cache is not None else shared_cache(False)
        # The last exposition read the fast way, line by line (see scan_layout).
        self._heads: list[str] = []
        self._layout: list[Series | None] = []
        self._generation = store.generation
        # The last exposition as a whole, while its every sample line feeds a slot.
        self._steady: SteadyLayout | None = None
        # Expositions read through parse_exposition (OpenMetrics, timestamps, oddities).
        self.slow_reads = 0
        # Expositions laid out as the last one, whose unchanged lines kept their values.
        self.steady_reads = 0
        # Scrapes to read line by line before comparing whole again, and the next wait.
        self._steady_wait = 0
        self._next_wait = STEADY_WAIT
        # The last exposition's lines, while its layout is a candidate for comparing whole.
        self._candidate: list[str] | None = None
        self._kept_names: dict[str, bool] = {}
        self._plain_keys: dict[str, ScrapeKey] = {}
        # Whether the target's labels are only those target_of reads (a scrape's are), so a
        # series naming none of them merges with them without a clash.
        self._plain_merge = bool(extra_labels) and all(n in TARGET_LABELS for n, _ in extra_labels)

    def __len__(self) -> int:
        return sum(1 for slot in self._layout if slot is not None)

    def ingest(
        self, text: str, timestamp: float, *, openmetrics: bool | None = None
    ) -> IngestResult:
        """Read one exposition taken at ``timestamp`` into the store; ExpositionError if bad.

        A refused exposition leaves the store untouched, as Prometheus drops a whole scrape.
        """
        # A '# EOF' line anywhere but at the end sends the text to the slow path, which
        # finds it the way parse_exposition does.
        om = ends_with_eof(text) if openmetrics is None else openmetrics
        if om:
            return self._slow(text, timestamp, openmetrics=True)
        check_line_lengths(text, self.max_line_length, source=self.source)
        self._forget_dropped()
        self.cache.keep_bounded()
        lines = text.split("\n")
        steady = self._steady
        if steady is not None:
            changed = scan_steady(lines, steady)
            if changed is not None:
                return self._ingest_steady(steady, text, lines, changed, timestamp)
            self._drop_steady()  # the layout moved: read line by line, and learn it anew
        slots: list[Series] = []
        raws: list[str] = []
        heads, layout = self._heads, self._layout
        stop = scan_layout(lines, heads, layout, slots=slots, raws=raws)
        pending: list[tuple[int, Series]] = []
        if stop < len(lines):
            read = self._read_changed(lines, stop, slots, raws, pending)
            if read is None:
                return self._slow(text, timestamp, openmetrics=False)
            heads, layout = read
        elif len(heads) > len(lines):
            heads, layout = heads[: len(lines)], layout[: len(lines)]
        samples = len(slots)
        if self.max_samples is not None and samples > self.max_samples:
            return self._slow(text, timestamp, openmetrics=False)
        try:
            values = to_floats(raws)
        except ValueError:
            return self._slow(text, timestamp, openmetrics=False)
        before = self.store.samples_ingested
        self.store.append_scrape(slots, values, timestamp)
        waiting: dict[int, Series] = {}
        for index, series in pending:
            stored = self.store.stored(series.name, series.labels)
            layout[index] = stored
            if stored is None:
                if heads[index] != _NEVER:
                    waiting[index] = series
                heads[index] = _NEVER  # shed, or no value yet: ask the store again next time
        self._steady = steady = self._next_steady(lines, heads, layout, values, waiting)
        # While the layout is compared whole, its heads are the lines' own beginnings:
        # not kept twice (see _drop_steady).
        self._heads, self._layout = ([] if steady is not None else heads), layout
        return IngestResult(samples=samples, stored=self.store.samples_ingested - before)

    def _next_steady(
        self,
        lines: list[str],
        heads: list[str],
        layout: list[Series | None],
        values: list[float],
        waiting: dict[int, Series],
    ) -> SteadyLayout | None:
        """Return the layout to compare the next exposition with whole, if that should pay.

        Building one costs about what reading a line does, so only a layout that held for
        two expositions in a row is considered (one that moves every time is read line by
        line without that cost), and only once the share of lines that changed between the
        two, counted in C, is under STEADY_SHARE: a busy target pays one C pass, not a
        layout and a whole compare, each time it is tried again.
        """
        candidate, self._candidate = self._candidate, None
        if self._steady_wait > 0:
            self._steady_wait -= 1
            return None
        if not (heads is self._heads or heads == self._heads):
            return None
        if candidate is None or len(candidate) != len(lines):
            self._candidate = lines
            return None
        if sum(map(ne, lines, candidate)) > STEADY_SHARE * len(lines):
            self._wait_longer()
            return None
        return _steady_layout(lines, heads, layout, values, waiting)

    def _wait_longer(self) -> None:
        """Read line by line for a while, twice as long as last time (up to the maximum)."""
        self._steady_wait = self._next_wait
        self._next_wait = min(2 * self._next_wait, MAX_STEADY_WAIT)

    def _ingest_steady(
        self,
        steady: SteadyLayout,
        text: str,
        lines: list[str],
        changed: tuple[list[int], list[str]],
        timestamp: float,
    ) -> IngestResult:
        """Store an exposition laid out as the last one: unchanged lines keep their values."""
        places, raws = changed
        samples = steady.samples
        if self.max_samples is not None and samples > self.max_samples:
            return self._slow(text, timestamp, openmetrics=False)
        try:
            converted = to_floats(raws)
        except ValueError:
            return self._slow(text, timestamp, openmetrics=False)
        values = steady.values.copy()
        for place, value in zip(places, converted, strict=True):
            values[place] = value
        before = self.store.samples_ingested
        self.store.append_scrape(steady.slots, values, timestamp)
        steady.lines = lines
        steady.values = values
        self.steady_reads += 1
        store = self.store
        if any(store.stored(series.name, series.labels) for series in steady.waiting):
            # A series that waited got stored (a first value, room under the memory bound):
            # the layout learns it line by line next time.
            self._drop_steady()
        elif len(places) > STEADY_SHARE * len(lines):
            # Most lines change every scrape (busy models, moving quantiles): line by line
            # is cheaper for a while.
            self._drop_steady()
            self._wait_longer()
        else:
            self._next_wait = STEADY_WAIT
        return IngestResult(samples=samples, stored=self.store.samples_ingested - before)

    # ---- lines that changed -----------------------------------------------------------------
    def _read_changed(
        self,
        lines: list[str],
        start: int,
        slots: list[Series],
        raws: list[str],
        pending: list[tuple[int, Series]],
    ) -> tuple[list[str], list[Series | None]] | None:
        """Read lines from ``start`` by their series text; return the new layout (None: slow).

        A new series is carefully parsed, relabelled and looked up in the store once; from
        the next exposition on its line matches by place again.
        """
        known = {
            h: slot for h, slot in zip(self._heads, self._layout, strict=True) if slot is not None
        }
        heads = self._heads[:start]
        layout = self._layout[:start]
        for index in range(start, len(lines)):
            line = lines[index]
            head, _, raw = line.rpartition(" ")
            slot = known.get(head)
            if slot is None:
                read = self._read_new(line, index, head, raw)
                if read is None:
                    return None
                slot, raw, head = read
                if slot is None:
                    heads.append(line)  # a comment or blank line
                    layout.append(None)
                    continue
                if slot.born_unconfirmed and self.store.stored(slot.name, slot.labels) is not slot:
                    pending.append((len(layout), slot))
            slots.append(slot)
            raws.append(raw)
            heads.append(head)
            layout.append(slot)
        return heads, layout

    def _read_new(
        self, line: str, index: int, head: str, raw: str
    ) -> tuple[Series | None, str, str] | None:
        """Read a line not seen before: (slot, value, text to match it by), None to go slow.

        The slot is None for a comment or blank line, SKIP for a family not stored.
        """
        if not line or line[0] in "# \t\r":
            stripped = line.strip()
            if not stripped:
                return None, "", line
            if stripped[0] != "#" or is_eof_line(line):
                return None  # an indented sample, or '# EOF': the slow path decides
            try:
                read_text_comment(stripped, source=self.source, lineno=index + 1)
            except ExpositionError:
                return None
            return None, "", line
        entry = self.cache.series.get(head)
        if entry is not None and is_value_token(raw):
            # A series text parsed before (another pod of the deployment, an earlier scrape).
            if not self._kept(entry.name) or not is_read(entry.name, entry.labels):
                return SKIP, raw, head
            return self._slot(entry), raw, head
        name = metric_name_at(line)
        if name is not None and not self._kept(name) and _looks_whole(head, len(name), raw):
            # A family no feature reads: passed over without reading its labels.
            return SKIP, raw, head
        try:
            entry, value, stamp = read_sample_line(
                line, openmetrics=False, cache=self.cache, source=self.source, lineno=index + 1
            )
        except ExpositionError:
            return None
        if stamp:
            return None  # a sample with its own timestamp: the slow path takes it
        # Only a line whose text before the value is exactly the series text matches by place.
        match = head if self.cache.series.get(head) is entry else _NEVER
        if not self._kept(entry.name) or not is_read(entry.name, entry.labels):
            return SKIP, value, match
        return self._slot(entry), value, match

    def _kept(self, name: str) -> bool:
        kept = self._kept_names.get(name)
        if kept is None:
            kept = is_consumed(name) and (self.keep is None or self.keep(name))
            if len(self._kept_names) > MAX_NAMES_KEPT:
                self._kept_names.clear()
            self._kept_names[name] = kept
        return kept

    def _slot(self, entry: SeriesEntry) -> Series:
        """Return the stored series a line feeds, or a new one (``born_unconfirmed``) to store."""
        name = entry.name
        exporter = exporter_of(name)
        if self._plain_merge and _names_no_target(entry):
            # Neither the target's labels nor any naming a pod: they merge without a clash,
            # and the series is about this target, whose key is the same for all of them.
            labels = tuple(sorted(entry.labels + self.extra_labels))
            key = self._plain_keys.get(exporter)
            if key is None:
                key = self._plain_keys[exporter] = self.store.scrape_key(labels, exporter)
        else:
            labels = relabelled(entry.labels, self.extra_labels, honor_labels=self.honor_labels)
            key = self.store.scrape_key(labels, exporter)
        series = self.store.stored(name, labels)
        if series is not None:
            return series
        return self.store.new_series(name, labels, key)

    def _drop_steady(self) -> None:
        """Stop comparing expositions whole: the layout is read line by line again."""
        steady = self._steady
        if steady is not None:
            self._heads = steady.layout_heads()
            self._steady = None

    def _forget_dropped(self) -> None:
        """Let go of series the store dropped since the last exposition."""
        generation = self.store.generation
        if generation == self._generation:
            return
        self._generation = generation
        self._drop_steady()  # a slot may be gone: the layout decides line by line again
        for index, slot in enumerate(self._layout):
            if slot is not None and slot.scrape_key is DROPPED:
                self._heads[index] = _NEVER
                self._layout[index] = None

    # ---- the slow path --------------------------------------------------------------------
    def _slow(self, text: str, timestamp: float, *, openmetrics: bool) -> IngestResult:
        """Read the exposition as a scrape source would: parse, relabel, keep, add."""
        self.slow_reads += 1
        self._drop_steady()
        exposition = parse_exposition(
            text,
            source=self.source,
            openmetrics=openmetrics,
            default_timestamp=timestamp,
            max_samples=self.max_samples,
            max_line_length=self.max_line_length or 1 << 62,
        )
        extra = self.extra_labels
        kept = [
            Sample(
                s.name,
                relabelled(s.labels, extra, honor_labels=self.honor_labels),
                s.value,
                s.timestamp,
            )
            for s in exposition.samples
            if self.keep is None or self.keep(s.name)
        ]
        before = self.store.samples_ingested
        self.store.add_many(kept, timestamp)
        return IngestResult(
            samples=len(exposition.samples), stored=self.store.samples_ingested - before
        )


# The labels ``targets.target_of`` reads, and a scrape attaches: a series carrying none of
# them is about the target it was scraped from.
TARGET_LABELS = frozenset(
    {"namespace", "exported_namespace", "pod", "exported_pod", "pod_name", "instance"}
)


def _names_no_target(entry: SeriesEntry) -> bool:
    """Tell whether a series' own labels name no target (remembered on the entry)."""
    plain = entry.plain
    if plain is None:
        plain = entry.plain = not any(name in TARGET_LABELS for name, _ in entry.labels)
    return plain


def _looks_whole(head: str, name_end: int, raw: str) -> bool:
    """Tell whether ``head raw`` looks like a whole sample line (name, label set, value)."""
    if not is_value_token(raw):
        return False
    return name_end == len(head) or (head[name_end] == "{" and head[-1] == "}")


def _steady_layout(
    lines: list[str],
    heads: list[str],
    layout: list[Series | None],
    values: list[float],
    waiting: dict[int, Series],
) -> SteadyLayout | None:
    """Return the layout to compare the next exposition with whole, if every line has a slot.

    A line waiting on the store (``waiting``: a new series without a value yet, such as an
    idle model's NaN quantile, or one the memory bound shed) keeps its unstored series as
    its slot, which the store takes once it has a value. None while a line is read the
    slow way (its head is ``_NEVER``): it must be read by its text again, even unchanged.
    Lines of families not stored all write their value to one last place, fed to ``SKIP``,
    so that their values are still checked but cost the store nothing.
    """
    if len(heads) != len(lines) or len(layout) != len(lines):
        return None
    where: list[int] = []
    cuts: list[int] = []
    slots: list[Series] = []
    kept: list[float] = []
    skipped: list[int] = []
    samples = 0
    for index, placed in enumerate(layout):
        slot = placed if placed is not None else waiting.get(index)
        if slot is None:
            if heads[index] == _NEVER:
                return None
            where.append(-1)
            cuts.append(-1)
            continue
        cuts.append(len(heads[index]) if placed is not None else -1)
        if samples == len(values):
            return None
        value = values[samples]
        samples += 1
        if slot is SKIP:
            skipped.append(index)
            where.append(-1)
        else:
            where.append(len(slots))
            slots.append(slot)
            kept.append(value)
    if samples != len(values):
        return None
    for index in skipped:
        where[index] = len(slots)
    slots.append(SKIP)
    kept.append(0.0)
    return SteadyLayout(
        lines, where, cuts, slots, kept, samples, list(waiting.values()), list(waiting)
    )
