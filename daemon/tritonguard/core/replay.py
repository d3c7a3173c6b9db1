"""Drive the engine with a trace's own timestamps as its clock."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby

from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.samples import Sample


def drive(
    engine: Engine, samples: Iterable[Sample], *, eval_interval_s: float = 5.0
) -> Iterator[tuple[float, list[IncidentEvent]]]:
    """Feed samples in timestamp order; evaluate at most every ``eval_interval_s`` of trace time.

    Samples must carry timestamps. Evaluation happens after each timestamp group that crosses the
    next evaluation time, so a trace scraped every 30 s is evaluated at each scrape and one
    scraped every 2 s every ``eval_interval_s``.
    """
    ordered = sorted(samples, key=_ts)
    next_eval: float | None = None
    last_t: float | None = None
    for t, group in groupby(ordered, key=_ts):
        engine.ingest(group, t)
        last_t = t
        if next_eval is None:
            next_eval = t
        if t >= next_eval:
            yield t, engine.evaluate(t)
            next_eval = t + eval_interval_s
    if last_t is not None and engine.last_evaluated != last_t:
        yield last_t, engine.evaluate(last_t)


def _ts(s: Sample) -> float:
    if s.timestamp is None:
        raise ValueError(f"sample {s.name} has no timestamp; traces need one on every sample")
    return s.timestamp
