"""Replay of the CPU-pressure part of the v2 set: faults and controls on a node already full.

Every trace runs beside a background hog of the whole node's worth from its first scrape,
so the node's busy share has no room to rise at the onset. Recorded from a real Triton on
2026-12-07 with the lab's cAdvisor exporting cgroup CPU pressure
(`container_pressure_cpu_waiting_seconds_total`). All four shaped the pressure evidence and
the load-fall rule of node_contention (docs/detection.md, "Contention on a full node"), so
they are tuning traces; `test_v2_pressure_held_out.py` holds the part recorded after them.
"""

from __future__ import annotations

from tests.replay.held_out import (
    Measured,
    assert_declarations_name_cases,
    cases,
    measured_verdicts,
)

# Triton's series alone carry neither cgroup CPU pressure nor the node's CPU, and the host's
# nv_cpu_utilization was already full: nothing shows a neighbour, and the engine abstains.
_BLIND = "no CPU pressure without cAdvisor, and the host was full before the onset"
# The load rose sixfold on a host already full: Triton's CPU grew with it (0.13 -> 0.50
# cores) but never neared its 1-core quota, as the hog kept the cores; nothing shows that the
# CPU is this model's limit rather than the node's, and nothing else is named.
_FULL_HOST = "a full host held Triton's CPU under its quota: no cause is shown, none named"
MEASURED: Measured = {
    ("node_contention_full_p", "triton-only"): ("silent", _BLIND),
    ("node_contention_full_fast_p", "triton-only"): ("silent", _BLIND),
    **{
        ("cpu_bottleneck_full_p", variant): ("silent", _FULL_HOST)
        for variant in ("native", "10s", "30s", "triton-only", "no-summaries")
    },
}
CASES = cases("pressure")


def test_the_part_holds_its_four_recordings() -> None:
    """Four recordings, one per scenario of the part, and every declaration names one of them."""
    names = {name for name, _, _ in CASES}
    assert len(names) == 4
    assert_declarations_name_cases(MEASURED, CASES)


test_each_case_gives_its_measured_verdict = measured_verdicts(CASES, MEASURED)
