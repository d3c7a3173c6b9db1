"""Build deploy/grafana/tritonguard.json with the Grafana Foundation SDK.

Run ``.venv/bin/python deploy/grafana/dashboard.py`` after editing this file; it rewrites the
JSON beside it. tests/unit/test_grafana_dashboard.py fails when the committed JSON differs
from what this builds, and checks every PromQL expression in it with promtool.

The panels read Triton's own metrics (per model, per pod), DCGM's and cAdvisor's, and
tritonguard's (the incidents and playbook steps drawn as annotations on every panel).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, statetimeline, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, dashboard

OUT = Path(__file__).with_name("tritonguard.json")
UID = "tritonguard"
DATASOURCE = dashboard.DataSourceRef(type_val="prometheus", uid="${datasource}")

# The Triton pods shown: namespace, model and pod are dashboard variables.
TRITON = 'namespace=~"$namespace", model=~"$model", pod=~"$pod"'
# cAdvisor and DCGM series of the same pods (they carry no model label).
POD = 'namespace=~"$namespace", pod=~"$pod"'
COMPUTE = '__name__=~"nv_inference_compute_(input|infer|output)_duration_us"'
# Steps that change something or would in dry-run: each is an annotation.
ACTION_STATUSES = "ran|planned|failed|rolled_back|awaiting_approval|rejected|expired"


def _rate(selector: str, by: str = "model") -> str:
    return f"sum by ({by}) (rate({selector}[$__rate_interval]))"


def _per_request(metric_selector: str) -> str:
    """Microseconds per successful request: the counters add each request's share."""
    return f"{_rate(metric_selector)}\n/\n{_rate(f'nv_inference_request_success{{{TRITON}}}')}"


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return (
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(ref)
        .range()
        .datasource(DATASOURCE)
    )


def _legend() -> common_builders.VizLegendOptions:
    return (
        common_builders.VizLegendOptions()
        .display_mode(common.LegendDisplayMode.TABLE)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["mean", "max", "lastNotNull"])
    )


def _tooltip() -> common_builders.VizTooltipOptions:
    return (
        common_builders.VizTooltipOptions()
        .mode(common.TooltipDisplayMode.MULTI)
        .sort(common.SortOrder.DESCENDING)
    )


def _series(title: str, description: str, unit: str, width: int = 12) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(8)
        .legend(_legend())
        .tooltip(_tooltip())
        .fill_opacity(10)
        .line_width(1)
        .show_points(common.VisibilityMode.NEVER)
    )


