"""Metric names the engine consumes, and which of them are cumulative counters."""

from __future__ import annotations

from tritonguard.core.samples import Labels, label

# Triton's counters carry no `_total` suffix, and traces may type them `unknown`, so the
# engine cannot rely on `# TYPE`: it knows its counters by name.
TRITON_COUNTERS: frozenset[str] = frozenset(
    {
        "nv_inference_request_success",
        "nv_inference_request_failure",
        "nv_inference_count",
        "nv_inference_exec_count",
        "nv_inference_request_duration_us",
        "nv_inference_queue_duration_us",
        "nv_inference_compute_input_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_compute_output_duration_us",
        "nv_cache_num_hits_per_model",
        "nv_cache_num_misses_per_model",
        # ingress-nginx's request counter has no `_total` suffix either.
        "nginx_ingress_controller_requests",
    }
)

# Gauges whose names end like counters; `_count` alone would make them cumulative.
TRITON_GAUGES: frozenset[str] = frozenset({"nv_inference_pending_request_count"})

COUNTER_SUFFIXES: tuple[str, ...] = ("_total", "_sum", "_count", "_bucket")

# Every family any feature reads; sources may use this to filter what they keep.
CONSUMED_PREFIXES: tuple[str, ...] = (
    "nv_inference_",
    "nv_model_load_duration_secs",
    "nv_gpu_utilization",
    "nv_cpu_utilization",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_PCIE_",
    "container_cpu_usage_seconds_total",
    "container_cpu_cfs_periods_total",
    "container_cpu_cfs_throttled_periods_total",
    "container_spec_cpu_quota",
    "container_spec_cpu_period",
    "container_pressure_cpu_waiting_seconds_total",
    "node_cpu_seconds_total",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_pod_container_status_restarts_total",
    "kube_pod_info",
    "nginx_ingress_controller_requests",
)


# Families under a consumed prefix that no feature reads: Triton's compute input/output
# summaries (features take those durations from the cumulative counters), and the
# `_count`/`_sum` of every summary and histogram (features read their quantiles and
# buckets; request counts come from the request counters). Scrapes skip them before
# reading their labels and the store keeps none: in a 50-model scrape they are 1,000 of
# the 2,405 samples.
_SUMMARIES_AND_HISTOGRAMS: tuple[str, ...] = (
    "nv_inference_request_summary_us",
    "nv_inference_queue_summary_us",
    "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us",
    "nv_inference_compute_output_summary_us",
    "nv_inference_request_duration_histogram_us",
    "nv_inference_first_response_histogram_ms",
    "nv_inference_queue_duration_histogram_us",
)
UNREAD_FAMILIES: frozenset[str] = frozenset(
    {
        "nv_inference_compute_input_summary_us",
        "nv_inference_compute_output_summary_us",
        *(family + part for family in _SUMMARIES_AND_HISTOGRAMS for part in ("_count", "_sum")),
    }
)


# The summary quantiles some feature reads, by family: request p50 and p99 (the symptom, the
# births' early latency), the queue's p99, and compute p50 and p99 (a cold start's or a
# reload's slow executions in the tail). Triton exports five a family (0.5, 0.9, 0.95, 0.99,
# 0.999): the other ten a model, a third of its series, are checked like every sample and
# never stored.
READ_QUANTILES: dict[str, frozenset[str]] = {
    "nv_inference_request_summary_us": frozenset({"0.5", "0.99"}),
    "nv_inference_queue_summary_us": frozenset({"0.99"}),
    "nv_inference_compute_infer_summary_us": frozenset({"0.5", "0.99"}),
}


def is_read(name: str, labels: Labels) -> bool:
    """Return whether a series of a consumed family is one some feature reads (its quantile)."""
    wanted = READ_QUANTILES.get(name)
    return wanted is None or label(labels, "quantile") in wanted


def is_counter(name: str) -> bool:
    """Return True when the series is a cumulative counter (rates, resets apply)."""
    # DCGM's PCIe fields are gauges of bytes per second, not counters, in dcgm-exporter.
    return name in TRITON_COUNTERS or (
        name not in TRITON_GAUGES and name.endswith(COUNTER_SUFFIXES)
    )


def is_consumed(name: str) -> bool:
    """Return True when some feature reads this family."""
    return name.startswith(CONSUMED_PREFIXES) and name not in UNREAD_FAMILIES


# Which exporter a family comes from, by prefix: one exporter's scrape of a target is atomic.
_EXPORTER_PREFIXES: tuple[tuple[str, str], ...] = (
    ("nv_", "triton"),
    ("DCGM_", "dcgm"),
    ("container_", "cadvisor"),
    ("node_", "node"),
    ("kube_", "kube-state-metrics"),
    ("nginx_", "ingress"),
)


def exporter_of(name: str) -> str:
    """Return the exporter a family comes from ("" when unknown)."""
    for prefix, exporter in _EXPORTER_PREFIXES:
        if name.startswith(prefix):
            return exporter
    return ""
