"""A subject whose latency begins to shift is judged once the config it asked for is read.

The first reading of a shift used to weigh the config read before it: a deploy that raised
the batcher's delay through the repository API was judged against the delay it replaced, and
the incident waited a scrape for the re-read (15 s at a 15 s scrape). The engine now holds
that scrape's judgment until the read comes back or is known not to come, at most
``CONFIG_WAIT_S``.
"""

from __future__ import annotations

from itertools import groupby

from tests.unit.synthetic import START, Phase, run_engine, samples_of, triton_model
from tritonguard.core.engine import CONFIG_WAIT_S, Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.recorded_configs import ConfigRead, RecordedConfigs
from tritonguard.core.replay import drive

IV = 15.0
BASE_N = 24
ONSET = START + BASE_N * IV
SUBJECT = Subject("prod", "resnet", "triton-0")
KEY = ("prod", "triton-0", "resnet")


def _config(delay_us: int) -> dict[str, object]:
    return {
        "max_batch_size": 8,
        "dynamic_batching": {"max_queue_delay_microseconds": str(delay_us)},
        "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
    }


def _deploy() -> dict[str, str]:
    """30/s of 12 ms executions; from the onset each request waits 80 ms in the batcher."""
    return triton_model(
        [
            Phase(BASE_N, rps=30, infer_ms=12, queue_ms=1),
            Phase(12, rps=30, infer_ms=12, queue_ms=80),
        ],
        interval=IV,
    )


def _raised() -> RecordedConfigs:
    """Return the served config at the start and the deploy's, delay 0.5 -> 100 ms, at onset."""
    return RecordedConfigs(
        [
            ConfigRead(START, SUBJECT, _config(500)),
            ConfigRead(ONSET + 1.0, SUBJECT, _config(100_000)),
        ]
    )


def _opened(events: list[IncidentEvent]) -> list[tuple[str, float]]:
    return [(e.cause, e.at - ONSET) for e in events if e.event == "opened"]


def test_the_scrape_that_shifted_is_judged_with_the_delay_the_deploy_set() -> None:
    """batching_delay opens on the first slow scrape, with 100 ms read; it used to wait one more."""
    events = run_engine(_deploy(), interval=IV, reads=_raised())
    assert _opened(events) == [("batching_delay", IV)]


def test_a_read_that_brings_nothing_is_judged_at_once() -> None:
    """No config to read (a replay without reads): the asking scrape is judged, not skipped.

    Its reading is the first of the shift, and the incident opens on the next, as before the
    engine asked.
    """
    engine = Engine()
    events: list[IncidentEvent] = []
    for t, evs in drive(engine, samples_of(_deploy(), interval=IV)):
        events += evs
        if t == ONSET + IV:
            assert engine.last_diagnoses[KEY].symptom_reasons
    assert _opened(events) == [("batching_delay", 2 * IV)]


def test_a_read_that_does_not_come_is_waited_for_at_most_config_wait_s() -> None:
    """An unanswered ask holds the subject's judgment, and then the subject is judged without.

    As a daemon whose read of a stalled repository API is still out would: evaluations
    within ``CONFIG_WAIT_S`` of the ask leave the subject as it was judged before; the first
    after it judges the scrape that asked.
    """
    engine = Engine()
    samples = sorted(samples_of(_deploy(), interval=IV), key=lambda s: s.timestamp or 0.0)
    asked_at = None
    for t, group in groupby(samples, key=lambda s: s.timestamp):
        assert t is not None
        engine.ingest(list(group), t)
        engine.evaluate(t)
        if engine.configs_wanted:
            asked_at = t
            break
    assert asked_at is not None and asked_at == ONSET + IV
    before = engine.last_diagnoses[KEY]
    assert not before.symptom_reasons
    engine.evaluate(asked_at + CONFIG_WAIT_S / 2)
    assert engine.last_diagnoses[KEY] is before
    engine.evaluate(asked_at + CONFIG_WAIT_S)
    assert engine.last_diagnoses[KEY].symptom_reasons