def _variables() -> list[Builder[dashboard.VariableModel]]:
    source = (
        dashboard_builders.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    )

    def label_values(name: str, label: str, selector: str) -> dashboard_builders.QueryVariable:
        series = (
            f"nv_inference_request_success{{{selector}}}"
            if selector
            else "nv_inference_request_success"
        )
        query = f"label_values({series}, {label})"
        return (
            dashboard_builders.QueryVariable(name)
            .label(label.capitalize())
            .datasource(DATASOURCE)
            .query({"query": query, "refId": f"{name}-values"})
            .refresh(dashboard.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dashboard.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
        )

    return [
        source,
        label_values("namespace", "namespace", ""),
        label_values("model", "model", 'namespace=~"$namespace"'),
        label_values("pod", "pod", 'namespace=~"$namespace", model=~"$model"'),
    ]


def _annotations() -> list[Builder[dashboard.AnnotationQuery]]:
    # Both replicas diagnose and count incidents; only the leader runs steps. max by keeps
    # one replica's view of an incident. A step's counter series starts with its first
    # count, which increase() cannot see: `unless ... offset` catches the new series.
    actions = f'tritonguard_actions_total{{status=~"{ACTION_STATUSES}"}}'
    return [
        dashboard_builders.AnnotationQuery()
        .name("Incidents")
        .datasource(DATASOURCE)
        .enable(True)
        .icon_color("red")
        .expr("max by (cause) (tritonguard_open_incidents) > 0"),
        dashboard_builders.AnnotationQuery()
        .name("Playbook steps")
        .datasource(DATASOURCE)
        .enable(True)
        .icon_color("blue")
        .expr(
            f"sum by (status) (increase({actions}[2m])) > 0\n"
            f"or\nsum by (status) ({actions} unless {actions} offset 2m)"
        ),
    ]


# Prometheus annotation fields Grafana reads that the SDK's AnnotationQuery does not model.
_ANNOTATION_EXTRAS: dict[str, dict[str, Any]] = {
    "Incidents": {"step": "30s", "titleFormat": "{{cause}} open", "tagKeys": "cause"},
    "Playbook steps": {"step": "60s", "titleFormat": "step {{status}}", "tagKeys": "status"},
}


def _latency_panels() -> list[Builder[dashboard.Panel]]:
    queue = _per_request(f"nv_inference_queue_duration_us{{{TRITON}}}")
    infer = _per_request(f"nv_inference_compute_infer_duration_us{{{TRITON}}}")
    io = _per_request(f'{{__name__=~"nv_inference_compute_(input|output)_duration_us", {TRITON}}}')
    p99 = f'max by (model) (nv_inference_request_summary_us{{quantile="0.99", {TRITON}}})'
    queue_p99 = f'max by (model) (nv_inference_queue_summary_us{{quantile="0.99", {TRITON}}})'
    mean = _per_request(f"nv_inference_request_duration_us{{{TRITON}}}")
    return [
        _series(
            "Queue vs compute time per request, by model",
            "Time each successful request spent queued and computing (input, inference, "
            "output), from Triton's cumulative counters per nv_inference_request_success. "
            "Queue time that grows while compute stays flat is batching delay or too few "
            "instances; compute that grows is the model or the GPU.",
            "µs",
            width=24,
        )
        .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        .with_target(_query(queue, "{{model}} queue", "A"))
        .with_target(_query(infer, "{{model}} compute infer", "B"))
        .with_target(_query(io, "{{model}} compute input+output", "C")),
        _series(
            "Request latency p99 (Triton summaries)",
            "nv_inference_request_summary_us and nv_inference_queue_summary_us at quantile "
            "0.99, the worst pod per model. Triton exports them only with "
            "--metrics-config summary_latencies=true; the panel is empty otherwise. They "
            "slide over minutes, so they stay high after a recovery: the mean from the "
            "counters follows it at once.",
            "µs",
        )
        .with_target(_query(p99, "{{model}} p99", "A"))
        .with_target(_query(queue_p99, "{{model}} queue p99", "B"))
        .with_target(_query(mean, "{{model}} mean (counters)", "C")),
        _series(
            "Pending requests",
            "nv_inference_pending_request_count: requests received and not yet executing, "
            "per pod and model.",
            "short",
        ).with_target(
            _query(
                f"sum by (pod, model) (nv_inference_pending_request_count{{{TRITON}}})",
                "{{pod}} {{model}}",
                "A",
            )
        ),
    ]


def _resources_panels() -> list[Builder[dashboard.Panel]]:
    # Compute counters add an execution's time once per request it served: divide by
    # requests per execution (success / exec_count) to get the instances' busy time.
    by = "namespace, pod, model"
    busy = (
        f"{_rate(f'{{{COMPUTE}, {TRITON}}}', by)} / 1e6\n"
        f"* {_rate(f'nv_inference_exec_count{{{TRITON}}}', by)}\n"
        f"/ {_rate(f'nv_inference_request_success{{{TRITON}}}', by)}"
    )
    container = f'{POD}, container!="", container!="POD"'
    cpu_used = _rate(f"container_cpu_usage_seconds_total{{{container}}}", "pod")
    cpu_limit = (
        f"sum by (pod) (container_spec_cpu_quota{{{container}}}"
        f" / container_spec_cpu_period{{{container}}})"
    )
    throttled = (
        f"{_rate(f'container_cpu_cfs_throttled_periods_total{{{container}}}', 'pod')}\n"
        f"/\n{_rate(f'container_cpu_cfs_periods_total{{{container}}}', 'pod')}"
    )
    waiting = _rate(f"container_pressure_cpu_waiting_seconds_total{{{container}}}", "pod")
    return [
        _series(
            "Instance busy (compute seconds per second)",
            "Compute time per second of wall time per pod and model, corrected for "
            "dynamic batching (Triton adds an execution's time once per request in it). "
            "1 means one model instance computing all the time: near the instance "
            "count, the model has no idle instance left.",
            "short",
        ).with_target(_query(busy, "{{pod}} {{model}}", "A")),
        _series(
            "GPU utilization",
            "DCGM_FI_DEV_GPU_UTIL (dcgm-exporter, per pod with its Kubernetes mapping on) "
            "and Triton's own nv_gpu_utilization. A saturated queue with an idle GPU "
            "points at CPU or batching, not the accelerator.",
            "percent",
        )
        .max(100)
        .min(0)
        .with_target(_query(f"avg by (pod) (DCGM_FI_DEV_GPU_UTIL{{{POD}}})", "{{pod}} DCGM", "A"))
        .with_target(
            _query(f"avg by (pod) (nv_gpu_utilization{{{POD}}}) * 100", "{{pod}} Triton", "B")
        ),
        _series(
            "Triton host CPU",
            "nv_cpu_utilization: CPU use of the node Triton runs on (host-wide, 0-1).",
            "percentunit",
        )
        .max(1)
        .min(0)
        .with_target(_query(f"max by (pod) (nv_cpu_utilization{{{POD}}})", "{{pod}}", "A")),
        _series(
            "Container CPU: used vs limit, throttled",
            "cAdvisor: CPU cores the Triton containers use against their CFS quota, and "
            "the share of CFS periods throttled (right axis). Throttling with the GPU "
            "underused is the cpu_bottleneck signature.",
            "short",
        )
        .with_target(_query(cpu_used, "{{pod}} used", "A"))
        .with_target(_query(cpu_limit, "{{pod}} limit", "B"))
        .with_target(_query(throttled, "{{pod}} throttled", "C"))
        .override_by_query(
            "C",
            [
                dashboard.DynamicConfigValue(id_val="unit", value="percentunit"),
                dashboard.DynamicConfigValue(
                    id_val="custom.axisPlacement", value=common.AxisPlacement.RIGHT
                ),
            ],
        ),
        _series(
            "Waiting for a CPU (cgroup CPU pressure)",
            "The kubelet's PSI metric: the share of time at least one Triton thread was "
            "runnable but waited for a CPU. It rises when other work takes the node's CPUs "
            "even where the node was already full and its busy share cannot rise, the "
            "node_contention evidence on a packed node.",
            "percentunit",
        )
        .max(1)
        .min(0)
        .with_target(_query(waiting, "{{pod}}", "A")),
    ]


def _state(title: str, description: str, expr: str, legend: str) -> statetimeline.Panel:
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .span(12)
        .height(6)
        .with_target(_query(expr, legend, "A"))
        .mappings(
            [
                dashboard.ValueMap(
                    options={
                        "0": dashboard.ValueMappingResult(text="no", color="red"),
                        "1": dashboard.ValueMappingResult(text="yes", color="green"),
                    }
                )
            ]
        )
    )


