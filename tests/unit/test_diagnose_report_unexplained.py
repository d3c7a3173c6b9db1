"""`tritonguard diagnose`'s text report when latency is up and no cause signature holds."""

from __future__ import annotations

from rich.console import Console

from tritonguard.cli.cmd_diagnose import _print_report
from tritonguard.core.engine import Diagnosis, Engine
from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import Finding, Fix, Subject
from tritonguard.core.unexplained import Unexplained


def test_the_report_says_no_cause_holds_and_lists_what_was_not_read() -> None:
    """Latency up, nothing named: the abstention is said, with each source that was missing.

    A Triton scraped alone (its host CPU only): the report lists the summaries, DCGM,
    cAdvisor, CPU pressure and the ingress as not read, and says how long latency was up.
    """
    engine = Engine()
    subject = Subject("ml", "ranker", "t-0")
    f = FeatureSet(window_s=30.0, interval_s=2.0, fresh=True, request_rate=20.0, cpu_host_util=1.0)
    engine.last_diagnoses[("ml", "t-0", "ranker")] = Diagnosis(
        subject, f, None, [], ("mean latency 1.8x baseline",), unexplained=Unexplained(0.0, 17)
    )
    console = Console(record=True, width=200)
    _print_report(console, engine, [])
    text = console.export_text()
    assert "latency is up — mean latency 1.8x baseline" in text
    assert "no cause signature holds (latency up for 17 evaluations)" in text
    not_read = [line for line in text.splitlines() if line.strip().startswith("not read:")]
    assert len(not_read) == 5
    assert any("container_pressure_cpu_waiting_seconds_total" in line for line in not_read)
    assert "healthy —" not in text


def test_a_weak_finding_does_not_hide_that_no_cause_holds() -> None:
    """A finding under the opening confidence is listed, and the abstention is still said."""
    engine = Engine()
    subject = Subject("ml", "ranker", "t-0")
    f = FeatureSet(window_s=30.0, interval_s=2.0, fresh=True, request_rate=20.0)
    weak = Finding("node_contention", subject, 0.25, "the node may be busy", {}, Fix("look"))
    engine.last_diagnoses[("ml", "t-0", "ranker")] = Diagnosis(
        subject, f, None, [weak], ("p99 1.6x baseline",), unexplained=Unexplained(0.0, 20)
    )
    console = Console(record=True, width=200)
    _print_report(console, engine, [])
    text = console.export_text()
    assert "node_contention (confidence 0.25)" in text
    assert "no cause signature holds (latency up for 20 evaluations)" in text
