"""A model's config is read again when its latency shifts, and the causes weigh the change.

The daemon reads configs every five minutes; a deploy through the repository API in between
leaves the counters running. The engine asks for a read when a subject's latency shifts
(``Engine.configs_wanted``), a replay answers from the recording's reads as a Triton would,
and too_many_instances reads the instance count the change raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.unit.synthetic import (
    START,
    Phase,
    gauge,
    opened,
    run_engine,
    samples_of,
    triton_model,
)
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.recorded_configs import ConfigRead, RecordedConfigs
from tritonguard.core.replay import drive
from tritonguard.core.shift_reads import MAX_PER_EVALUATION, ShiftReads

IV = 5.0
BASE_N = 24
ONSET = START + BASE_N * IV
SUBJECT = Subject("prod", "resnet", "triton-0")
KEY = ("prod", "triton-0", "resnet")


def _config(count: int) -> dict[str, object]:
    return {
        "max_batch_size": 8,
        "dynamic_batching": {"max_queue_delay_microseconds": "500"},
        "instance_group": [{"count": count, "kind": "KIND_GPU"}],
    }


def _read_list(before: int, after: int) -> list[ConfigRead]:
    """Return the lab's reads: the served config at the start, the deployed one after the onset."""
    return [
        ConfigRead(START, SUBJECT, _config(before)),
        ConfigRead(ONSET + 1.0, SUBJECT, _config(after)),
    ]


def _reads(before: int, after: int) -> RecordedConfigs:
    """Return the lab's reads as a replay answers them."""
    return RecordedConfigs(_read_list(before, after))


def _contended(gpu_after: float | None) -> dict[str, str]:
    """1 -> 3 instances on one device at a steady 30/s: each inference 2.5x slower.

    0.9 executions in flight afterwards (0.36 before), under the 1.3 that shows overlap
    without a config, and the queue's share down, as instances take requests sooner.
    ``gpu_after`` is the device's busy percentage after the onset (None: no DCGM).
    """
    series = triton_model(
        [
            Phase(BASE_N, rps=30, infer_ms=12, queue_ms=2),
            Phase(36, rps=30, infer_ms=30, queue_ms=1),
        ],
        interval=IV,
    )
    if gpu_after is not None:
        series['DCGM_FI_DEV_GPU_UTIL{namespace="prod",pod="triton-0",gpu="0"}'] = gauge(
            [(36, BASE_N), (gpu_after, 36)]
        )
    return series


def _first(events: list[IncidentEvent], cause: str) -> IncidentEvent | None:
    return next((e for e in events if e.event == "opened" and e.cause == cause), None)


def test_a_raised_instance_count_names_too_many_instances_below_the_overlap_bar() -> None:
    """Instances a deploy raised 1 -> 3 contend at 0.9 executions in flight; the fix goes back.

    The device is 55 % busy, under `gpu_underused` (0.7) but above the 0.3 that 0.9
    executions on three instances imply: it did not idle while they ran.
    """
    events = run_engine(_contended(55), interval=IV, reads=_reads(1, 3))
    found = _first(events, "too_many_instances")
    assert found is not None, f"opened: {opened(events)}"
    assert 0 <= found.at - ONSET <= 60
    assert found.evidence["instances_before"].value == 1
    assert found.fix is not None and "back to 1" in found.fix.text


def test_without_the_config_under_one_execution_in_flight_names_nothing() -> None:
    """The same run with no config read: 0.9 in flight is no proof instances overlap."""
    events = run_engine(_contended(55), interval=IV)
    assert _first(events, "too_many_instances") is None


def test_a_configured_count_that_did_not_change_is_no_contention() -> None:
    """Three instances before and after: slower work puts more in flight at the same load.

    Configs fed to the replays showed this case: node contention on a two-instance model,
    with Triton's series only (no DCGM, whose idle device would have vetoed it), read as
    too_many_instances when a configured count > 1 counted as overlap.
    """
    events = run_engine(_contended(None), interval=IV, reads=_reads(3, 3))
    assert _first(events, "too_many_instances") is None


def test_a_device_idler_than_its_executions_imply_vetoes_the_raised_count() -> None:
    """0.9 executions on three instances keep one in flight 30 % of the time; 20 % busy is idle.

    The executions waited for something other than the device.
    """
    events = run_engine(_contended(20), interval=IV, reads=_reads(1, 3))
    assert _first(events, "too_many_instances") is None


