"""Baselines worked out together for an evaluation are the ones each subject would get alone.

The engine asks ``BaselineHistory.prepare`` for the baselines of the subjects it judges, a
chunk at a time, so that their medians and spreads are one numpy pass instead of one a
subject. Every answer must be the one ``baseline`` gives without it, to the bit: subjects
of different lengths, unknown features, unhealthy snapshots, too little history, a
subject's track moving after the pass, and carried baselines handed back as before.
"""

from __future__ import annotations

import random

import pytest

from tests.unit.test_baseline_medians import _features
from tritonguard.core import baselines
from tritonguard.core.baselines import Baseline, BaselineHistory
from tritonguard.core.features import SubjectKey
from tritonguard.core.thresholds import Thresholds

WINDOW, INTERVAL = 30.0, 10.0


def _histories(seed: int) -> tuple[BaselineHistory, BaselineHistory, list[SubjectKey], float]:
    """Return two histories fed alike: 40 subjects of 0 to 70 snapshots, some unhealthy."""
    t = Thresholds()
    rng = random.Random(seed)
    one, other = BaselineHistory(t), BaselineHistory(t)
    keys = [("prod", f"triton-{k % 7}", f"model-{k}") for k in range(40)]
    now = 1000.0
    for index, key in enumerate(keys):
        # The first subjects have no history, or too little for a baseline.
        count = (0, 2, 4)[index] if index < 3 else rng.randrange(0, 71)
        for k in range(count):
            at = now - 10.0 * (count - k)
            f = _features(rng)
            healthy = rng.random() > 0.2
            one.remember(key, at, f, healthy)
            other.remember(key, at, f, healthy)
    return one, other, keys, now


def _alone(history: BaselineHistory, key: SubjectKey, now: float) -> Baseline | None:
    return history.baseline(key, now, WINDOW, INTERVAL, None)


@pytest.mark.parametrize("pass_snapshots", [1, 200, 8192])
def test_prepared_baselines_are_each_subjects_own_to_the_bit(
    monkeypatch: pytest.MonkeyPatch, pass_snapshots: int
) -> None:
    """Whatever the passes' size, each prepared answer equals the subject's lone baseline.

    Subjects with no history or too short a span get None from both.
    """
    monkeypatch.setattr(baselines, "PASS_SNAPSHOTS", pass_snapshots)
    for seed in range(5):
        prepared, alone, keys, now = _histories(seed)
        prepared.prepare(((key, WINDOW, INTERVAL) for key in keys), now, None)
        answers = [prepared.baseline(key, now, WINDOW, INTERVAL, None) for key in keys]
        expected = [_alone(alone, key, now) for key in keys]
        assert answers == expected
        assert any(a is None for a in answers) and any(a is not None for a in answers)


def _full(history: BaselineHistory, key: SubjectKey, now: float, seed: int) -> None:
    """Give ``key`` healthy snapshots every 10 s over the whole lookback before ``now``."""
    rng = random.Random(seed)
    for k in range(60, 0, -1):
        history.remember(key, now - 10.0 * k, _features(rng), True)


def test_a_track_that_moves_after_the_pass_is_read_again() -> None:
    """A subject whose snapshots change before it asks gets the baseline of its new track.

    Its oldest snapshot leaves the lookback with the next one taken; the prepared answer
    would still count it.
    """
    t = Thresholds()
    prepared, alone = BaselineHistory(t), BaselineHistory(t)
    key: SubjectKey = ("prod", "triton-0", "resnet")
    now = 1000.0
    for history in (prepared, alone):
        _full(history, key, now, seed=1)
    prepared.prepare([(key, WINDOW, INTERVAL)], now, None)
    before = _alone(alone, key, now)
    f = _features(random.Random(2))
    for history in (prepared, alone):
        history.remember(key, now + 10.0, f, True)
    after = prepared.baseline(key, now, WINDOW, INTERVAL, None)
    assert after == _alone(alone, key, now)
    assert before is not None and after is not None
    assert after.snapshots == before.snapshots - 1


