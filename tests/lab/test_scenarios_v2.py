"""The v2 scenario catalogue: each part's generators declare what they record, and still match it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tritonguard.core.findings import CAUSES
from tritonguard.lab import record
from tritonguard.lab.scenario_runner import Scenario
from tritonguard.lab.scenarios_v2 import (
    DEADLINE_S,
    HELD_OUT,
    HELD_OUT_3,
    HELD_OUT_3_SCENARIOS,
    HELD_OUT_4,
    HELD_OUT_4_SCENARIOS,
    HELD_OUT_5,
    HELD_OUT_5_SCENARIOS,
    HELD_OUT_6,
    HELD_OUT_6_SCENARIOS,
    HELD_OUT_7,
    HELD_OUT_7_SCENARIOS,
    HELD_OUT_8,
    HELD_OUT_8_SCENARIOS,
    HELD_OUT_9,
    HELD_OUT_9_SCENARIOS,
    HELD_OUT_10,
    HELD_OUT_10_SCENARIOS,
    HELD_OUT_SCENARIOS,
    PARTS,
    PRESSURE,
    PRESSURE_HELD_OUT,
    PRESSURE_HELD_OUT_SCENARIOS,
    PRESSURE_SCENARIOS,
    SCENARIOS_V2,
    TUNING,
    TUNING_SCENARIOS,
)

TRACES_V2 = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2"
# The part each fixture directory holds: the second held-out batch was recorded from ``_h``
# scenarios of the held-out part, the third from its own part.
DIR_PART = {
    "tuning": TUNING,
    "held_out": HELD_OUT,
    "held_out_2": HELD_OUT,
    "held_out_3": HELD_OUT_3,
    "held_out_4": HELD_OUT_4,
    "held_out_5": HELD_OUT_5,
    "held_out_6": HELD_OUT_6,
    "held_out_7": HELD_OUT_7,
    "held_out_8": HELD_OUT_8,
    "held_out_9": HELD_OUT_9,
    "held_out_10": HELD_OUT_10,
    "pressure": PRESSURE,
    "pressure_held_out": PRESSURE_HELD_OUT,
}
# The parts recorded after the first two, each with models of its own.
LATE_PARTS = (
    HELD_OUT_3,
    HELD_OUT_4,
    HELD_OUT_5,
    HELD_OUT_6,
    HELD_OUT_7,
    HELD_OUT_8,
    HELD_OUT_9,
    HELD_OUT_10,
    PRESSURE,
    PRESSURE_HELD_OUT,
)
LABEL_FILES = sorted(TRACES_V2.glob("*/*.labels.json"))
# Recorded before its generator dropped the conversion pass (see its comment in scenarios_v2):
# the trace holds 25/s of 8 MB inputs with one pass, the generator now says 20/s, 10 MB, none.
STALE = {"memory_copy_vision_t"}


def test_the_parts_are_disjoint_and_make_up_the_set() -> None:
    """Every part is selectable by name, and no scenario is in two parts."""
    assert set(PARTS) == {TUNING, HELD_OUT, *LATE_PARTS}
    sizes = [
        len(TUNING_SCENARIOS),
        len(HELD_OUT_SCENARIOS),
        len(HELD_OUT_3_SCENARIOS),
        len(HELD_OUT_4_SCENARIOS),
        len(HELD_OUT_5_SCENARIOS),
        len(HELD_OUT_6_SCENARIOS),
        len(HELD_OUT_7_SCENARIOS),
        len(HELD_OUT_8_SCENARIOS),
        len(HELD_OUT_9_SCENARIOS),
        len(HELD_OUT_10_SCENARIOS),
        len(PRESSURE_SCENARIOS),
        len(PRESSURE_HELD_OUT_SCENARIOS),
    ]
    assert len(SCENARIOS_V2) == sum(sizes)
    for part, scenarios in PARTS.items():
        assert {s.params["part"] for s in scenarios.values()} == {part}


def test_the_third_held_out_part_has_one_scenario_per_cause_family_and_a_control() -> None:
    """Seven ``_h3`` scenarios: five causes, memory copy or CPU, and one healthy control."""
    scenarios = list(HELD_OUT_3_SCENARIOS.values())
    assert len(scenarios) == 7
    assert all(s.name.endswith("_h3") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    fixed = ("batching_delay", "too_few_instances", "cold_start", "retry_storm", "model_reload")
    assert all(causes[c] == 1 for c in fixed)
    assert causes[None] == 1
    assert causes["memory_copy"] + causes["cpu_bottleneck"] == 1


def test_the_third_held_out_part_scrapes_mostly_at_two_seconds() -> None:
    """Four recordings at 2 s (the goal's interval), two at 10 s, one at 5 s, of mixed sources."""
    scenarios = HELD_OUT_3_SCENARIOS.values()
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 2, 2, 5, 10, 10]
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}


