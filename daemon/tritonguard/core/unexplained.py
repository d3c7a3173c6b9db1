"""Latency up with no cause named: how long, and which sources the engine could not read."""

from __future__ import annotations

from dataclasses import dataclass

from tritonguard.core.features import FeatureSet, SubjectKey

# The sources whose absence leaves some mechanism unseen: the features each gives (None when
# the source is absent), what it is, and the causes that need it. Triton's own series are
# always there, so they are not listed. Where Triton's own series stand in for part of a
# source (nv_gpu_utilization for DCGM's utilisation, nv_cpu_utilization for the node's CPU),
# the source is missing only when nothing gives what the stand-in cannot: DCGM's PCIe bytes,
# and a CPU reading of the node at all.
SOURCES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("p99_us",),
        "Triton latency summaries or histograms (tritonserver --metrics-config "
        "summary_latencies=true)",
        "the p99, and with summaries the compute tail: model_reload and cold_start at coarse "
        "scrapes",
    ),
    (
        ("pcie_rx_bps", "pcie_tx_bps"),
        "DCGM exporter",
        "PCIe bytes and the accelerator's use: memory_copy, too_many_instances",
    ),
    (
        ("container_cpu_cores",),
        "cAdvisor (kubelet /metrics/cadvisor)",
        "container CPU, quota and throttling: cpu_bottleneck",
    ),
    (
        ("cpu_waiting_share",),
        "cgroup CPU pressure (container_pressure_cpu_waiting_seconds_total, kubelet PSI metrics)",
        "threads waiting for a CPU on a node already full: node_contention",
    ),
    (
        ("node_cpu_busy", "cpu_host_util"),
        "node-exporter",
        "the node's CPU: node_contention, cpu_bottleneck",
    ),
    (
        ("ingress_rate",),
        "ingress-nginx counters",
        "client timeouts (499/504): retry_storm",
    ),
)


@dataclass(frozen=True, slots=True)
class Unexplained:
    """A subject whose latency has been up a full window while no cause held."""

    since: float
    evaluations: int


def missing_sources(f: FeatureSet) -> tuple[tuple[str, str], ...]:
    """Return (source, what it would show) for each source with none of its features read."""
    return tuple(
        (source, shows)
        for names, source, shows in SOURCES
        if all(getattr(f, name) is None for name in names)
    )


def missing_text(f: FeatureSet) -> str:
    """Return the missing sources as one line; empty when every source was read."""
    return "; ".join(f"{source} ({shows})" for source, shows in missing_sources(f))


class NamelessRuns:
    """Each subject's current run of evaluations with latency up and no cause held.

    A run counts as unexplained once it spans a full rate window and ``hold`` evaluations:
    until the window lies wholly past the onset its per-window checks (steadiness, the
    sustained tercile) still mix healthy and faulty scrapes, and a cause may yet be read;
    after that every scrape the window holds is up, and no mechanism showed in them.
    """

    def __init__(self, hold: int) -> None:
        self.hold = hold
        # key -> (first evaluation of the run, evaluations in it, unexplained yet); the flag
        # keeps the count of unexplained subjects exact as runs start, qualify and end.
        self._runs: dict[SubjectKey, tuple[float, int, bool]] = {}
        self._unexplained = 0

    def observe(
        self, key: SubjectKey, nameless: bool, now: float, f: FeatureSet
    ) -> tuple[Unexplained | None, bool]:
        """Count one evaluation; return the run if unexplained, and whether it just became so.

        ``nameless``: latency sustained up against a baseline, no finding at the opening
        confidence and no incident open. ``f`` is the subject's features (their window).
        """
        if not nameless:
            self.forget(key)
            return None, False
        since, count, was = self._runs.get(key, (now, 0, False))
        count += 1
        now_unexplained = count >= self.hold and now - since >= f.window_s
        self._runs[key] = (since, count, now_unexplained)
        self._unexplained += now_unexplained - was
        if not now_unexplained:
            return None, False
        return Unexplained(since, count), not was

    def forget(self, key: SubjectKey) -> None:
        """End a subject's run (a cause held, latency came back, or the subject left view)."""
        run = self._runs.pop(key, None)
        if run is not None:
            self._unexplained -= run[2]

    @property
    def unexplained(self) -> int:
        """Return how many subjects are unexplained now."""
        return self._unexplained
