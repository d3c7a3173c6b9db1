"""The calibration report's arithmetic: binning, calibration error, the judge and the bar."""

from __future__ import annotations

import math

import pytest

from benchmarks.calibration import (
    Bin,
    Label,
    Point,
    at_or_above,
    bin_index,
    confusions,
    expected_calibration_error,
    recommend,
    reliability,
    wilson_lower,
)


def point(confidence: float, right: bool, cause: str = "batching_delay") -> Point:
    """Return a judged point on a made-up trace."""
    return Point("t", "native", "batching_delay", cause, confidence, 10.0, right)


@pytest.mark.parametrize(
    ("confidence", "index"),
    [(0.0, 0), (0.05, 0), (0.6, 6), (0.2 + 0.4, 6), (0.5999999999999, 6), (0.65, 6), (1.0, 9)],
)
def test_a_confidence_falls_in_the_bin_of_its_lower_edge(confidence: float, index: int) -> None:
    """0.6 sums to 0.6000000000000001 or 0.5999999: both belong with 0.6; 1.0 is in the top bin."""
    assert bin_index(confidence) == index


def test_reliability_counts_right_and_mean_confidence_per_bin() -> None:
    """Each non-empty bin carries its count, how many were right and its mean confidence."""
    table = reliability(
        [point(0.62, True), point(0.68, False), point(0.91, True), point(0.95, True)]
    )
    assert [(b.lo, b.count, b.right) for b in table] == [(0.6, 2, 1), (0.9, 2, 2)]
    assert table[0].accuracy == 0.5
    assert math.isclose(table[0].mean_confidence, 0.65)
    assert math.isclose(table[1].mean_confidence, 0.93)


def test_calibration_error_weights_each_bins_gap_by_its_count() -> None:
    """ECE is the count-weighted mean of |fraction right - mean confidence|; none for no data."""
    table = [Bin(0.6, 0.7, 3, 3, 0.65), Bin(0.9, 1.0, 1, 0, 0.9)]
    assert math.isclose(expected_calibration_error(table), (3 * 0.35 + 1 * 0.9) / 4)
    assert expected_calibration_error([]) == 0.0


def test_a_perfectly_calibrated_bin_has_no_error() -> None:
    """Four findings at 0.75, three right: no gap."""
    table = reliability([point(0.75, True)] * 3 + [point(0.75, False)])
    assert math.isclose(expected_calibration_error(table), 0.0, abs_tol=1e-12)


def test_wilson_lower_bound_is_below_the_fraction_and_tightens_with_count() -> None:
    """A perfect record of 5 is weaker evidence than one of 100; no data says nothing."""
    assert wilson_lower(0, 0) == 0.0
    assert 0.5 < wilson_lower(5, 5) < wilson_lower(100, 100) < 1.0
    assert wilson_lower(19, 20) < 0.95


def test_the_bar_is_the_lowest_edge_from_which_every_higher_one_keeps_95_percent() -> None:
    """A wrong incident at 0.65 among 15 right pushes the bar to 0.7; an unsafe top bin: no bar."""
    right = [point(0.75, True)] * 10 + [point(0.95, True)] * 5
    # The lowest bin holding incidents is the lowest bar that acts on all of them.
    assert recommend(right) == 0.7
    assert recommend([*right, point(0.65, False)]) == 0.7
    assert at_or_above([*right, point(0.65, False)], 0.6) == (16, 15)
    # Forty-five right incidents outweigh one wrong one: 45 of 46 still clears 95 %.
    assert recommend([*right * 3, point(0.65, False)]) == 0.6
    assert recommend([point(0.95, True), point(0.95, False)]) is None
    assert recommend([]) is None


def test_confusions_count_wrong_points_at_the_bar_by_labelled_and_named_cause() -> None:
    """Right points and those under the bar are left out; secondary ones are told apart."""
    wrong = Point("t", "native", "retry_storm", "too_few_instances", 0.7, 5.0, False, False)
    found = confusions([wrong, wrong, point(0.9, True), point(0.5, False)], 0.6)
    assert found == [("retry_storm", "too_few_instances", 2, 0)]


def test_the_judge_reads_the_phase_and_the_cause() -> None:
    """Before the onset nothing is right, in the fault phase only the cause, after it: unjudged."""
    fault = Label("ranker", "batching_delay", onset=100.0, end=200.0)
    assert fault.judge("batching_delay", 99.0) is False
    assert fault.judge("batching_delay", 100.0) is True
    assert fault.judge("model_reload", 150.0) is False
    assert fault.judge("batching_delay", 201.0) is None
    healthy = Label("tagger", None, onset=100.0, end=200.0)
    assert healthy.judge("cold_start", 150.0) is False