def test_a_subject_shed_by_the_memory_bound_after_the_pass_has_no_baseline() -> None:
    """A subject whose history the bound sheds while others are remembered answers None."""
    t = Thresholds()
    history = BaselineHistory(t, max_bytes=10**9)
    old: SubjectKey = ("prod", "triton-0", "resnet")
    new: SubjectKey = ("prod", "triton-1", "bert")
    now = 1000.0
    _full(history, old, now, seed=3)
    _full(history, new, now, seed=4)
    history.prepare([(old, WINDOW, INTERVAL), (new, WINDOW, INTERVAL)], now, None)
    history.max_bytes = history.approx_bytes  # the next snapshot sheds the least recent subject
    history.remember(new, now, _features(random.Random(5)), True)
    assert history.subjects_shed == 1
    assert history.baseline(old, now, WINDOW, INTERVAL, None) is None


def test_an_answer_is_given_once_and_a_second_ask_reads_the_track() -> None:
    """A second ask (a peer's) after the first reads the track as it stands, to the same answer."""
    prepared, alone, keys, now = _histories(11)
    key = next(k for k in keys if _alone(alone, k, now) is not None)
    prepared.prepare([(key, WINDOW, INTERVAL)], now, None)
    first = prepared.baseline(key, now, WINDOW, INTERVAL, None)
    assert first == prepared.baseline(key, now, WINDOW, INTERVAL, None) == _alone(alone, key, now)


def test_a_prepared_answer_for_another_window_or_time_is_not_taken() -> None:
    """An ask with another window, or at another evaluation, is worked out for what it asks."""
    prepared, alone, keys, now = _histories(5)
    key = next(k for k in keys if _alone(alone, k, now) is not None)
    prepared.prepare([(key, WINDOW, INTERVAL)], now, None)
    wide = prepared.baseline(key, now, 3 * WINDOW, INTERVAL, None)
    assert wide == alone.baseline(key, now, 3 * WINDOW, INTERVAL, None)
    prepared.prepare([(key, WINDOW, INTERVAL)], now, None)
    assert prepared.baseline(key, now + 10.0, WINDOW, INTERVAL, None) == _alone(
        alone, key, now + 10.0
    )


def test_a_carried_baseline_goes_only_when_its_own_is_asked_for() -> None:
    """Preparing leaves a saved baseline in place; the subject's own answer hands it back.

    A subject that is prepared but never asked (its data went stale) keeps its saved one.
    """
    prepared, _, keys, now = _histories(7)
    own = [k for k in keys if prepared.baseline(k, now, WINDOW, INTERVAL, None) is not None]
    asked, untouched = own[0], own[1]
    saved = Baseline({"mean_latency_us": 1.0}, 600.0, 60)
    for key in (asked, untouched):
        assert prepared.carry(key, now - 10.0, saved)
    prepared.prepare([(asked, WINDOW, INTERVAL), (untouched, WINDOW, INTERVAL)], now, None)
    assert prepared.carried(untouched, now) is not None
    assert prepared.carried(asked, now) is not None
    assert prepared.baseline(asked, now, WINDOW, INTERVAL, None) is not None
    assert prepared.carried(asked, now) is None
    assert prepared.carried(untouched, now) is not None


def test_the_baselines_saved_for_a_restart_are_each_subjects_own() -> None:
    """``export`` works them out a chunk at a time: each is the subject's lone baseline."""
    prepared, alone, keys, now = _histories(13)  # every snapshot of a 30 s window at 10 s
    saved = prepared.export(now, None)
    expected = [(k, now, b) for k in keys if (b := _alone(alone, k, now)) is not None]
    assert sorted(saved, key=lambda row: row[0]) == sorted(expected, key=lambda row: row[0])
    assert len(saved) > 10
