"""PromQL source of the exported rules' recorded features: one instant query per feature.

In the ``features`` Prometheus mode the TSDB (Prometheus, Thanos or Mimir) evaluates the
rules of ``tritonguard rules export`` for the whole fleet. Each poll reads every recorded
``tritonguard:<feature>`` the daemon uses, the causes' confidences and the rules' firing cause
alerts (``ALERTS``) with one query each, all at one instant, whatever the size of the fleet,
and keeps the result as one :class:`FeatureSnapshot` (``latest``) that the daemon's
evaluation reads. A poll reads all of it or none of it: a query that fails, times
out, or answers with more than the byte cap makes the whole snapshot unusable, so nothing is
judged on half an evaluation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

from tritonguard.clients.prometheus_query import PrometheusQueryClient, PrometheusQueryError
from tritonguard.core.feature_rows import (
    CONFIDENCE,
    FeatureSnapshot,
    Row,
    SnapshotBuilder,
    alerts_query,
    failed_snapshot,
    feature_query,
    read_features,
)
from tritonguard.core.samples import make_labels
from tritonguard.core.shards import SeriesFilter
from tritonguard.core.thresholds import Thresholds
from tritonguard.logs import get_logger
from tritonguard.sources.source_status import PollResult, SourceStatus

# Queries in flight at once: enough to overlap Prometheus' work with the answers' parsing,
# few enough to leave the default thread pool (cores + 4) to the daemon's other calls.
DEFAULT_QUERY_CONCURRENCY = 4
# A shard keeps a subject by the workload of its pod, as it keeps Triton's own series.
_SHARDED_AS = "nv_inference_request_success"
_log = get_logger("tritonguard.sources.recorded_features")


class RecordedFeatureSource:
    """Read every recorded feature for the whole fleet each poll; keep the newest snapshot.

    ``features`` are the names ``rules_export.recorded_features`` lists, of which only the
    ones an evaluation reads are queried (``read_features``); the causes' confidences and
    the rules' firing cause alerts are read besides, under the same cap, deadline and shard
    filter: a failed alerts query fails the read as a failed feature query does. At most
    ``concurrency`` queries run at once, and a poll gives up after ``deadline_s``. With
    ``shard_filter`` the subjects (and alerts) of other shards' workloads are left out of
    the snapshot (each shard still reads the whole answer).
    """

    name = "prometheus_features"

    def __init__(
        self,
        client: PrometheusQueryClient,
        *,
        features: Sequence[str],
        thresholds: Thresholds,
        interval_s: float = 15.0,
        deadline_s: float | None = None,
        concurrency: int = DEFAULT_QUERY_CONCURRENCY,
        clock: Callable[[], float] = time.time,
        shard_filter: SeriesFilter | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.features = [*read_features(features), CONFIDENCE]
        self.deadline_s = deadline_s if deadline_s is not None else interval_s
        # How old a recorded value may be and still count: the engine's own bound.
        self.window_s = thresholds.stale_after(interval_s)
        # The one query reading the rules' firing cause alerts (named when they seem hidden).
        self.alerts_query = alerts_query()
        self.latest: FeatureSnapshot | None = None
        # Queries sent since the source was made, for /metrics and the tests.
        self.queries = 0
        self._client = client
        self._thresholds = thresholds
        self._concurrency = max(1, concurrency)
        self._clock = clock
        self._shard_filter = shard_filter

    @property
    def url(self) -> str:
        """The Prometheus (Thanos, Mimir) base URL read, without credentials."""
        return self._client.url

    @property
    def max_age_s(self) -> float:
        """How long a snapshot may be acted on: until the next poll's deadline has passed."""
        return self.interval_s + self.deadline_s

    async def poll(self) -> PollResult:
        """Query every feature once at one instant; keep the snapshot, good or failed."""
        now = self._clock()
        started = time.monotonic()
        builder = SnapshotBuilder(self._thresholds, self.interval_s, now)
        error: str | None = None
        read = 0
        try:
            async with asyncio.timeout(self.deadline_s):
                read = await self._read_all(builder, now)
        except* TimeoutError:
            error = (
                f"{self._client.url}: {len(self.features) + 1} queries (features and rule "
                f"alerts) not answered within {self.deadline_s:g}s"
            )
        except* PrometheusQueryError as failed:
            # The first failure stops the others; one reason says what went wrong.
            error = str(failed.exceptions[0])
        except* Exception as broken:
            # Last resort: whatever else a read raises fails this snapshot, not the source's
            # loop (which the supervisor would restart, and ``--once`` would raise).
            first = broken.exceptions[0]
            _log.error(
                "feature read failed unexpectedly",
                url=self._client.url,
                error=f"{type(first).__name__}: {first}",
                exc_info=first,
            )
            if error is None:
                error = f"{self._client.url}: feature read failed ({type(first).__name__}: {first})"
        # What was left out of a good read (snapshot.problems()) the daemon logs, throttled.
        snapshot = (
            builder.build()
            if error is None
            else failed_snapshot(now, self.interval_s, builder.window_s, error)
        )
        self.latest = snapshot
        status = SourceStatus(
            source=self.name,
            target="features",
            ok=error is None,
            at=now,
            duration_s=time.monotonic() - started,
            samples=read if error is None else 0,
            error=error,
        )
        return PollResult(statuses=[status], stored=read if error is None else 0)

    async def _read_all(self, builder: SnapshotBuilder, at: float) -> int:
        """Run the feature and alerts queries, ``concurrency`` at once; stop at the first failure."""
        # None stands for the alerts query, sent last: with one query at a time, the
        # features' order is what it always was.
        jobs: list[tuple[str | None, str]] = [
            *((name, feature_query(name, self.window_s)) for name in self.features),
            (None, self.alerts_query),
        ]
        pending = iter(jobs)
        read = 0

        async def worker() -> None:
            nonlocal read
            for name, promql in pending:
                self.queries += 1
                try:
                    # NaN is kept so the snapshot counts it as not finite rather than losing it.
                    raw = await self._client.instant_query(promql, at=at, keep_nan=True)
                except PrometheusQueryError as failed:
                    if name is None:
                        raise PrometheusQueryError(f"rule alerts query: {failed}") from None
                    raise
                rows = [Row(s.metric, s.value) for s in raw if self.keeps(s.metric)]
                if name is None:
                    builder.add_alerts(rows)
                else:
                    builder.add(name, rows)
                read += len(rows)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(self._concurrency, len(jobs))):
                group.create_task(worker())
        return read

    def keeps(self, metric: Mapping[str, str]) -> bool:
        """Return whether a series (or a rule alert) of these labels is this shard's subject."""
        shard = self._shard_filter
        if shard is None:
            return True
        return shard.keep(_SHARDED_AS, make_labels(metric))

    async def close(self) -> None:
        """Close the client's HTTP session."""
        await self._client.close()