def test_the_fourth_held_out_part_covers_the_causes_the_third_left_out() -> None:
    """Six ``_h4`` scenarios: the four causes the third part lacks, a reload, a control."""
    scenarios = list(HELD_OUT_4_SCENARIOS.values())
    assert len(scenarios) == 6
    assert all(s.name.endswith("_h4") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    missing_from_h3 = ("too_many_instances", "cpu_bottleneck", "node_contention", "retry_storm")
    assert all(causes[c] == 1 for c in missing_from_h3)
    assert causes["model_reload"] == 1
    assert causes[None] == 1


def test_the_fourth_held_out_part_scrapes_at_the_goals_interval_and_the_default() -> None:
    """Five recordings at 2 s, one at Prometheus' default 15 s, with sources missing in some."""
    scenarios = HELD_OUT_4_SCENARIOS.values()
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 2, 2, 2, 15]
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}


def test_the_fourth_held_out_cpu_bottleneck_holds_the_server_to_its_quota() -> None:
    """Its demand exceeds the quota it is held to, and the labels say the quota was enforced."""
    scenario = HELD_OUT_4_SCENARIOS["cpu_bottleneck_step_h4"]
    assert scenario.enforce_cpu_quota
    assert scenario.params["cpu_quota_enforced"] is True
    assert scenario.params["cpu_demand_cores"] > 1.5 * scenario.params["cpu_quota_cores"]
    earlier = [s for n, s in SCENARIOS_V2.items() if not n.endswith(("_h4", "_h6", "_h9", "_h10"))]
    assert not any(s.enforce_cpu_quota or "cpu_quota_enforced" in s.params for s in earlier)


LATE_SCENARIOS = [
    *HELD_OUT_3_SCENARIOS.values(),
    *HELD_OUT_4_SCENARIOS.values(),
    *HELD_OUT_5_SCENARIOS.values(),
    *HELD_OUT_6_SCENARIOS.values(),
    *HELD_OUT_7_SCENARIOS.values(),
    *HELD_OUT_8_SCENARIOS.values(),
    *HELD_OUT_9_SCENARIOS.values(),
    *HELD_OUT_10_SCENARIOS.values(),
]


def test_the_pressure_parts_run_every_scenario_on_a_node_already_full() -> None:
    """A background hog of the whole node's worth runs before the onset in every pressure trace.

    That is what the parts are for: a node whose busy share has no room to rise, where only
    Triton's CPU pressure can show a neighbour.
    """
    for scenario in [*PRESSURE_SCENARIOS.values(), *PRESSURE_HELD_OUT_SCENARIOS.values()]:
        hog = scenario.background_hog
        assert hog is not None and hog.workers >= 2, scenario.name


def test_the_fifth_held_out_part_tests_too_many_instances_in_earnest() -> None:
    """Two ``_h5`` too_many_instances: one instance becomes several, each switch as dear as a run.

    The fourth part's was too mild to test the cause (two instances became six, each switch
    cheaper than an execution); here every execution after the deploy pays a switch of at
    least four fifths of its own compute, at 2 s with every source and at 10 s without
    summaries.
    """
    scenarios = list(HELD_OUT_5_SCENARIOS.values())
    assert [s.cause for s in scenarios] == ["too_many_instances"] * 2
    assert all(s.name.endswith("_h5") for s in scenarios)
    for s in scenarios:
        assert s.params["instances_before"] == 1 and s.params["instances_after"] >= 3
        assert s.params["switch_ms"] >= 0.8 * s.params["accel_ms"]
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 10]
    assert {s.summary_latencies for s in scenarios} == {True, False}