class _Asked(RecordedConfigs):
    """The lab's reads, noting when the engine asked for one."""

    def __init__(self, reads: list[ConfigRead]) -> None:
        super().__init__(reads)
        self.asked: list[float] = []

    def answer(self, subject: Subject, at: float) -> Mapping[str, Any] | None:
        """Answer as the recording does; remember the time of asking."""
        self.asked.append(at)
        return super().answer(subject, at)


def test_a_replay_knows_a_later_config_only_once_the_engine_asks() -> None:
    """A healthy model never asks: the lab's read after the onset stays unseen, as in the daemon."""
    healthy = triton_model([Phase(BASE_N + 36, rps=30, infer_ms=12, queue_ms=2)], interval=IV)
    engine = Engine()
    reads = _Asked(_read_list(1, 3))
    for _ in drive(engine, samples_of(healthy, interval=IV), configs=reads):
        pass
    config = engine.model_config(KEY)
    assert reads.asked == []
    assert config is not None and config.instance_count == 1

    engine = Engine()
    reads = _Asked(_read_list(1, 3))
    for _ in drive(engine, samples_of(_contended(55), interval=IV), configs=reads):
        pass
    config = engine.model_config(KEY)
    assert config is not None and config.instance_count == 3
    assert reads.asked and ONSET <= reads.asked[0] <= ONSET + 2 * IV


def test_a_stale_count_does_not_hide_saturated_instances() -> None:
    """A deploy drops 4 -> 2 instances: until the new count is read, the busy count judges.

    At a 15 s scrape one evaluation opens an incident, and the read the shift asks for comes
    after it. Read against the count before the deploy, two saturated instances look half
    busy, and too_few_instances would wait a scrape for the re-read; it opens when it does
    with no config at all.
    """
    iv = 15.0
    series = triton_model(
        [
            Phase(BASE_N, rps=60, infer_ms=30, queue_ms=2),
            Phase(12, rps=66, infer_ms=30, queue_ms=120, pending=20),
        ],
        interval=iv,
    )
    onset = START + BASE_N * iv
    reads = RecordedConfigs(
        [ConfigRead(START, SUBJECT, _config(4)), ConfigRead(onset + 1.0, SUBJECT, _config(2))]
    )
    with_reads = _first(run_engine(series, interval=iv, reads=reads), "too_few_instances")
    unknown = _first(run_engine(series, interval=iv), "too_few_instances")
    assert unknown is not None and with_reads is not None
    assert with_reads.at == unknown.at


def test_a_shift_asks_once_a_window_and_again_after_it_ends() -> None:
    """One read per window while the latency is up; a new shift asks at once."""
    reads = ShiftReads()
    ask = dict(read_at=None, window_s=30.0, room=True)
    assert reads.want(KEY, shifting=True, now=100.0, **ask)  # type: ignore[arg-type]
    assert not reads.want(KEY, shifting=True, now=110.0, **ask)  # type: ignore[arg-type]
    assert reads.want(KEY, shifting=True, now=131.0, **ask)  # type: ignore[arg-type]
    assert not reads.want(KEY, shifting=False, now=140.0, **ask)  # type: ignore[arg-type]
    assert reads.want(KEY, shifting=True, now=145.0, **ask)  # type: ignore[arg-type]


def test_a_read_within_the_window_is_the_one_in_force() -> None:
    """A config read 10 s ago (a periodic or an incident's read) needs no other."""
    reads = ShiftReads()
    assert not reads.want(KEY, shifting=True, read_at=90.0, now=100.0, window_s=30.0, room=True)
    assert reads.want(KEY, shifting=True, read_at=60.0, now=100.0, window_s=30.0, room=True)


def test_a_fleet_wide_shift_asks_a_bounded_number_per_evaluation() -> None:
    """Past the per-evaluation cap a subject is not marked, so it asks at the next one."""
    reads = ShiftReads()
    assert not reads.want(KEY, shifting=True, read_at=None, now=100.0, window_s=30.0, room=False)
    assert reads.want(KEY, shifting=True, read_at=None, now=105.0, window_s=30.0, room=True)
    assert MAX_PER_EVALUATION >= 1


def test_the_answer_is_the_newest_read_at_or_before_the_ask() -> None:
    """As a Triton asked at that moment would return: never a read from later."""
    configs = _reads(1, 3)
    assert configs.answer(SUBJECT, START - 1) is None
    assert configs.answer(SUBJECT, ONSET) == _config(1)
    assert configs.answer(SUBJECT, ONSET + 1.0) == _config(3)
    assert configs.answer(Subject("prod", "other", "triton-0"), ONSET) is None
    assert [r.at for r in configs.first_reads()] == [START]
