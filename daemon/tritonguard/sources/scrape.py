"""Direct scrape source: Triton `/metrics` endpoints read into the store, labelled as Prometheus would."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeResult, ScrapeTarget
from tritonguard.core.exposition import ExpositionError, parse_exposition
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.shards import SeriesFilter
from tritonguard.core.urls import BasicCredentials
from tritonguard.settings import TargetSettings
from tritonguard.sources.source_status import PollResult, SourceStatus

# Prometheus's sample_limit: a runaway exporter must not exhaust the daemon's memory.
DEFAULT_SAMPLE_LIMIT = 200_000
CUT_MID_LINE = (
    "body cut short: it ends in the middle of a line (an exposition ends with a line feed), "
    "so the connection closed before the whole body arrived"
)


def ends_whole(text: str) -> bool:
    """Return whether a body ends where an exposition can: after a line feed, or at ``# EOF``.

    A server may end its body by closing the connection (HTTP allows it when it sends no
    length); cut there, the body ends inside a line, and its last value would read as a
    smaller one, a counter reset that never happened. Every line of the text format ends
    with a line feed; OpenMetrics may end at ``# EOF`` without one.
    """
    return not text or text.endswith("\n") or text.rstrip(" \t\r").endswith("# EOF")


def target_labels(target: TargetSettings) -> tuple[tuple[str, str], ...]:
    """Return the labels a scrape of ``target`` adds to every sample (empty ones are omitted)."""
    pairs = (("instance", target.instance), ("namespace", target.namespace), ("pod", target.pod))
    return tuple((name, value) for name, value in pairs if value)


def _scrape_target(target: TargetSettings) -> ScrapeTarget:
    """Return what the scraper needs: the target's URL and, apart from it, its credentials."""
    auth = None
    if target.basic_auth is not None:
        auth = BasicCredentials(
            target.basic_auth.username, target.basic_auth.password.get_secret_value()
        )
    return ScrapeTarget(name=target.name, url=target.metrics_url, auth=auth)


def relabel(sample: Sample, extra: tuple[tuple[str, str], ...], *, honor_labels: bool) -> Sample:
    """Attach target labels as Prometheus does.

    On a clash the exporter's label is kept as ``exported_<name>`` (``honor_labels: false``,
    Prometheus's default) or wins outright (``honor_labels: true``, for exporters such as
    kube-state-metrics whose ``namespace``/``pod`` labels describe other pods).
    """
    existing = dict(sample.labels)
    for name, value in extra:
        if name in existing:
            if honor_labels:
                continue
            existing[f"exported_{name}"] = existing[name]
        existing[name] = value
    return Sample(
        name=sample.name,
        labels=tuple(sorted(existing.items())),
        value=sample.value,
        timestamp=sample.timestamp,
    )


@dataclass(frozen=True, slots=True)
class _Planned:
    """One target as a poll uses it: settings, what the scraper needs, labels it adds."""

    target: TargetSettings
    scrape: ScrapeTarget
    labels: Labels


@dataclass(frozen=True, slots=True)
class _Reader:
    """A target's fused reader, with what it was built for (a change builds a new one)."""

    labels: Labels
    honor_labels: bool
    url: str
    ingest: TargetIngest


@dataclass(frozen=True, slots=True)
class _Read:
    """One target's part of a poll: samples to hand on, samples already stored, its status."""

    samples: list[Sample]
    stored: int
    status: SourceStatus


def _plan(targets: Sequence[TargetSettings], extra: Mapping[str, Labels]) -> tuple[_Planned, ...]:
    names = [t.name for t in targets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"target names must be unique; repeated: {', '.join(dupes)}")
    return tuple(
        _Planned(t, _scrape_target(t), target_labels(t) + extra.get(t.name, ())) for t in targets
    )


