"""Numbers in messages read as people write them: units, no e-notation, shares as percentages."""

from __future__ import annotations

import pytest

from tritonguard.core import humanize
from tritonguard.core.findings import Evidence


def ev(value: float | None, unit: str, window_s: float = 30.0, what: str = "x") -> Evidence:
    """Return one evidence item."""
    return Evidence(value, unit, window_s, what)


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (1830.0, "1.83 s"),
        (0.5, "500 µs"),
        (94.06, "94.1 ms"),
        (4.213, "4.21 ms"),
        (150.0, "150 ms"),
    ],
)
def test_times_in_the_unit_that_reads_best(ms: float, shown: str) -> None:
    """1 830 ms is 1.83 s, never 1.83e+03 ms; half a millisecond is 500 µs, not 0 ms."""
    assert humanize.milliseconds(ms) == shown


def test_long_durations_in_minutes_and_hours() -> None:
    """Past 100 s a duration reads in minutes (and hours), the way on-call says it."""
    assert humanize.seconds(130) == "2 min 10 s"
    assert humanize.seconds(3600) == "1 h"
    assert humanize.seconds(45.25) == "45.2 s"


def test_busy_instances_read_against_the_configured_count() -> None:
    """0.02 busy instances of 1 is 2 % busy, not 'busy 0.0 instances'."""
    evidence = {"busy_instances": ev(0.02, "instances"), "instance_count": ev(1.0, "instances")}
    assert humanize.value("busy_instances", evidence["busy_instances"], evidence) == (
        "0.02 of 1 (2 %)"
    )
    assert humanize.value("busy_instances", ev(0.0213, "instances")) == "0.021 instances"


def test_shares_are_percentages_and_comparisons_factors() -> None:
    """A share of a whole reads in %, a reading against its baseline as ×N, a spread plainly."""
    assert humanize.value("queue_share", ev(0.924, "ratio")) == "92 %"
    assert humanize.value("ingress_timeouts_share", ev(0.98, "ratio")) == "98 %"
    assert humanize.value("arrivals_vs_baseline", ev(5.94, "ratio")) == "×5.9"
    assert humanize.value("compute_vs_baseline", ev(13.6, "ratio")) == "×14"
    assert humanize.value("container_cpu_vs_quota", ev(0.88, "ratio")) == "88 %"
    assert humanize.value("spike_period_cv", ev(0.123, "ratio")) == "0.12"


def test_counts_are_whole_and_separated() -> None:
    """4 761 pending requests read '4,761 requests'; a yes/no reads yes or no."""
    assert humanize.value("pending", ev(4761.0, "requests")) == "4,761 requests"
    assert humanize.value("pending", ev(1.0, "requests")) == "1 request"
    assert humanize.value("has_model_warmup", ev(0.0, "bool")) == "no"
    assert humanize.value("pcie_rx_bps", ev(1.22e8, "B/s")) == "122 MB/s"


@pytest.mark.parametrize("value", [1e-9, 3.3e-5, 0.5, 7.0, 12345.678, 9.99e12])
def test_no_number_is_ever_written_in_e_notation(value: float) -> None:
    """Whatever the magnitude, a message never shows 'e+' or 'e-'."""
    for shown in (humanize.number(value), humanize.milliseconds(value), humanize.percent(value)):
        assert "e+" not in shown and "e-" not in shown, shown


def test_unknown_is_said_not_zero() -> None:
    """Missing data is unknown, never shown as 0."""
    assert humanize.value("gpu_util", ev(None, "ratio")) == "unknown"


def test_config_values_have_no_window() -> None:
    """A value read from the model config was not measured over a window."""
    assert humanize.window(ev(150.0, "ms", what="model config dynamic_batching")) == ""
    assert humanize.window(ev(150.0, "ms", window_s=30.0)) == "over 30 s"


def test_evidence_ranks_by_weight_then_by_the_signatures_order() -> None:
    """The heaviest evidence comes first; equal weights keep the order they were written in."""
    evidence = {
        "a": Evidence(1.0, "ms", 1, "", 0.0),
        "b": Evidence(1.0, "ms", 1, "", 1.0),
        "c": Evidence(1.0, "ms", 1, "", 0.1),
        "d": Evidence(1.0, "ms", 1, "", 0.0),
    }
    assert [name for name, _ in humanize.ranked(evidence)] == ["b", "c", "a", "d"]
