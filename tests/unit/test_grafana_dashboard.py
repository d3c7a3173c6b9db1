"""deploy/grafana: the dashboard is what its generator builds, its PromQL parses, its ConfigMap renders."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.unit.promql_checks import (
    assert_known_metrics,
    check_exprs,
    consumed_names,
    run_promtool,
    self_metric_names,
)

ROOT = Path(__file__).parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
K8S_VERSION = "1.31.0"
# What Grafana puts in place of its variables before it sends a query.
_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "30s",
    "$namespace": "ml",
    "$model": "resnet|bert",
    "$pod": "triton-0|triton-1",
}


def _generator() -> ModuleType:
    """Import deploy/grafana/dashboard.py, which is a script beside its output, not a package."""
    spec = importlib.util.spec_from_file_location("tritonguard_dashboard", GRAFANA / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def board() -> dict[str, Any]:
    """Load the committed dashboard JSON."""
    data = json.loads((GRAFANA / "tritonguard.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def _exprs(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression: panel targets, annotations, the selectors of variable queries."""
    exprs = [t["expr"] for p in _panels(board) for t in p["targets"]]
    exprs += [a["expr"] for a in board["annotations"]["list"]]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            match = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
            assert match, query
            exprs.append(match.group(1))
    return exprs


def _substituted(expr: str) -> str:
    for name, value in _VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a variable Grafana does not define in {expr!r}"
    return expr


def test_the_committed_json_is_what_the_generator_builds() -> None:
    """tritonguard.json is the SDK's output, unedited: run dashboard.py after changing it."""
    built = _generator().render()
    assert (GRAFANA / "tritonguard.json").read_text(encoding="utf-8") == built


def _lost(original: Any, again: Any, path: str = "") -> list[str]:
    """Return the paths whose value in ``original`` is missing or different in ``again``."""
    if isinstance(original, dict) and isinstance(again, dict):
        return [
            lost
            for key, value in original.items()
            for lost in (
                _lost(value, again[key], f"{path}/{key}") if key in again else [f"{path}/{key}"]
            )
        ]
    if isinstance(original, list) and isinstance(again, list) and len(original) == len(again):
        return [
            lost
            for i, pair in enumerate(zip(original, again, strict=True))
            for lost in _lost(*pair, f"{path}[{i}]")
        ]
    return [] if original == again else [path]


def test_the_json_is_a_dashboard_of_grafanas_schema(board: dict[str, Any]) -> None:
    """The JSON loads into the SDK's dashboard model (Grafana's schema) and back, losing nothing.

    Only the Prometheus annotation fields the model does not define (the generator adds them)
    are dropped on the way; an unknown field or a value of the wrong shape would be too.
    """
    from grafana_foundation_sdk.cog import plugins
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    plugins.register_default_plugins()
    again = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
    extras = {"step", "titleFormat", "tagKeys"}
    expected = [
        f"/annotations/list[{i}]/{key}"
        for i, annotation in enumerate(board["annotations"]["list"])
        for key in sorted(extras & set(annotation))
    ]
    assert sorted(_lost(board, again)) == sorted(expected)
    assert len(expected) == 2 * len(extras)


def test_every_expression_parses_with_promtool(board: dict[str, Any], tmp_path: Path) -> None:
    """Each query, annotation and variable selector, its variables filled in, parses in promtool."""
    exprs = [_substituted(e) for e in _exprs(board)]
    out = check_exprs(exprs, tmp_path)
    assert f"SUCCESS: {len(exprs)} rules found" in out


def test_promtool_rejects_a_broken_expression(tmp_path: Path) -> None:
    """The check is not a no-op: a query with an unbalanced parenthesis fails it."""
    path = tmp_path / "broken.rules.yaml"
    rule = {"record": "check:broken", "expr": "sum by (model) (rate(nv_inference_count[1m])"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [rule]}]}))
    assert run_promtool("check", "rules", path.name, cwd=tmp_path).returncode != 0


def test_queries_read_only_known_metrics(board: dict[str, Any]) -> None:
    """Panels read the metrics the engine consumes and the daemon exports, by their exact names."""
    seen = assert_known_metrics(_exprs(board), consumed_names() | self_metric_names())
    assert {
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_request_success",
        "nv_inference_request_summary_us",
        "nv_inference_pending_request_count",
        "nv_inference_exec_count",
        "DCGM_FI_DEV_GPU_UTIL",
        "nv_cpu_utilization",
        "container_cpu_usage_seconds_total",
        "tritonguard_open_incidents",
        "tritonguard_actions_total",
        "tritonguard_source_up",
        "tritonguard_leader",
        "tritonguard_source_tick_lag_seconds",
    } <= seen


def test_incidents_and_steps_are_annotations_from_the_daemons_metrics(
    board: dict[str, Any],
) -> None:
    """Two Prometheus annotations, on tritonguard's incident gauge and step counter, titled."""
    annotations = {a["name"]: a for a in board["annotations"]["list"]}
    assert set(annotations) == {"Incidents", "Playbook steps"}
    assert "tritonguard_open_incidents" in annotations["Incidents"]["expr"]
    assert "tritonguard_actions_total" in annotations["Playbook steps"]["expr"]
    for annotation in annotations.values():
        assert annotation["enable"] is True
        assert annotation["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert annotation["titleFormat"] and annotation["tagKeys"]


def test_panels_cover_latency_pending_busy_gpu_cpu_and_the_daemon(board: dict[str, Any]) -> None:
    """The issue's panels are there, each on the datasource variable, with unique ids."""
    titles = [p["title"] for p in _panels(board)]
    for wanted in ("Queue vs compute", "p99", "Pending", "Instance busy", "GPU", "CPU"):
        assert any(wanted in t for t in titles), wanted
    for panel in _panels(board):
        assert panel["datasource"]["uid"] == "${datasource}"
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
        assert panel["description"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert board["uid"] == "tritonguard"


def test_configmap_renders_for_the_grafana_sidecar(board: dict[str, Any]) -> None:
    """`kubectl kustomize` renders one ConfigMap, labelled for the sidecar, holding the JSON."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; run `make system-deps`")
    out = subprocess.run(
        [kubectl, "kustomize", str(GRAFANA)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    (configmap,) = [doc for doc in yaml.safe_load_all(out) if doc]
    kubernetes_validate.validate(configmap, K8S_VERSION, strict=True)
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["name"] == "tritonguard-dashboard"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["tritonguard.json"]) == board