def test_the_sixth_held_out_part_has_every_cause_at_the_goals_interval() -> None:
    """Ten ``_h6`` scenarios, all scraped every 2 s: each of the nine causes once, one control.

    The goal's median and p90 are set at a 2 s scrape; this part measures them on traces of
    every cause that no threshold was set on, with sources missing in some and a CPU hog
    beside some.
    """
    scenarios = list(HELD_OUT_6_SCENARIOS.values())
    assert all(s.name.endswith("_h6") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    assert causes == Counter({c: 1 for c in CAUSES} | {None: 1})
    assert {s.scrape_interval_s for s in scenarios} == {2}
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}
    assert any(s.background_hog is not None for s in scenarios)


def test_the_seventh_held_out_part_tests_the_config_read_on_a_shift() -> None:
    """Six ``_h7`` scenarios: counts raised in earnest and healthily, a neighbour, two deploys.

    Where reading the count a change raised could be wrong: two too_many_instances (one
    without DCGM), a healthy raise, contention on a three-instance model (a configured count
    once read as instances fighting), and a count dropped at 10 s and a delay raised at 15 s,
    whose first reading may weigh the config the deploy replaced.
    """
    scenarios = list(HELD_OUT_7_SCENARIOS.values())
    assert all(s.name.endswith("_h7") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    assert causes == Counter(
        {
            "too_many_instances": 2,
            None: 1,
            "node_contention": 1,
            "too_few_instances": 1,
            "batching_delay": 1,
        }
    )
    raised = [s for s in scenarios if s.cause in ("too_many_instances", None)]
    assert all(s.params["instances_after"] > s.params["instances_before"] for s in raised)
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 2, 5, 10, 15]
    assert {s.exporters for s in scenarios} == {True, False}


def test_the_eighth_held_out_part_tests_judging_at_every_scrape_with_the_read_config() -> None:
    """Seven ``_h8`` scenarios: the deploy causes, a reload, a storm and a night, 2-15 s.

    Where a shift judged once its config read is in, at every scrape, could open early or on
    the config the deploy replaced: a delay raised (10 s, no summaries), a count dropped (5 s,
    no exporters), a new version cold (5 s), reloads through the API beside a neighbour, inputs
    grown (no summaries), a storm at Prometheus' default 15 s and traffic falling at night.
    """
    scenarios = list(HELD_OUT_8_SCENARIOS.values())
    assert all(s.name.endswith("_h8") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    assert causes == Counter(
        {
            "batching_delay": 1,
            "too_few_instances": 1,
            "cold_start": 1,
            "model_reload": 1,
            "memory_copy": 1,
            "retry_storm": 1,
            None: 1,
        }
    )
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 2, 5, 5, 10, 15]
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}
    assert any(s.background_hog is not None for s in scenarios)


def test_the_ninth_held_out_part_tests_what_production_adds_to_the_lab() -> None:
    """Seven ``_h9`` scenarios: a canary fleet, a shared server, a cold scale-out, 2-10 s.

    Where production differs most from one quiet pod: a canary on a two-pod fleet beside a
    neighbour, a reloaded model beside another, a pod joining cold without exporters, a quota
    reached without summaries, a neighbour without summaries, instances raised at 10 s, and a
    warmed deploy that must stay quiet.
    """
    scenarios = list(HELD_OUT_9_SCENARIOS.values())
    assert all(s.name.endswith("_h9") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    assert causes == Counter(
        {
            "batching_delay": 1,
            "too_many_instances": 1,
            "cold_start": 1,
            "cpu_bottleneck": 1,
            "node_contention": 1,
            "model_reload": 1,
            None: 1,
        }
    )
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 5, 5, 5, 10, 10]
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}
    assert any(len(s.models) > 1 for s in scenarios)
    assert any(s.background_hog is not None for s in scenarios)


