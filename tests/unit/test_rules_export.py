"""`tritonguard rules export`: what the compiled rules hold, and traces laid out for promtool."""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonguard.cli.main import main
from tritonguard.core.engine import Engine
from tritonguard.core.features import FeatureSet
from tritonguard.core.findings import CAUSES, Fix
from tritonguard.core.replay import drive
from tritonguard.core.rules_export import (
    CAUSE_TEXT,
    PREFIX,
    Rule,
    alert_name,
    compile_rules,
    duration,
    pretty,
    prometheus_rule,
    recorded_features,
    render_yaml,
    rule_file,
    rule_group,
)
from tritonguard.core.rules_trace import first_firing, input_series, selector, values
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_notation import expand, is_stale, parse_series_selector
from tritonguard.core.thresholds import Thresholds
from tritonguard.sources.replay import load_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

# FeatureSet fields the rules do not record, and why.
NOT_RECORDED = {
    "window_s": "the window is the rule's range, fixed by the scrape interval",
    "interval_s": "the group is evaluated at the scrape interval it was exported for",
    "fresh": "Prometheus' staleness: rates and gauges vanish when a target stops answering",
    "hpa_desired": "HPA series match a pod's workload by name, which PromQL cannot derive",
    "hpa_current": "HPA series match a pod's workload by name, which PromQL cannot derive",
}

# Thresholds the rules cannot express, and why; every other one must reach the rules.
NOT_EXPRESSED = {
    "stale_after_scrapes": "Prometheus marks a vanished series stale instead",
    "stale_after_min_s": "Prometheus marks a vanished series stale instead",
    "retention_s": "Prometheus' retention keeps the history",
    "queue_delay_match_low": "needs the model config, which Prometheus does not see",
    "supersede_margin": "alerts fire side by side; none replaces another",
    "update_min_interval_s": "an alert has no 'updated' events",
    "steady_min_requests": "the rules judge each scrape alone; pooling runs of scrapes by their "
    "requests needs a scan PromQL has no function for",
}
INTERVALS = (2.0, 5.0, 10.0, 15.0, 30.0, 60.0)


def _alerts(rules: list[Rule]) -> dict[str, Rule]:
    return {r.labels["cause"]: r for r in rules if r.alert}


def test_one_alert_per_cause_labelled_with_its_catalogue_id() -> None:
    """Nine alerts, in catalogue order, each labelled cause=<id> and named after it."""
    rules = compile_rules(Thresholds(), 15.0)
    alerts = [r for r in rules if r.alert]
    assert [r.labels["cause"] for r in alerts] == list(CAUSES)
    assert [r.alert for r in alerts] == [alert_name(c) for c in CAUSES]
    assert alert_name("too_few_instances") == "TritonguardTooFewInstances"
    for cause, rule in _alerts(rules).items():
        assert f'{PREFIX}:cause_confidence{{cause="{cause}"}}' in rule.expr
        assert rule.annotations["fix"] == CAUSE_TEXT[cause].fix


def test_every_engine_feature_has_a_recording_rule() -> None:
    """Each FeatureSet feature is one series per subject, except the few listed with a reason."""
    recorded = set(recorded_features(compile_rules(Thresholds(), 15.0)))
    wanted = {f.name for f in fields(FeatureSet)} - set(NOT_RECORDED)
    assert wanted <= recorded, f"not recorded: {sorted(wanted - recorded)}"
    assert not set(NOT_RECORDED) & recorded


# Series some rules read that are recorded only at some scrape intervals, by design.
RECORDED_AT_SOME_INTERVALS = {
    # The fast path exists only where its short window is shorter than the full one.
    f"{PREFIX}:symptom_fast",
    # The summary tail tells a reload only where one reload fits in about one scrape.
    f"{PREFIX}:cold_tail",
}


@pytest.mark.parametrize("interval_s", [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0])
def test_every_series_the_rules_read_is_one_they_record(interval_s: float) -> None:
    """A rule reading a ``tritonguard:`` series that no rule records reads nothing, silently.

    PromQL makes such a read an empty vector, so a veto built on it never vetoes: the
    too_many_instances queue veto read ``queue_share:baseline`` while the baselines left
    queue_share out, and the rules named too_many_instances on a CPU-bound deploy the engine
    rightly left alone (``cpu_bottleneck_deploy_h``).
    """
    rules = compile_rules(Thresholds(), interval_s)
    recorded = {r.record for r in rules if r.record}
    read = {m.group(0) for r in rules for m in re.finditer(rf"\b{PREFIX}:[\w:]+", r.expr)}
    assert read - recorded <= RECORDED_AT_SOME_INTERVALS, sorted(read - recorded)


