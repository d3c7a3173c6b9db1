"""PromQL source: the raw series the engine consumes, with the timestamps Prometheus stored."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tritonguard.clients.prometheus_query import (
    PrometheusQueryClient,
    PrometheusQueryError,
    PromSample,
)
from tritonguard.core.metric_names import CONSUMED_PREFIXES, READ_QUANTILES, UNREAD_FAMILIES
from tritonguard.core.samples import Labels, Sample
from tritonguard.core.shards import SeriesFilter
from tritonguard.sources.source_status import PollResult, SourceStatus


@dataclass(frozen=True, slots=True)
class QueryGroup:
    """One PromQL selector over a family of exporters.

    Families are queried separately so one slow or huge family (cAdvisor) does not take the
    others down with it.
    """

    name: str
    prefixes: tuple[str, ...]
    # Families under the prefixes that no feature reads, and summary quantiles none reads:
    # left out of the answer, not only out of the store (a Triton's series are half of them).
    unread: tuple[str, ...] = ()
    quantiles: tuple[str, ...] = ()

    def selector(self) -> str:
        """Return ``{__name__=~"..."}``; a prefix ending in ``_`` matches the whole family."""
        parts = [f"{p}.*" if p.endswith("_") else p for p in self.prefixes]
        matchers = ['__name__=~"' + "|".join(parts) + '"']
        if self.unread:
            matchers.append('__name__!~"' + "|".join(self.unread) + '"')
        if self.quantiles:
            # A series without the label matches the empty alternative. The dots stay
            # unescaped (any character): no other quantile Triton exports matches them.
            matchers.append('quantile=~"|' + "|".join(self.quantiles) + '"')
        return "{" + ", ".join(matchers) + "}"


def _group(name: str, match: Callable[[str], bool]) -> QueryGroup:
    return QueryGroup(name, tuple(p for p in CONSUMED_PREFIXES if match(p)))


TRITON_GROUP = QueryGroup(
    "triton",
    tuple(p for p in CONSUMED_PREFIXES if p.startswith("nv_")),
    unread=tuple(sorted(UNREAD_FAMILIES)),
    quantiles=tuple(sorted({q for qs in READ_QUANTILES.values() for q in qs})),
)

DEFAULT_GROUPS: tuple[QueryGroup, ...] = (
    TRITON_GROUP,
    _group("dcgm", lambda p: p.startswith("DCGM_")),
    _group("cadvisor", lambda p: p.startswith("container_")),
    _group("node", lambda p: p.startswith("node_")),
    _group("kube", lambda p: p.startswith("kube_")),
    _group("ingress", lambda p: p.startswith("nginx_")),
)


def to_sample(raw: PromSample) -> Sample | None:
    """Convert one Prometheus sample; series without ``__name__`` (computed ones) are dropped."""
    name = raw.metric.get("__name__")
    if not name:
        return None
    labels = tuple(sorted((k, v) for k, v in raw.metric.items() if k != "__name__"))
    return Sample(name=name, labels=labels, value=raw.value, timestamp=raw.timestamp)


class PrometheusSource:
    """Read raw samples through range selectors (``{__name__=~"..."}[window]``) each poll.

    A range selector in an instant query returns every stored sample with the timestamp it
    was scraped at, so the engine sees the same series it would see scraping directly. The
    first poll reads ``backfill_s`` of history (baselines start warm); later polls read the
    time since the last good poll plus slack, and samples already delivered are skipped.
    With ``shard_filter`` series of another shard's workloads are dropped before anything about them
    is remembered. A Prometheus outage yields no samples and an error status per group, never zeros.
    """

    name = "prometheus"

    def __init__(
        self,
        client: PrometheusQueryClient,
        *,
        interval_s: float = 15.0,
        backfill_s: float = 300.0,
        groups: Sequence[QueryGroup] = DEFAULT_GROUPS,
        clock: Callable[[], float] = time.time,
        shard_filter: SeriesFilter | None = None,
    ) -> None:
        self.interval_s = interval_s
        self._client = client
        # A shard reads the whole fleet and keeps its own workloads' series (and shared ones).
        self._shard_filter = shard_filter
        self._backfill_s = backfill_s
        self._groups = list(groups)
        self._clock = clock
        self._last_ok_at: dict[str, float] = {}
        self._last_ts: dict[tuple[str, Labels], float] = {}

    def _window_s(self, group: str, now: float) -> float:
        # Two intervals of slack cover a Prometheus scrape that lands late in its interval.
        slack = 2 * self.interval_s + 15.0
        last = self._last_ok_at.get(group)
        if last is None:
            return max(self._backfill_s, slack)
        return min(max(now - last + slack, slack), max(self._backfill_s, slack))

    async def poll(self) -> PollResult:
        """Query every group once; each group succeeds or fails on its own."""
        now = self._clock()
        samples: list[Sample] = []
        statuses: list[SourceStatus] = []
        for group in self._groups:
            window = self._window_s(group.name, now)
            promql = f"{group.selector()}[{int(window)}s]"
            started = time.monotonic()
            try:
                raw = await self._client.instant_query(promql, at=now)
            except PrometheusQueryError as exc:
                statuses.append(
                    SourceStatus(
                        source=self.name,
                        target=group.name,
                        ok=False,
                        at=now,
                        duration_s=time.monotonic() - started,
                        error=str(exc),
                    )
                )
                continue
            fresh = self._only_new(raw)
            samples.extend(fresh)
            self._last_ok_at[group.name] = now
            statuses.append(
                SourceStatus(
                    source=self.name,
                    target=group.name,
                    ok=True,
                    at=now,
                    duration_s=time.monotonic() - started,
                    samples=len(fresh),
                )
            )
        self._forget_old(now)
        return PollResult(samples=samples, statuses=statuses)

    def _only_new(self, raw: Sequence[PromSample]) -> list[Sample]:
        fresh: list[Sample] = []
        shard = self._shard_filter
        for item in raw:
            sample = to_sample(item)
            if sample is None or sample.timestamp is None:
                continue
            if shard is not None and not shard.keep(sample.name, sample.labels):
                continue
            key = (sample.name, sample.labels)
            if sample.timestamp <= self._last_ts.get(key, float("-inf")):
                continue
            self._last_ts[key] = sample.timestamp
            fresh.append(sample)
        # Prometheus returns each series' samples in time order, series after series; the
        # engine wants time order across series.
        fresh.sort(key=lambda s: s.timestamp or 0.0)
        return fresh

    def _forget_old(self, now: float) -> None:
        # Series not seen for longer than any window we could ask for can never repeat.
        horizon = now - max(self._backfill_s, 2 * self.interval_s + 15.0) - self.interval_s
        stale = [key for key, ts in self._last_ts.items() if ts < horizon]
        for key in stale:
            del self._last_ts[key]

    async def close(self) -> None:
        """Close the client's HTTP session."""
        await self._client.close()
