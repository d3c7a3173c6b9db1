"""The live-run plumbing without servers: retiming, judging incidents, Prometheus config, demo plans."""

from __future__ import annotations

import socket

import pytest
import yaml

from tests.e2e.checks import describe
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.lab.demo import DemoError, action_line, plan_demo
from tritonguard.lab.demo_faults import DEFAULT_FAULTS, QUICK_FAULTS
from tritonguard.lab.detect_live import cell
from tritonguard.lab.live_lab import Outcome, judge, retimed
from tritonguard.lab.loadgen import (
    ERROR_TEXT_CHARS,
    MAX_ERROR_KINDS,
    OTHER_ERRORS,
    LoadGenerator,
    LoadSpec,
    LoadStats,
    rate_at,
)
from tritonguard.lab.prometheus_server import ScrapeJob, render_config
from tritonguard.lab.scenarios import SCENARIOS


def _event(kind: str, cause: str, model: str, at: float, ns: str = "vision") -> IncidentEvent:
    return IncidentEvent(
        event=kind,  # type: ignore[arg-type]
        incident_id=f"{ns}/{model}/{cause}",
        cause=cause,
        subject=Subject(ns, model, f"{model}-0"),
        at=at,
        confidence=0.8,
        summary="",
        evidence={},
        fix=Fix("x"),
        opened_at=at,
    )


def test_retimed_moves_the_onset_and_the_fault_load_with_it() -> None:
    """The rate schedule keeps its shape relative to the new onset and ends with the new phase."""
    s = retimed(SCENARIOS["too_few_instances"], baseline_s=50, fault_s=40)
    assert (s.baseline_s, s.fault_s) == (50, 40)
    (load,) = s.loads
    assert load.spec.duration_s == 90
    assert rate_at(load.spec.schedule, 49, 90) == 15
    assert rate_at(load.spec.schedule, 55, 90) == pytest.approx(23.5)
    assert rate_at(load.spec.schedule, 70, 90) == 32


def test_retimed_starts_a_load_that_began_at_onset_at_the_new_onset() -> None:
    """memory_copy's large-input client starts at the onset, wherever the onset moves."""
    s = retimed(SCENARIOS["memory_copy"], baseline_s=30, fault_s=20)
    small, large = s.loads
    assert (small.start_s, small.spec.duration_s) == (0, 30)
    assert (large.start_s, large.spec.duration_s) == (30, 20)


def test_judge_takes_the_first_right_incident_after_onset_and_keeps_the_rest() -> None:
    """A right cause after onset is the detection; a wrong cause or a pre-onset alarm is kept."""
    out = Outcome("too_few_instances", "too_few_instances", "vision", "detector", onset_at=100.0)
    judge(
        out,
        "scrape",
        [
            _event("opened", "node_contention", "detector", 90),
            _event("opened", "too_few_instances", "other-model", 110),
            _event("opened", "too_few_instances", "detector", 118),
            _event("updated", "too_few_instances", "detector", 140),
        ],
    )
    assert out.detections["scrape"].delay_s == 18
    assert [e.cause for e in out.other["scrape"]] == ["node_contention"]
    assert cell(out, "scrape") == "yes, 18 s (also: node_contention -10 s)"
    assert cell(out, "prometheus") == "no"


def test_a_miss_is_told_with_what_the_engine_last_concluded() -> None:
    """A fault a way missed carries its engine's view into the JSON and the assertion message."""
    out = Outcome("memory_copy", "memory_copy", "vision", "detector", onset_at=100.0)
    out.undiagnosed["prometheus"] = "no symptom; baseline; no finding"
    judge(out, "scrape", [_event("opened", "memory_copy", "detector", 118)])
    assert describe(out, "prometheus") == (
        "memory_copy (prometheus): not detected; the engine at the fault's end: "
        "no symptom; baseline; no finding"
    )
    assert describe(out, "scrape") == "memory_copy (scrape): detected after 18s"
    assert out.as_dict()["undiagnosed"] == {"prometheus": "no symptom; baseline; no finding"}


def test_a_wrong_cause_is_told_with_the_evidence_it_stood_on() -> None:
    """A wrong incident's confidence and numbers, heaviest first, reach the message and JSON."""
    out = Outcome("model_reload", "model_reload", "recsys", "recommender", onset_at=100.0)
    wrong = _event("opened", "node_contention", "recommender", 110, ns="recsys")
    wrong.evidence = {
        "host_cpu": Evidence(None, "ratio", 30, "unknown"),
        "node_cpu_busy": Evidence(0.97, "ratio", 30, "node", weight=0.35),
        "compute_vs_baseline": Evidence(1.91, "ratio", 30, "compute", weight=1.0),
    }
    judge(
        out,
        "prometheus",
        [wrong, _event("opened", "model_reload", "recommender", 156, ns="recsys")],
    )
    line = "node_contention 0.80: compute_vs_baseline=1.91 node_cpu_busy=0.97"
    assert out.as_dict()["other_evidence"] == {"prometheus": [line]}
    assert describe(out, "prometheus") == (
        f"model_reload (prometheus): detected after 56s; other incidents: "
        f"opened node_contention at +10s ({line})"
    )


