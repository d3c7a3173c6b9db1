"""Latency up with no cause held: when a run counts as unexplained, and what it says is missing."""

from __future__ import annotations

from tritonguard.core.features import FeatureSet
from tritonguard.core.unexplained import NamelessRuns, missing_sources

KEY = ("ml", "t-0", "ranker")


def _features(interval: float = 2.0, **values: float) -> FeatureSet:
    return FeatureSet(window_s=30.0, interval_s=interval, fresh=True, **values)


def test_a_run_is_unexplained_once_it_spans_a_window_and_the_hold() -> None:
    """Not before a full window of evaluations up: until then the window straddles the onset.

    At 2 s evaluations with a 30 s window the run qualifies on its 16th evaluation (30 s
    after its first), is reported as new exactly then, and stays unexplained, not new, after.
    """
    runs = NamelessRuns(hold=2)
    f = _features()
    seen = [runs.observe(KEY, True, 100.0 + 2 * k, f) for k in range(18)]
    assert [u is not None for u, _ in seen] == [False] * 15 + [True] * 3
    assert [newly for _, newly in seen] == [False] * 15 + [True, False, False]
    last, _ = seen[-1]
    assert last is not None and last.since == 100.0 and last.evaluations == 18
    assert runs.unexplained == 1


def test_a_coarse_scrape_still_needs_the_hold() -> None:
    """At 30 s evaluations one evaluation spans no window; the second, 30 s on, does."""
    runs = NamelessRuns(hold=2)
    f = _features(interval=30.0)
    assert runs.observe(KEY, True, 0.0, f) == (None, False)
    unexplained, newly = runs.observe(KEY, True, 30.0, f)
    assert unexplained is not None and newly


def test_a_cause_held_or_latency_back_ends_the_run() -> None:
    """One evaluation that is not nameless starts the count again, and the gauge falls.

    A new run counts from its own first evaluation; forgetting a subject (gone or stale) takes
    it out of the count once, however often it is forgotten.
    """
    runs = NamelessRuns(hold=2)
    f = _features()
    for k in range(16):
        runs.observe(KEY, True, 2.0 * k, f)
    assert runs.unexplained == 1
    assert runs.observe(KEY, False, 32.0, f) == (None, False)
    assert runs.unexplained == 0
    assert runs.observe(KEY, True, 34.0, f) == (None, False)
    for k in range(18, 34):
        runs.observe(KEY, True, 2.0 * k, f)
    assert runs.unexplained == 1
    runs.forget(KEY)
    assert runs.unexplained == 0
    runs.forget(KEY)
    assert runs.unexplained == 0


def test_missing_sources_name_each_absent_exporter_and_what_it_shows() -> None:
    """Each source with none of its features read is named; Triton's host CPU covers the node's.

    A server with only Triton's series, its host-wide CPU and its own GPU utilisation lacks
    the summaries, DCGM (its PCIe bytes), cAdvisor, CPU pressure and ingress counters, not
    node-exporter.
    """
    bare = _features(cpu_host_util=0.4, gpu_util=0.7)
    names = [source for source, _ in missing_sources(bare)]
    assert len(names) == 5
    assert not any(name.startswith("node-exporter") for name in names)
    assert any(name.startswith("DCGM") for name in names)
    full = _features(
        p99_us=9e3,
        pcie_rx_bps=1e9,
        container_cpu_cores=0.3,
        cpu_waiting_share=0.05,
        node_cpu_busy=0.4,
        ingress_rate=20.0,
    )
    assert missing_sources(full) == ()
    (pressure,) = missing_sources(
        _features(
            p99_us=9e3,
            pcie_tx_bps=1e8,
            container_cpu_cores=0.3,
            node_cpu_busy=0.9,
            ingress_rate=1.0,
        )
    )
    assert "container_pressure_cpu_waiting_seconds_total" in pressure[0]
    assert "node_contention" in pressure[1]
