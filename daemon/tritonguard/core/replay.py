"""Drive the engine with a trace's own timestamps as its clock."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import groupby

from tritonguard.core.config_info import TRACE_INFO, note_trace_info
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.recorded_configs import RecordedConfigs
from tritonguard.core.samples import Sample


class InTimeOrder(Iterable[Sample]):
    """Samples that iterate in timestamp order already (ties in their recorded order).

    ``drive`` replays these as they come instead of sorting them, so a source can stream a
    trace longer than memory; each iteration starts again from the beginning.
    """

    @abstractmethod
    def __iter__(self) -> Iterator[Sample]:
        """Yield every sample, timestamps never decreasing."""


def check_eval_interval(eval_interval_s: float) -> float:
    """Return the interval if it is a positive finite number of seconds; raise ValueError if not.

    NaN compares false with everything, and 0 or less evaluates nothing after the first
    step, so either would replay a trace without a word and report no incidents.
    """
    if not (math.isfinite(eval_interval_s) and eval_interval_s > 0):
        raise ValueError(
            f"evaluation interval {eval_interval_s!r} s: must be a positive number of seconds "
            "(e.g. 5)"
        )
    return eval_interval_s


def drive(
    engine: Engine,
    samples: Iterable[Sample],
    *,
    eval_interval_s: float = 1.0,
    configs: RecordedConfigs | None = None,
) -> Iterator[tuple[float, list[IncidentEvent]]]:
    """Feed samples in timestamp order; evaluate at most every ``eval_interval_s`` of trace time.

    Samples must carry timestamps. Evaluation happens after each timestamp group that crosses the
    next evaluation time: with the default of one second, at every scrape, as the daemon
    evaluates when a scrape arrives (targets scraped within the same second count as one).
    Samples given as ``InTimeOrder`` are streamed; any others are sorted first (stably:
    samples of one timestamp keep their order).

    ``configs``, a recording's config reads kept beside its trace, reach the engine as the
    daemon's reads would: each subject's first when it falls due, and later ones only when
    the engine asks (``Engine.configs_wanted``), answered with the config in force then.
    """
    check_eval_interval(eval_interval_s)
    first = deque(configs.first_reads() if configs is not None else ())
    ordered: Iterable[Sample] = (
        samples if isinstance(samples, InTimeOrder) else sorted(samples, key=_ts)
    )
    next_eval: float | None = None
    last_t: float | None = None
    for t, group in groupby(ordered, key=_ts):
        if last_t is not None and t < last_t:
            raise ValueError(
                f"sample time {t} comes after {last_t}; a streamed trace must be in time order"
            )
        while first and first[0].at <= t:
            read = first.popleft()
            engine.note_model_config(read.subject, read.config, at=read.at)
        engine.ingest(_noting_configs(engine, group), t)
        last_t = t
        if next_eval is None:
            next_eval = t
        if t >= next_eval:
            events = engine.evaluate(t)
            if engine.configs_wanted:
                _answer(engine, configs, t)
                events += engine.evaluate(t)
            yield t, events
            next_eval = t + eval_interval_s
    if last_t is not None and engine.last_evaluated != last_t:
        yield last_t, engine.evaluate(last_t)


def _answer(engine: Engine, configs: RecordedConfigs | None, t: float) -> None:
    """Give the engine the configs it asked for, as a Triton asked at ``t`` would return them."""
    for subject in engine.configs_wanted:
        config = configs.answer(subject, t) if configs is not None else None
        if config is not None:
            engine.note_model_config(subject, config, at=t)
        else:
            engine.config_unanswered(subject)


def _ts(s: Sample) -> float:
    if s.timestamp is None:
        raise ValueError(f"sample {s.name} has no timestamp; traces need one on every sample")
    return s.timestamp


def _noting_configs(engine: Engine, samples: Iterable[Sample]) -> Iterator[Sample]:
    """Yield the metric samples; give the engine each config read, rollout and ConfigMap change.

    The daemon gets these from the repository API and from discovery, so they are notes to
    the engine (``config_info.note_trace_info``), never series in its store.
    """
    for sample in samples:
        if sample.name in TRACE_INFO:
            note_trace_info(engine, sample)
        else:
            yield sample