def test_every_feature_rule_keeps_the_subject_key() -> None:
    """Feature rules aggregate by (namespace, pod, model) or join onto that key."""
    for rule in compile_rules(Thresholds(), 15.0):
        if rule.record.startswith(f"{PREFIX}:nv_inference_"):
            assert rule.expr.startswith("sum by (namespace, pod, model) (")


def _perturbed(name: str) -> Thresholds:
    default = Thresholds.model_fields[name].default
    if default is None:
        return Thresholds(**{name: 12_345.0})
    if isinstance(default, int) and not isinstance(default, bool):
        return Thresholds(**{name: default + 1})
    return Thresholds(**{name: default * 3 + 37.5})


def test_every_threshold_override_reaches_the_rules() -> None:
    """Overriding a threshold changes the export at some scrape interval, unless PromQL cannot say it."""
    defaults = {iv: compile_rules(Thresholds(), iv) for iv in INTERVALS}
    ignored = {
        name
        for name in Thresholds.model_fields
        if all(compile_rules(_perturbed(name), iv) == defaults[iv] for iv in INTERVALS)
    }
    assert ignored == set(NOT_EXPRESSED)


def test_open_and_close_confidence_gate_every_alert() -> None:
    """An alert opens at open_confidence and, once firing, holds down to close_confidence."""
    t = Thresholds(open_confidence=0.61, close_confidence=0.41)
    for rule in _alerts(compile_rules(t, 5.0)).values():
        assert ">= 0.61" in rule.expr and ">= 0.41" in rule.expr
        assert f'ALERTS{{alertname="{rule.alert}", alertstate="firing"}}' in rule.expr


@pytest.mark.parametrize(
    ("interval", "overrides", "hold", "keep"),
    [
        (2.0, {}, "2s", "45s"),  # two consecutive evaluations: one scrape later
        (5.0, {}, "5s", "45s"),
        (5.0, {"hold_s": 20.0}, "20s", "45s"),
        (5.0, {"hold_evaluations": 4}, "15s", "45s"),
        (15.0, {}, None, "45s"),  # hold_single_scrape_s: one evaluation holds
        (30.0, {}, None, "1m30s"),  # resolve_after_scrapes x 30 s beats resolve_after_s
    ],
)
def test_for_and_keep_firing_for_follow_the_incident_book(
    interval: float, overrides: dict[str, Any], hold: str | None, keep: str
) -> None:
    """`for:` is the engine's hold before opening; `keep_firing_for:` its wait before resolving.

    model_reload holds in its expression instead (a settled count opens at once), so it has
    no `for:` of its own.
    """
    group = rule_group(Thresholds(**overrides), interval)
    alerts = [r for r in group["rules"] if "alert" in r]
    assert len(alerts) == len(CAUSES)
    for rule in alerts:
        assert rule.get("for") == (None if rule["labels"]["cause"] == "model_reload" else hold)
        assert rule["keep_firing_for"] == keep.replace("1m30s", "90s")


@pytest.mark.parametrize(
    ("interval", "overrides", "count", "reach"),
    [
        (2.0, {}, 2, "3s"),  # for: 2s is this evaluation and the one before
        (5.0, {"hold_s": 20.0}, 5, "22500ms"),
        (5.0, {"hold_s": 12.0}, 4, "17500ms"),  # for: 12s fires at the fourth: 15 s after
        (5.0, {"hold_evaluations": 4}, 4, "17500ms"),
    ],
)
def test_reload_churn_holds_in_its_expression_unless_its_count_is_settled(
    interval: float, overrides: dict[str, Any], count: int, reach: str
) -> None:
    """model_reload opens at once on a signed count at reload_min_events, else after the hold.

    The hold counts the recorded opening condition over as many evaluations as `for:` would
    wait for; at coarse scrapes, where one evaluation holds, it keeps the plain condition.
    """
    t = Thresholds(**overrides)
    rules = compile_rules(t, interval)
    alert = _alerts(rules)["model_reload"]
    assert alert.for_s == 0
    recorded = [r for r in rules if r.record == f"{PREFIX}:opening"]
    assert [r.labels for r in recorded] == [{"cause": "model_reload"}]
    assert rules.index(recorded[0]) < rules.index(alert)
    held = f'count_over_time({PREFIX}:opening{{cause="model_reload"}}[{reach}]) >= {count}'
    assert held in alert.expr
    assert f"{PREFIX}:reloads_signed >= {t.reload_min_events}" in alert.expr
    coarse = compile_rules(t, 30.0)
    assert _alerts(coarse)["model_reload"].for_s == 0
    assert not any(r.record == f"{PREFIX}:opening" for r in coarse)