class ScrapeSource:
    """Scrape targets each poll; a failed scrape yields no samples and an error status.

    Giving no samples for a failed target is what makes its series go stale in the engine:
    missing data stays unknown and is never read as zero. The targets can be replaced between
    polls (discovery): a target no longer listed is not scraped again, so its series go stale
    the same way.

    Given the engine's ``store``, a target's body is read straight into it by the target's
    own ``TargetIngest`` (docs/ingest.md, "The fused scrape path"), without ``Sample``
    objects: the poll then counts those samples in ``PollResult.stored`` instead of
    returning them. A target every shard scrapes, split series by series by the shard
    filter, still gives samples. Without a store (one-off diagnosis, tests) every target
    gives samples.
    """

    name = "scrape"

    def __init__(
        self,
        targets: Sequence[TargetSettings],
        scraper: MetricsScraper,
        *,
        interval_s: float = 15.0,
        keep: Callable[[str], bool] | None = None,
        shard_filter: SeriesFilter | None = None,
        sample_limit: int = DEFAULT_SAMPLE_LIMIT,
        store: SeriesStore | None = None,
    ) -> None:
        self.interval_s = interval_s
        self._scraper = scraper
        self._keep = keep
        # A shard keeps only its own pods' series of an exporter every shard scrapes.
        self._shard_filter = shard_filter
        self._sample_limit = sample_limit
        self._planned = _plan(targets, {})
        self._store = store
        # One reader per target name: what it remembers (last lines, their series) is the
        # target's own, because its labels are.
        self._readers: dict[str, _Reader] = {}

    @property
    def store(self) -> SeriesStore | None:
        """Return the store bodies are read into (None: the poll gives samples)."""
        return self._store

    def use_store(self, store: SeriesStore) -> None:
        """Read bodies into ``store`` from the next poll on (the daemon's engine's)."""
        if store is not self._store:
            self._store = store
            self._readers = {}

    @property
    def targets(self) -> list[TargetSettings]:
        """Return the targets the next poll scrapes."""
        return [p.target for p in self._planned]

    def replace_targets(
        self, targets: Sequence[TargetSettings], labels: Mapping[str, Labels] | None = None
    ) -> None:
        """Scrape exactly ``targets`` from the next poll on; a poll under way keeps its own.

        ``labels`` adds labels per target name (a pod's node and owners) to its samples.
        Raises ValueError, and keeps the old targets, when two targets share a name.
        """
        # One assignment: a poll reads the plan once, so it never sees half of a change.
        self._planned = _plan(targets, labels or {})

    async def poll(self) -> PollResult:
        """Scrape every target once, concurrently."""
        planned = self._planned
        results = await self._scraper.scrape_all([p.scrape for p in planned])
        samples: list[Sample] = []
        statuses: list[SourceStatus] = []
        stored = 0
        for plan, result in zip(planned, results, strict=True):
            read = self._read(plan, result)
            samples.extend(read.samples)
            stored += read.stored
            statuses.append(read.status)
        self._forget_gone()
        return PollResult(samples=samples, statuses=statuses, stored=stored)

    def _read(self, plan: _Planned, result: ScrapeResult) -> _Read:
        """Read one target's scrape: into the store where it can be, else as samples."""
        target = plan.target
        shard = self._shard_filter
        # A pod's own target is given to one shard whole; one every shard scrapes is split
        # series by series, which needs each sample's labels: those stay on samples.
        whole = not target.honor_labels and bool(target.pod)
        if self._store is None or (shard is not None and not whole):
            converted, status = self.convert(target, result, labels=plan.labels)
            return _Read(converted, 0, status)
        body = self._body(target, result)
        if isinstance(body, SourceStatus):
            return _Read([], 0, body)
        reader = self._reader(plan, self._store)
        try:
            read = reader.ingest(body, result.timestamp)
        except ExpositionError as exc:
            # The store is untouched: an unparsable scrape is dropped whole, as Prometheus does.
            return _Read([], 0, self._status(target, result, error=f"bad exposition: {exc}"))
        if shard is not None:
            shard.note_owned(target.namespace, target.pod)
        return _Read([], read.stored, self._status(target, result, samples=read.stored))

    def _reader(self, plan: _Planned, store: SeriesStore) -> TargetIngest:
        """Return the target's reader, built anew when its labels or URL changed."""
        target = plan.target
        reader = self._readers.get(target.name)
        if (
            reader is None
            or reader.labels != plan.labels
            or reader.honor_labels != target.honor_labels
            or reader.url != target.metrics_url
        ):
            ingest = TargetIngest(
                store,
                extra_labels=plan.labels,
                honor_labels=target.honor_labels,
                keep=self._keep,
                source=target.metrics_url,
                max_samples=self._sample_limit,
            )
            reader = _Reader(plan.labels, target.honor_labels, target.metrics_url, ingest)
            self._readers[target.name] = reader
        return reader.ingest

    def _forget_gone(self) -> None:
        """Drop the readers of targets no longer listed (their memory goes with them)."""
        listed = {p.target.name for p in self._planned}
        for name in [n for n in self._readers if n not in listed]:
            del self._readers[name]

    def _body(self, target: TargetSettings, result: ScrapeResult) -> str | SourceStatus:
        """Return the body to read, or the error status of a scrape that has none whole."""
        if not result.ok or result.text is None:
            return self._status(target, result, error=result.error or "no body")
        if not ends_whole(result.text):
            return self._status(target, result, error=CUT_MID_LINE)
        return result.text

    def convert(
        self, target: TargetSettings, result: ScrapeResult, *, labels: Labels | None = None
    ) -> tuple[list[Sample], SourceStatus]:
        """Parse one scrape result into relabelled samples, or an error status.

        ``labels`` are the labels to attach (default: the target's own, :func:`target_labels`).
        """
        body = self._body(target, result)
        if isinstance(body, SourceStatus):
            return [], body
        try:
            exposition = parse_exposition(
                body,
                source=target.metrics_url,
                default_timestamp=result.timestamp,
                max_samples=self._sample_limit,
            )
        except ExpositionError as exc:
            # Prometheus drops the whole scrape of an unparsable exposition; so do we.
            return [], self._status(target, result, error=f"bad exposition: {exc}")
        extra = target_labels(target) if labels is None else labels
        keep = self._keep
        samples = [
            relabel(s, extra, honor_labels=target.honor_labels)
            for s in exposition.samples
            if keep is None or keep(s.name)
        ]
        shard = self._shard_filter
        if shard is not None and target.pod and not target.honor_labels:
            # A pod's own target was given to one shard whole: its series need no sorting.
            shard.note_owned(target.namespace, target.pod)
        elif shard is not None:
            # One every shard scrapes (an exporter describing other pods, or any target
            # without a pod) is split series by series.
            samples = [s for s in samples if shard.keep(s.name, s.labels)]
        return samples, self._status(target, result, samples=len(samples))

    def _status(
        self,
        target: TargetSettings,
        result: ScrapeResult,
        *,
        samples: int = 0,
        error: str | None = None,
    ) -> SourceStatus:
        return SourceStatus(
            source=self.name,
            target=target.name,
            ok=error is None,
            at=result.timestamp,
            duration_s=result.duration_s,
            samples=samples,
            error=error,
        )

    async def close(self) -> None:
        """Close the scraper's HTTP session."""
        await self._scraper.close()
