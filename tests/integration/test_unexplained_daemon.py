"""The daemon says once when a model's latency is up with no cause named, and counts it.

The daemon's own evaluation path (``DaemonApp.evaluate``: metrics, logs, the engine) is fed a
recorded real Triton's trace on the trace's clock, as its sources would feed it scrapes.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from itertools import groupby
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from tests.fault_harness import sample_value
from tritonguard.core.engine import Diagnosis
from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import Subject
from tritonguard.core.unexplained import SOURCES, Unexplained
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings
from tritonguard.sources.replay import load_trace

TRACES = Path(__file__).parents[1] / "fixtures" / "traces_v2"
NOTICE = "latency up with no cause named"
GAUGE = "tritonguard_unexplained_subjects"


def _gauge(registry: CollectorRegistry) -> float:
    text = generate_latest(registry).decode()
    assert f"\n{GAUGE} " in text  # exported, not merely absent (sample_value reads 0 then)
    return sample_value(text, GAUGE)


def _run(
    trace: Path, *, quiet_after_s: float = 0.0
) -> tuple[list[MutableMapping[str, Any]], list[float]]:
    """Feed the trace scrape by scrape, evaluating after each; return the logs and the gauge.

    ``quiet_after_s``: then evaluate that long again every 5 s with no scrape at all, as
    when the pod stops reporting.
    """
    now = {"t": 0.0}
    registry = CollectorRegistry()
    app = DaemonApp(
        Settings(listen="127.0.0.1:0"), registry=registry, clock=lambda: now["t"], sources=[]
    )
    gauge: list[float] = []
    samples = sorted(load_trace(trace), key=lambda s: s.timestamp or 0.0)
    with structlog.testing.capture_logs() as logs:
        for at, group in groupby(samples, key=lambda s: s.timestamp or 0.0):
            now["t"] = at
            app.engine.ingest(group, at)
            app.evaluate()
            gauge.append(_gauge(registry))
        end = now["t"]
        while now["t"] < end + quiet_after_s:
            now["t"] += 5.0
            app.evaluate()
            gauge.append(_gauge(registry))
    return logs, gauge


def test_a_contended_full_node_gets_one_warning_naming_what_is_missing() -> None:
    """node_contention_t names no cause; the daemon warns once, and the gauge counts the model.

    The warning names the subject, the symptom, how long latency has been up and the missing
    source (cgroup CPU pressure), and says no playbook runs. More evaluations of the same run
    do not repeat it.
    """
    logs, gauge = _run(TRACES / "tuning" / "node_contention_t.om.gz")
    lines = [e for e in logs if e["event"] == NOTICE]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line["log_level"] == "warning"
    assert line["model"] == "ocr-v3" and line["pod"]
    assert "container_pressure_cpu_waiting_seconds_total" in str(line["missing"])
    assert isinstance(line["up_for_s"], int | float) and line["up_for_s"] >= 30
    assert "no playbook runs" in str(line["hint"])
    assert str(line["symptom"])
    assert max(gauge) == 1.0 and gauge[0] == 0.0


def test_a_healthy_instance_change_on_a_full_node_warns_of_nothing() -> None:
    """More instances on a full node: nothing named and nothing to say; the gauge stays 0."""
    logs, gauge = _run(TRACES / "pressure" / "healthy_more_instances_full_p.om.gz")
    assert not [e for e in logs if e["event"] == NOTICE]
    assert set(gauge) == {0.0}


def test_a_pod_that_stops_reporting_is_no_longer_counted() -> None:
    """Once its data is stale its latency is unknown: the gauge falls to 0 and no line repeats.

    The contended pod's scrapes stop while it is counted (the trace ends mid-fault); within
    the staleness bound of its data the gauge is back at 0, long before its series expire.
    """
    logs, gauge = _run(TRACES / "tuning" / "node_contention_t.om.gz", quiet_after_s=120.0)
    assert max(gauge) == 1.0 and gauge[-1] == 0.0
    assert len([e for e in logs if e["event"] == NOTICE]) == 1


def test_a_fleet_of_notices_at_once_is_told_in_a_few_lines() -> None:
    """Twelve subjects newly unexplained in one evaluation: ten lines in full, one for the rest."""
    app = DaemonApp(Settings(listen="127.0.0.1:0"), registry=CollectorRegistry(), sources=[])
    # Every source read (one feature of each): the line says none was missing.
    read = {names[0]: 1.0 for names, _, _ in SOURCES}
    f = FeatureSet(window_s=30.0, interval_s=2.0, fresh=True, **read)
    newly = [
        Diagnosis(
            Subject("ml", "ranker", f"triton-{i}"),
            f,
            None,
            [],
            ("mean latency 2.0x baseline",),
            unexplained=Unexplained(0.0, 16),
        )
        for i in range(12)
    ]
    with structlog.testing.capture_logs() as logs:
        app._say_unexplained(newly)
    assert [e["event"] for e in logs] == [NOTICE] * 10 + [NOTICE + " on more subjects"]
    assert logs[-1]["more"] == 2 and logs[-1]["models"] == ["ml/ranker"]
    assert logs[0]["missing"] == "none: every source was read"