def test_the_group_runs_at_the_scrape_interval_over_the_engines_window() -> None:
    """Rates span the engine's window (at least two scrapes), plus half a scrape for the anchor."""
    counter = f"{PREFIX}:nv_inference_request_success:rate"
    for interval, window in ((5.0, "32500ms"), (30.0, "75s")):
        group = rule_group(Thresholds(), interval)
        assert group["interval"] == duration(interval)
        exprs = {r["record"]: r["expr"] for r in group["rules"] if "record" in r}
        assert f"rate(nv_inference_request_success[{window}])" in exprs[counter]


def test_the_fast_path_exists_only_where_the_short_window_is_shorter() -> None:
    """fast_scrapes scrapes shorter than the window (2-5 s scrapes): a fast symptom; 10 s: none."""

    def names(iv: float) -> set[str]:
        return {r.record for r in compile_rules(Thresholds(), iv)}

    assert f"{PREFIX}:symptom_fast" in names(5.0)
    assert f"{PREFIX}:symptom_fast" not in names(10.0)


def test_a_rule_file_and_a_prometheus_rule_hold_the_same_group() -> None:
    """The plain file has `groups:`; the manifest is monitoring.coreos.com/v1 with them in spec."""
    group = rule_group(Thresholds(), 15.0)
    plain = yaml.safe_load(render_yaml(rule_file([group])))
    manifest = yaml.safe_load(
        render_yaml(
            prometheus_rule([group], name="tg", namespace="monitoring", labels={"release": "p"})
        )
    )
    assert plain == {"groups": [group]}
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"] == {
        "name": "tg",
        "namespace": "monitoring",
        "labels": {"app.kubernetes.io/name": "tritonguard", "release": "p"},
    }
    assert manifest["spec"] == {"groups": [group]}


def test_pretty_breaks_lines_only_at_top_level_set_operators() -> None:
    """A gate reads one condition per line; operators inside parentheses or strings stay put."""
    expr = 'a and on (x) (b or c) unless on (x) d{l="p or q"} or e'
    assert pretty(expr) == 'a\nand on (x) (b or c)\nunless on (x) d{l="p or q"}\nor e'
    assert pretty("sum by (x) (a or b)") == "sum by (x) (a or b)"


def test_durations_are_whole_seconds_or_milliseconds() -> None:
    """Prometheus durations: 30s, 32500ms; never a fraction of a second in seconds."""
    assert duration(30) == "30s"
    assert duration(32.5) == "32500ms"
    assert duration(0.25) == "250ms"


def _first_fixes() -> dict[str, Fix]:
    """Return the fix of the first incident of each cause, replaying the lab traces."""
    out: dict[str, Fix] = {}
    for path in sorted(TRACES.glob("*.labels.json")):
        cause = json.loads(path.read_text())["cause"]
        if cause is None or cause in out:
            continue
        engine = Engine()
        trace = load_trace(path.with_name(path.name.replace(".labels.json", ".om.gz")))
        for _, events in drive(engine, trace):
            for ev in events:
                if ev.event == "opened" and ev.cause == cause and cause not in out:
                    out[cause] = ev.fix
    return out


def test_fix_annotations_say_what_the_engine_says() -> None:
    """Each alert carries the signature's own fix; counts the engine reads from the config are general."""
    fixes = _first_fixes()
    assert set(fixes) == set(CAUSES)
    for cause, fix in fixes.items():
        text = CAUSE_TEXT[cause]
        engine_text = re.sub(r"from \d+ to \d+", "by one", fix.text)
        engine_text = re.sub(r"\(from \d+ toward \d+\)", "(toward half)", engine_text)
        # The engine adds a sentence when clients already batch; the alert cannot know that.
        engine_text = engine_text.split(" Clients already send batches")[0]
        assert engine_text == text.fix, cause
        snippet, ours = fix.config_snippet, text.snippet
        if "instance_group" in ours:
            # The instance count comes from the model config (or the busy instances seen).
            snippet = re.sub(r"count: \d+", "count: <n>", snippet)
            ours = re.sub(r"count: <[^>]+>", "count: <n>", ours)
        assert snippet == ours, cause
        assert fix.flags == text.flags, cause


# ---- traces laid out for promtool ---------------------------------------------------------


def _sample(name: str, value: float, at: float, **labels: str) -> Sample:
    return Sample(name, make_labels(labels), value, at)