def _daemon_panels() -> list[Builder[dashboard.Panel]]:
    return [
        _series(
            "Open incidents by cause",
            "tritonguard_open_incidents: both replicas diagnose, the panel shows the larger "
            "count. 'no cause named' (tritonguard_unexplained_subjects): models with latency "
            "up a full window and no cause held; the daemon's log names them and what it "
            "could not read.",
            "short",
        )
        .with_target(_query("max by (cause) (tritonguard_open_incidents)", "{{cause}}", "A"))
        .with_target(_query("max(tritonguard_unexplained_subjects)", "no cause named", "B")),
        _series(
            "Playbook steps by status",
            "tritonguard_actions_total: steps ran, planned (dry-run), skipped, failed, "
            "rolled back, and approvals, per interval.",
            "short",
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        .with_target(
            _query(
                "sum by (status) (increase(tritonguard_actions_total[$__rate_interval]))",
                "{{status}}",
                "A",
            )
        ),
        _state(
            "Source targets answering",
            "tritonguard_source_up: 1 when any replica's last poll of the target worked.",
            "max by (source, target) (tritonguard_source_up)",
            "{{source}} {{target}}",
        ),
        _state(
            "Leader",
            "tritonguard_leader: the replica that may run playbooks (exactly one).",
            "max by (pod) (tritonguard_leader)",
            "{{pod}}",
        ),
        _series(
            "Tick lag",
            "tritonguard_source_tick_lag_seconds: how late each source's newest tick "
            "started. Above the poll interval, diagnoses run on old data.",
            "s",
        ).with_target(
            _query(
                "max by (pod, source) (tritonguard_source_tick_lag_seconds)",
                "{{pod}} {{source}}",
                "A",
            )
        ),
        _series(
            "Discovered Triton pods",
            "tritonguard_discovery_targets by watched namespace (the metric's own "
            "namespace label; exported_namespace when the scrape does not honour labels).",
            "short",
        ).with_target(
            _query(
                "max by (namespace, exported_namespace) (tritonguard_discovery_targets)",
                "{{exported_namespace}}{{namespace}}",
                "A",
            )
        ),
    ]


def build() -> dict[str, Any]:
    """Return the dashboard's JSON model."""
    board = (
        dashboard_builders.Dashboard("tritonguard: Triton tail latency")
        .uid(UID)
        .description(
            "Queue vs compute per model, p99, pending, instance busy, GPU and CPU of the "
            "Triton pods tritonguard watches; its incidents and playbook steps as annotations."
        )
        .tags(["tritonguard", "triton"])
        .time("now-3h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dashboard.DashboardCursorSync.CROSSHAIR)
        .editable()
        .variables(_variables())
        .annotations(_annotations())
    )
    for title, panels in (
        ("Latency: queue vs compute", _latency_panels()),
        ("Instances, GPU and CPU", _resources_panels()),
        ("tritonguard", _daemon_panels()),
    ):
        # An open row with its panels after it: Grafana drops panels nested in an open row.
        board.with_row(dashboard_builders.Row(title).collapsed(False))
        for panel in panels:
            board.with_panel(panel)
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    # Panel links and ?viewPanel= need an id unique in the dashboard.
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
    for annotation in model["annotations"]["list"]:
        annotation.update(_ANNOTATION_EXTRAS[annotation["name"]])
    return model


def render() -> str:
    """Return the JSON text written to tritonguard.json."""
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT}\n")
