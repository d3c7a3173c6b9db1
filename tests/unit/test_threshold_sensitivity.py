"""The sensitivity report's pure parts: which values are tried, and how verdicts are compared."""

from __future__ import annotations

import math

from benchmarks.detection_eval import Score
from benchmarks.threshold_sensitivity import Change, changes, describe, perturbations, worse
from tritonguard.core.thresholds import Thresholds


def s(trace: str, variant: str, verdict: str, got: str | None, delay: float | None = 10.0) -> Score:
    """Return a score of a batching_delay trace."""
    return Score(trace, variant, "batching_delay", verdict, got, delay)


def test_floats_move_by_ten_percent_and_counts_by_one() -> None:
    """Every numeric threshold is tried; unset SLOs are not, and 0 has no neighbour to try."""
    found = {p.name: p for p in perturbations()}
    assert set(found) == {
        n for n, v in Thresholds().model_dump().items() if v is not None and not isinstance(v, bool)
    }
    ci = found["compute_inflation"]
    assert ci.low is not None and ci.high is not None
    assert math.isclose(ci.low, 1.26) and math.isclose(ci.high, 1.54)
    assert (found["fast_scrapes"].low, found["fast_scrapes"].high) == (3, 5)
    assert found["fast_scrapes"].integer
    assert (found["hold_s"].low, found["hold_s"].high) == (None, None)
    assert "slo_p99_us" not in found


def test_a_value_the_model_refuses_is_not_tried() -> None:
    """fast_abnormal must be at least 1: from 1 there is no lower value to try."""
    (p,) = [x for x in perturbations(Thresholds(fast_abnormal=1)) if x.name == "fast_abnormal"]
    assert (p.low, p.high) == (None, 2)


def test_only_changed_verdicts_or_causes_are_reported() -> None:
    """Same verdict and cause is stable; a new verdict, or a wrong answer naming another cause, is not."""
    default = [s("a", "native", "right", "batching_delay"), s("b", "native", "wrong", "cold_start")]
    same = [
        s("a", "native", "right", "batching_delay", 12.0),
        s("b", "native", "wrong", "cold_start"),
    ]
    assert changes(default, same) == []
    moved = [s("a", "native", "silent", None), s("b", "native", "wrong", "model_reload")]
    assert changes(default, moved) == [
        Change("a", "native", "right", "silent", None),
        Change("b", "native", "wrong", "wrong", "model_reload"),
    ]


def test_worse_means_a_right_answer_lost_or_a_wrong_cause_named() -> None:
    """Wrong to silent is an improvement; silent to wrong and a new false alarm are not."""
    assert worse(Change("a", "native", "right", "late", "batching_delay"))
    assert worse(Change("a", "native", "silent", "wrong", "cold_start"))
    assert worse(Change("h", "native", "right", "false-alarm", "cold_start"))
    assert not worse(Change("a", "native", "wrong", "silent", None))
    assert not worse(Change("a", "native", "silent", "right", "batching_delay"))


def test_a_cell_names_each_flip_once_with_its_variants_unless_all_flip() -> None:
    """A flip under every variant run needs no variant list; one under some lists them."""
    found = [
        Change("a", "native", "right", "silent", None),
        Change("a", "10s", "right", "silent", None),
        Change("h", "10s", "right", "false-alarm", "cold_start"),
    ]
    assert describe(found, ["native", "10s"]) == (
        "a right → silent; h right → false alarm (cold_start) [10s]"
    )
    assert describe([], ["native"]) == "stable"


def test_a_cell_notes_a_moved_median_delay() -> None:
    """Stable verdicts that arrive later say so: the median time to the right diagnosis moved."""
    default = [s("a", "native", "right", "batching_delay", 10.0)]
    later = [s("a", "native", "right", "batching_delay", 14.0)]
    assert describe([], ["native"], default, later) == "stable (median native 10→14 s)"
    assert describe([], ["native"], default, default) == "stable"
