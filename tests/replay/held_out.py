"""What the held-out parts of the v2 set share: their cases, and the replay that judges them.

Each part's file names its directory and declares the measured outcome of every case that is
not right, with the reading; the replay made here gives one case per trace and variant, with
the ids ``<trace>-<variant>``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.detection_eval import score, traces

TRACES_V2 = Path(__file__).parent.parent / "fixtures" / "traces_v2"
VARIANTS = ("native", "10s", "30s", "triton-only", "no-summaries")

# (trace, variant) -> (the verdict measured, its reading), for every case that is not right.
Measured = dict[tuple[str, str], tuple[str, str]]
# (trace, its directory, variant)
Case = tuple[str, Path, str]


def cases(part: str) -> list[Case]:
    """Return every trace of one part of the v2 set in every variant."""
    return [(name, d, variant) for name, d in traces([TRACES_V2 / part]) for variant in VARIANTS]


def assert_declarations_name_cases(measured: Measured, part_cases: list[Case]) -> None:
    """Fail when a declaration names a trace or variant that the part does not have."""
    assert set(measured) <= {(name, variant) for name, _, variant in part_cases}


def measured_verdicts(
    part_cases: list[Case], measured: Measured
) -> Callable[[str, Path, str], None]:
    """Return the part's parametrised replay, for its file to hold as a test."""

    @pytest.mark.parametrize(
        ("name", "directory", "variant"), part_cases, ids=[f"{n}-{v}" for n, _, v in part_cases]
    )
    def test_each_case_gives_its_measured_verdict(name: str, directory: Path, variant: str) -> None:
        """Right, or just the measured outcome its part declares; healthy traces open nothing."""
        result = score(name, directory, variant)
        expected, why = measured.get((name, variant), ("right", "right"))
        assert result.verdict == expected, f"{result.line()} (measured: {why})"

    return test_each_case_gives_its_measured_verdict
