"""The evaluation's split of the native verdicts by recorded scrape interval (the goal's unit)."""

from __future__ import annotations

from benchmarks.detection_eval import Score, by_interval, p90


def _score(verdict: str, interval: float, delay: float | None, variant: str = "native") -> Score:
    expected = None if verdict == "false-alarm" else "cold_start"
    return Score("t", variant, expected, verdict, None, delay, interval)


def test_each_interval_gets_its_own_counts_median_and_nearest_rank_p90() -> None:
    """Delays of right diagnoses only, per interval; late, silent and alarms are counted apart.

    Ten right delays of 2 to 20 s at 2 s put the nearest-rank p90 on the ninth (18 s: nine
    of the ten are at most that), not between ranks and not on the slowest; a late
    diagnosis's delay stays out of the percentiles.
    """
    scores = [_score("right", 2.0, float(d)) for d in range(2, 22, 2)]
    scores += [_score("late", 2.0, 95.0), _score("silent", 2.0, None)]
    scores += [_score("right", 10.0, 30.0), _score("false-alarm", 10.0, None)]
    lines = by_interval(scores).splitlines()
    assert lines[2] == "| 2 s | 12 (12) | 10 | 1 | 0 | 1 | 0 | 11s | 18s |"
    assert lines[3] == "| 10 s | 2 (1) | 1 | 0 | 0 | 0 | 1 | 30s | 30s |"


def test_only_the_native_variant_is_split() -> None:
    """A resampled variant's verdicts belong to its own interval, so they are left out."""
    scores = [_score("right", 2.0, 8.0), _score("silent", 2.0, None, variant="30s")]
    rows = by_interval(scores).splitlines()[2:]
    assert rows == ["| 2 s | 1 (1) | 1 | 0 | 0 | 0 | 0 | 8s | 8s |"]


def test_the_nearest_rank_p90_is_the_ceil_of_nine_tenths() -> None:
    """The p90 of n sorted values is the ceil(0.9 n)-th: the 27th of 30, the 10th of 11."""
    assert p90([float(k) for k in range(1, 31)]) == 27.0
    assert p90([float(k) for k in range(1, 12)]) == 10.0
    assert p90([5.0]) == 5.0