def test_values_use_runs_gaps_and_a_stale_marker_after_the_end() -> None:
    """Repeats are `axN`, gaps `_`/`_xN`, and a series that ends is stale at its next slot."""
    assert values([None, None, 1.0, 1.0, 1.0, None, 2.5, None, None], stale_after=True) == (
        "_x2 1x2 _ 2.5 stale"
    )
    assert values([0.0, 3.0], stale_after=True) == "0 3"
    text = values([math.nan, 1e-05, -4.0, math.inf], stale_after=False)
    assert text == "NaN 1e-05 -4 Inf"


def test_the_notation_expands_back_to_the_values() -> None:
    """What is written is what promtool reads: checked with the notation's own parser."""
    row: list[float | None] = [None, 631.0, 631.0, 652.5, None, 700.0, 700.0, 700.0, None]
    got = expand(values(row, stale_after=True), start=0, interval=5)
    assert [v for _, v in got[:8]] == row[:8]
    assert is_stale(got[8][1])


def test_selectors_escape_label_values() -> None:
    """Quotes, backslashes and newlines in label values survive the round trip."""
    labels = make_labels({"path": 'a"b\\c\nd', "model": "m"})
    assert parse_series_selector(selector("nginx_requests", labels)) == ("nginx_requests", labels)


def test_scrapes_land_on_the_nearest_slot_of_the_grid() -> None:
    """Jittered scrape times go to the nearest slot; test time counts from the first scrape."""
    samples = [
        _sample("nv_inference_request_success", 10, 1000.000, model="m"),
        _sample("nv_inference_request_success", 20, 1005.002, model="m"),
        _sample("nv_inference_request_success", 30, 1014.998, model="m"),
        _sample("nv_inference_count", 1, 1000.001, model="m"),
        _sample("not_read", 1, 1000.0),
    ]
    laid = input_series(samples, 5.0, names={"nv_inference_request_success", "nv_inference_count"})
    assert laid.start == 1000.0 and laid.slots == 4 and laid.end_s == 15.0
    by_name = {s.series.split("{")[0]: s.values for s in laid.series}
    assert by_name == {
        "nv_inference_count": "1 stale",
        "nv_inference_request_success": "10 20 _ 30",
    }
    assert laid.test_time(1060.0) == 60.0


def test_a_trace_without_timestamps_or_samples_is_refused() -> None:
    """Untimed samples cannot be placed; nothing the rules read is nothing to test."""
    with pytest.raises(ValueError, match="timestamp"):
        input_series([Sample("nv_inference_count", (), 1.0)], 5.0)
    with pytest.raises(ValueError, match="no samples"):
        input_series([_sample("other", 1, 0.0)], 5.0, names={"nv_inference_count"})


def test_first_firing_reads_each_causes_first_alert_on_one_model() -> None:
    """The query names the model and namespace and steps at the scrape interval."""
    q = first_firing("ml", "ranker", 135.0, 5.0)
    assert 'ALERTS{alertstate="firing", namespace="ml", model="ranker"}' in q
    assert q.startswith("min by (cause) (min_over_time(timestamp(")
    assert q.endswith("[135000ms:5000ms]))")


# ---- the command --------------------------------------------------------------------------


def test_export_prints_a_prometheus_rule_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Without flags: a PrometheusRule for a 15 s scrape, with the default thresholds."""
    assert main(["rules", "export"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["kind"] == "PrometheusRule"
    assert doc["spec"]["groups"] == [rule_group(Thresholds(), 15.0)]


def test_export_reads_thresholds_from_a_config_and_writes_a_file(tmp_path: Path) -> None:
    """--config's `thresholds:` reach the rules; -o writes the rule file there."""
    config = tmp_path / "config.yaml"
    config.write_text("thresholds:\n  queue_share_high: 0.77\n")
    out = tmp_path / "rules.yaml"
    code = main(
        ["rules", "export", "--format", "rule-file", "--scrape-interval", "30s",
         "--config", str(config), "-o", str(out)]
    )  # fmt: skip
    assert code == 0
    doc = yaml.safe_load(out.read_text())
    assert doc == {"groups": [rule_group(Thresholds(queue_share_high=0.77), 30.0)]}
    assert ">= 0.77" in out.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["--scrape-interval", "0"],
        ["--scrape-interval", "soon"],
        ["--label", "release"],
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad interval or label is refused in one line on stderr, nothing on stdout."""
    assert main(["rules", "export", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tritonguard: ") and captured.err.count("\n") == 1


def test_a_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown threshold in the config is an error, as everywhere else."""
    config = tmp_path / "config.yaml"
    config.write_text("thresholds:\n  queue_share_hgih: 0.7\n")
    assert main(["rules", "export", "--config", str(config)]) == 2
    assert "queue_share_hgih" in capsys.readouterr().err