def test_judge_counts_anything_opened_on_a_control_as_a_false_alarm() -> None:
    """A healthy control has no detection; every incident opened on it is reported."""
    out = Outcome("healthy_steady", None, "ml", "tagger", onset_at=100.0)
    judge(out, "prometheus", [_event("opened", "cold_start", "tagger", 130, ns="ml")])
    assert not out.detections
    assert cell(out, "prometheus") == "opened cold_start +30 s"


def test_prometheus_config_gives_each_job_its_interval_and_labels() -> None:
    """The generated scrape config is what Prometheus reads: per-job interval, target labels."""
    text = render_config(
        [ScrapeJob("t", ["127.0.0.1:8002"], 2.0, {"namespace": "ml", "pod": "p-0"})]
    )
    (job,) = yaml.safe_load(text)["scrape_configs"]
    assert job["scrape_interval"] == "2000ms"
    assert job["static_configs"] == [
        {"targets": ["127.0.0.1:8002"], "labels": {"namespace": "ml", "pod": "p-0"}}
    ]


def test_demo_plans() -> None:
    """Default, quick and --only plans pick their faults; an unknown cause is a clear error."""
    assert plan_demo().faults == DEFAULT_FAULTS
    assert plan_demo(quick=True).faults == QUICK_FAULTS
    assert plan_demo(["retry_storm", "retry_storm"]).faults == ("retry_storm",)
    assert plan_demo(act=False).total_s() < 300
    # Acting holds each fault until its fix is verified; the cut comes sooner (``should_cut``).
    assert plan_demo().total_s() < 8 * 60
    with pytest.raises(DemoError, match="unknown cause 'slow'"):
        plan_demo(["slow"])


def test_demo_shows_a_planned_config_change_as_old_to_new() -> None:
    """A dry-run config change reads as path: old → new, with its playbook and mode."""
    record = {
        "playbook": "batching-delay-lower-queue-delay",
        "action": "triton.update_config",
        "status": "planned",
        "dry_run": True,
        "reason": "dry-run",
        "detail": {
            "model": "ranker",
            "changes": [
                {
                    "path": "dynamic_batching.max_queue_delay_microseconds",
                    "old": 150000,
                    "new": 500,
                }
            ],
        },
    }
    assert action_line(record) == (
        "  playbook batching-delay-lower-queue-delay: triton.update_config planned [dry-run]"
        " (dry-run) dynamic_batching.max_queue_delay_microseconds: 150000 → 500"
    )


async def test_requests_no_server_answered_are_counted_by_what_was_raised() -> None:
    """A client whose every request fails unanswered says so, beside the ingress's 502s.

    Nothing listens on the port, so no request reaches a server: each attempt is a 502 at
    the lab's ingress, as before, and the run also keeps what the client raised, which is
    what tells a harness that sent nothing from a server that failed.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with LoadGenerator(f"127.0.0.1:{port}") as gen:
        stats = await gen.run(LoadSpec("absent", concurrency=1, duration_s=0.5))
    failed = stats.attempts["502"]
    assert failed > 0
    assert stats.succeeded == 0
    assert sum(stats.client_errors.values()) == failed
    assert all("Error" in kind for kind in stats.client_errors)


def test_client_errors_are_bounded_in_kinds_and_text() -> None:
    """Many distinct failures keep a few kinds, each briefly, and every failure is counted."""
    stats = LoadStats()
    for k in range(3 * MAX_ERROR_KINDS):
        stats.client_error(OSError(f"reset {k} " + "x" * 1000))
    stats.client_error(OSError("reset 0 " + "x" * 1000))
    assert len(stats.client_errors) == MAX_ERROR_KINDS + 1
    assert stats.client_errors[OTHER_ERRORS] == 2 * MAX_ERROR_KINDS
    assert sum(stats.client_errors.values()) == 3 * MAX_ERROR_KINDS + 1
    assert all(len(kind) <= ERROR_TEXT_CHARS for kind in stats.client_errors)
    assert stats.client_errors[f"OSError: reset 0 {'x' * 1000}"[:ERROR_TEXT_CHARS]] == 2


def test_a_miss_names_the_requests_no_server_answered() -> None:
    """The assertion message and JSON carry the clients' unanswered failures."""
    out = Outcome("memory_copy", "memory_copy", "vision", "detector", onset_at=100.0)
    out.client_errors = {"ResourceWarning: Sending a large body": 412}
    assert describe(out, "scrape") == (
        "memory_copy (scrape): not detected; requests no server answered: "
        "412 x ResourceWarning: Sending a large body"
    )
    assert out.as_dict()["client_errors"] == {"ResourceWarning: Sending a large body": 412}
