"""deploy/monitoring: the PrometheusRule on tritonguard's health, checked and unit-tested by promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.promql_checks import (
    assert_known_metrics,
    check_exprs,
    run_promtool,
    self_metric_names,
)

ROOT = Path(__file__).parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
UNIT_TESTS = MONITORING / "tests" / "tritonguard-rules.test.yaml"
# The rule file the unit tests name (rule_files), written from the PrometheusRule's spec.
RULE_FILE = "tritonguard.rules.yaml"


@pytest.fixture(scope="module")
def rule() -> dict[str, Any]:
    """Render the PrometheusRule with `kubectl kustomize deploy/monitoring`."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; run `make system-deps`")
    out = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    (obj,) = [doc for doc in yaml.safe_load_all(out) if doc]
    assert isinstance(obj, dict)
    return obj


def _alerts(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r]


def _unit_test(spec: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the shipped promtool unit tests against ``spec`` as the rule file."""
    (tmp_path / RULE_FILE).write_text(yaml.safe_dump(spec))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    return run_promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)


def test_renders_one_prometheus_rule_in_tritonguard(rule: dict[str, Any]) -> None:
    """The kustomization renders one PrometheusRule in tritonguard's namespace, labelled.

    kubernetes-validate has no schema for the operator's CRDs, so promtool checks the spec
    (the tests below) and this test its envelope.
    """
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["namespace"] == "tritonguard"
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "tritonguard"
    assert set(rule["spec"]) == {"groups"}


def test_promtool_checks_the_rules(rule: dict[str, Any], tmp_path: Path) -> None:
    """`promtool check rules` accepts the spec as a rule file: every expression, duration, name."""
    path = tmp_path / RULE_FILE
    path.write_text(yaml.safe_dump(rule["spec"]))
    result = run_promtool("check", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts(rule))} rules found" in result.stdout


def test_promtool_unit_tests_pass(rule: dict[str, Any], tmp_path: Path) -> None:
    """Every alert fires on the series that should fire it, and not on the others."""
    result = _unit_test(rule["spec"], tmp_path)
    # promtool only warns when rule_files matches nothing; that would test no rule at all.
    assert "no file match" not in result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_alert_is_tested_firing_and_quiet(rule: dict[str, Any]) -> None:
    """The unit tests hold, for every alert, one evaluation that fires it and one that does not."""
    tests = yaml.safe_load(UNIT_TESTS.read_text())
    assert tests["rule_files"] == [RULE_FILE]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {a["alert"] for a in _alerts(rule)}
    assert fired == names
    assert quiet == names


@pytest.mark.parametrize(
    ("alert", "broken"),
    [
        # Without its `for:`, a 90 s outage would page.
        ("TritonguardSourceDown", {"for": None}),
        # Without the new-series half, the first failure after a start goes unseen.
        (
            "TritonguardActionsFailed",
            {
                "expr": 'sum by (namespace) (increase(tritonguard_actions_total{status="failed"}[10m])) > 0'
            },
        ),
        # Without the new-series half, a restart that gives up at once goes unseen.
        (
            "TritonguardSlackMessagesGivenUp",
            {
                "expr": "sum by (namespace) "
                "(increase(tritonguard_slack_outbox_given_up_total[10m])) > 0"
            },
        ),
        # Without its `for:`, a cause named after 2 m would have paged as unexplained.
        ("TritonguardLatencyUnexplained", {"for": None}),
        # Without its absent() half, no replica scraped would be no alert.
        ("TritonguardNoLeader", {"expr": "max(tritonguard_leader) < 1"}),
        # Without its leader_needed half, replicas that only diagnose would page.
        (
            "TritonguardNoLeader",
            {"expr": "max by (namespace) (tritonguard_leader) < 1 or absent(tritonguard_leader)"},
        ),
    ],
)
def test_the_unit_tests_catch_a_weakened_rule(
    rule: dict[str, Any], alert: str, broken: dict[str, str | None], tmp_path: Path
) -> None:
    """The unit tests are not a no-op: weakening one rule the way a refactor might fails them."""
    spec = yaml.safe_load(yaml.safe_dump(rule["spec"]))
    (target,) = [r for g in spec["groups"] for r in g["rules"] if r.get("alert") == alert]
    for key, value in broken.items():
        if value is None:
            del target[key]
        else:
            target[key] = value
    result = _unit_test(spec, tmp_path)
    assert result.returncode != 0
    assert f"alertname: {alert}" in result.stdout + result.stderr


def test_alerts_read_only_metrics_the_daemon_exports(rule: dict[str, Any], tmp_path: Path) -> None:
    """Every series an alert reads is one SelfMetrics registers: no invented metric names."""
    exprs = [a["expr"] for a in _alerts(rule)]
    seen = assert_known_metrics(exprs, self_metric_names())
    assert {
        "tritonguard_source_up",
        "tritonguard_leader",
        "tritonguard_leader_needed",
        "tritonguard_source_tick_lag_seconds",
        "tritonguard_actions_total",
        "tritonguard_slack_outbox_oldest_pending_age_seconds",
        "tritonguard_slack_outbox_given_up_total",
    } <= seen
    check_exprs(exprs, tmp_path)


def _anchors(page: str) -> set[str]:
    """Return a docs page's heading anchors as GitHub makes them."""
    doc = (ROOT / page).read_text()
    # GitHub's anchors: the heading lower-cased, spaces to dashes, other punctuation dropped.
    return {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", doc, flags=re.MULTILINE)
    }


def test_each_alert_has_severity_summary_and_a_runbook_that_exists(rule: dict[str, Any]) -> None:
    """Alerts carry a severity, a summary, a description, and a runbook section that exists.

    The runbooks are in docs/deploy.md, those of Slack delivery in docs/slack.md beside it.
    """
    for alert in _alerts(rule):
        assert alert["labels"]["severity"] in {"critical", "warning"}
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"]
        page, anchor = annotations["runbook"].split("#")
        expected = "docs/slack.md" if alert["alert"].startswith("TritonguardSlack") else None
        assert page == (expected or "docs/deploy.md")
        assert anchor == alert["alert"].lower()
        assert anchor in _anchors(page), f"no section for {alert['alert']} in {page}"