def test_the_tenth_held_out_part_tests_traffic_that_rises() -> None:
    """Seven ``_h10`` scenarios: five healthy rises within capacity, two that exceed it, 2-30 s.

    Every healthy one stays within capacity at its peak even unbatched, so any incident on it
    is a false alarm; the two faults are the same rise past the instances and past a quota.
    """
    scenarios = list(HELD_OUT_10_SCENARIOS.values())
    assert all(s.name.endswith("_h10") for s in scenarios)
    causes = Counter(s.cause for s in scenarios)
    assert causes == Counter({None: 5, "too_few_instances": 1, "cpu_bottleneck": 1})
    assert sorted(s.scrape_interval_s for s in scenarios) == [2, 2, 5, 10, 10, 15, 30]
    for s in scenarios:
        if s.cause is None:
            assert s.params["rate_end"] >= 2.5 * s.params["rate_start"]
            assert s.params["peak_busy_share"] <= 0.5
    assert {s.params.get("ramp") for s in scenarios if s.cause is None} == {True, False}
    assert {s.summary_latencies for s in scenarios} == {True, False}
    assert {s.exporters for s in scenarios} == {True, False}
    assert any(s.more_pods for s in scenarios)
    too_few = HELD_OUT_10_SCENARIOS["too_few_instances_surge_h10"]
    assert too_few.params["fault_rate"] > too_few.params["capacity"]


@pytest.mark.parametrize("scenario", LATE_SCENARIOS, ids=lambda s: s.name)
def test_a_third_held_out_fault_phase_lets_the_deadline_bind(scenario: Scenario) -> None:
    """Three deadlines plus a scrape each fit the fault phase, after eight healthy scrapes."""
    interval = scenario.scrape_interval_s
    assert scenario.fault_s >= 3 * (DEADLINE_S + interval)
    assert scenario.baseline_s >= 8 * interval
    assert scenario.params["fault_s"] == scenario.fault_s
    assert scenario.params["scrape_interval_s"] == interval


@pytest.mark.parametrize("scenario", LATE_SCENARIOS, ids=lambda s: s.name)
def test_a_third_held_out_model_is_built_as_its_parameters_declare(scenario: Scenario) -> None:
    """The served model's compute and instance count are the ones written into its labels."""
    spec = next(m for m in scenario.models if m.name == scenario.model)
    params = scenario.params
    if "accel_ms" in params:
        assert spec.behaviour.accel_ms == params["accel_ms"]
    instances = params.get("instances", params.get("instances_before"))
    if instances is not None:
        assert spec.instance_count == instances
    if "max_batch_size" in params:
        assert spec.max_batch_size == params["max_batch_size"]
    hog = params["background_hog"]
    assert (scenario.background_hog is None) == (hog is None)


@pytest.mark.parametrize("part", [p for p in LATE_PARTS if p != PRESSURE])
def test_a_late_held_out_part_serves_models_no_other_part_serves(part: str) -> None:
    """Its models (and their namespaces' pods) are new, so nothing was tuned on their shape."""
    others = {m.name for p, ss in PARTS.items() if p != part for s in ss.values() for m in s.models}
    new = {m.name for s in PARTS[part].values() for m in s.models}
    assert not new & others


@pytest.mark.parametrize("part", LATE_PARTS)
def test_the_recorder_selects_a_late_held_out_part(
    part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--part held_out_3`` (or ``_4``) is accepted and lists that part's scenarios as known."""
    argv = ["--set", "v2", "--part", part, "--out", "unused", "--only", "no_such_scenario"]
    assert record.main(argv) == 2
    known = capsys.readouterr().err.strip().split("known: ", 1)[1].split(", ")
    assert known == list(PARTS[part])


@pytest.mark.parametrize(
    "labels_path",
    [
        pytest.param(
            p,
            marks=pytest.mark.xfail(strict=True, reason="recorded before its generator changed"),
        )
        if p.name.removesuffix(".labels.json") in STALE
        else p
        for p in LABEL_FILES
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_a_recorded_trace_matches_its_generator(labels_path: Path) -> None:
    """A v2 label file's scenario still generates the parameters, cause and model it recorded."""
    labels = json.loads(labels_path.read_text())
    scenario = SCENARIOS_V2[labels["scenario"]]
    assert labels["params"]["part"] == DIR_PART[labels_path.parent.name]
    assert json.loads(json.dumps(scenario.params)) == labels["params"]
    assert (labels["cause"], labels["model"]) == (scenario.cause, scenario.model)
    assert labels["scrape_interval_s"] == scenario.scrape_interval_s
