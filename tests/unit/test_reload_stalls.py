"""Cold-looking bursts on a node with no CPU to spare are scheduling stalls, not reloads."""

from __future__ import annotations

from tests.unit.synthetic import Phase, gauge, notation, opened, run_engine, triton_model

IV = 2.0
BASE_N = 60  # two minutes of healthy history at 2 s scrapes


def _two_bursts() -> dict[str, str]:
    """Two one-scrape bursts of slow executions, 40 s apart, on a warm floor at steady load."""
    warm = Phase(20, rps=15, infer_ms=4)
    burst = Phase(1, rps=15, infer_ms=40, queue_ms=60)
    return triton_model([Phase(BASE_N, rps=15, infer_ms=4), burst, warm, burst, warm], interval=IV)


def _node(series: dict[str, str], busy: float, scrapes: int) -> None:
    # Two CPUs: per scrape, ``busy`` of their seconds worked, the rest idle.
    cpus = 2 * IV
    series['node_cpu_seconds_total{instance="node-1:9100",cpu="0",mode="idle"}'] = notation(
        [((1 - busy) * cpus, scrapes)]
    )
    series['node_cpu_seconds_total{instance="node-1:9100",cpu="0",mode="user"}'] = notation(
        [(busy * cpus, scrapes)]
    )


def _causes(series: dict[str, str]) -> set[str]:
    return {c for c, _, _ in opened(run_engine(series, interval=IV))}


def test_two_cold_bursts_on_a_node_with_idle_cpu_are_reload_churn() -> None:
    """With CPU to spare, only the model explains slow executions: two bursts are two reloads."""
    series = _two_bursts()
    _node(series, busy=0.6, scrapes=BASE_N + 43)
    assert "model_reload" in _causes(series)


def test_the_same_bursts_on_a_saturated_node_are_no_reloads() -> None:
    """A node whose cores were all busy stalls threads: its bursts are not reload signs.

    Recorded beside a CPU hog, a 1.35 ms model read 19x and 7x its compute in two single
    scrapes a minute apart, each warm again at once: the shape of two reloads.
    """
    series = _two_bursts()
    _node(series, busy=1.0, scrapes=BASE_N + 43)
    assert "model_reload" not in _causes(series)


def test_bursts_at_a_period_on_a_saturated_node_are_reload_churn() -> None:
    """A job reloading every 40 s on a busy node still reads as churn: stalls do not recur so.

    The stall-like bursts count once they are several and regular; a periodic job's reloads
    are both, the scheduler's stalls neither.
    """
    warm = Phase(19, rps=15, infer_ms=4)
    burst = Phase(1, rps=15, infer_ms=40, queue_ms=60)
    phases = [Phase(BASE_N, rps=15, infer_ms=4)]
    for _ in range(4):
        phases += [burst, warm]
    series = triton_model(phases, interval=IV)
    _node(series, busy=1.0, scrapes=BASE_N + 80)
    assert "model_reload" in _causes(series)


def test_without_node_exporter_tritons_host_cpu_gauge_shows_the_saturation() -> None:
    """Triton's own nv_cpu_utilization at 1.0 stands for node-exporter: the bursts are stalls.

    At 0.6 the host had CPU to spare, and the same two bursts are two reloads.
    """
    for util, reloads in ((1.0, False), (0.6, True)):
        series = _two_bursts()
        series['nv_cpu_utilization{namespace="prod",pod="triton-0"}'] = gauge([(util, BASE_N + 43)])
        assert ("model_reload" in _causes(series)) is reloads, util
