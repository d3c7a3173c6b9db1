"""Exported rules under the real promtool: valid, keyed like the engine, and firing on its faults.

Each lab trace (tests/fixtures/traces) is laid out as promtool ``input_series`` on its scrape
grid, the rules are exported for its scrape interval, and promtool evaluates them as a
Prometheus would, one evaluation per scrape. The tests pin, per trace, every cause whose alert
fires on the trace's model and when it first fires, and compare the first one with the
engine's first incident on the same trace.

``python -m tests.integration.test_rules_export [--variants native,10s,30s,...] [DIR ...]`` prints
what the rules fire on each trace of the directories (the lab traces by default) next to the
engine's verdict, for docs/detection.md and docs/modes.md.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.detection_eval import DEADLINE_S, VARIANTS, p90, score
from tests.unit.synthetic import Phase, triton_model
from tritonguard.cli.main import main
from tritonguard.core.findings import CAUSES
from tritonguard.core.rules_export import (
    CONSUMED_METRICS,
    render_yaml,
    rule_file,
    rule_group,
)
from tritonguard.core.rules_trace import TraceSeries, first_firing, input_series
from tritonguard.core.thresholds import Thresholds
from tritonguard.sources.replay import load_trace

pytestmark = pytest.mark.live

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
# promtool runs two at a time: the CI machines have two cores.
WORKERS = 2

# What the rules fire on each lab trace: for each cause whose alert fires on the trace's model,
# the test time (seconds from the trace's first scrape) of its first firing evaluation.
FIRST_FIRING: dict[str, dict[str, float]] = {
    "batching_delay": {"batching_delay": 80},
    "batching_delay_holdout": {"batching_delay": 70},
    "cold_start": {"cold_start": 68},
    "cold_start_holdout": {"cold_start": 70},
    "cpu_bottleneck": {"cpu_bottleneck": 85},
    "cpu_bottleneck_holdout": {"cpu_bottleneck": 90},
    "cpu_bottleneck_ramp": {"cpu_bottleneck": 105},
    "healthy_ramp": {},
    "healthy_steady": {},
    "healthy_warmup_deploy": {},
    "memory_copy": {"memory_copy": 85},
    "memory_copy_holdout": {"memory_copy": 70},
    "model_reload": {"model_reload": 82},
    "model_reload_holdout": {"model_reload": 75},
    "node_contention": {"node_contention": 80},
    "node_contention_holdout": {"node_contention": 100},
    "retry_storm": {"retry_storm": 68},
    "retry_storm_holdout": {"retry_storm": 60},
    "too_few_instances": {"too_few_instances": 86},
    "too_few_instances_holdout": {"too_few_instances": 60},
    "too_many_instances": {"too_many_instances": 80},
    "too_many_instances_holdout": {"too_many_instances": 80},
}


def promtool_binary() -> str:
    """Return promtool's path, or fail the test: it ships with Debian's prometheus package."""
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is not installed; run `make system-deps` (Debian package prometheus)")
    return binary


@dataclass(frozen=True, slots=True)
class Case:
    """One lab trace, laid out on its scrape grid, with what its labels say about it."""

    name: str
    label: dict[str, Any]
    interval_s: float
    laid: TraceSeries

    @property
    def onset_s(self) -> float:
        """The fault's onset in test time."""
        return self.laid.test_time(float(self.label["onset"]))

    @property
    def deadline_s(self) -> float:
        """The latest test time a diagnosis counts as in time (detection_eval's deadline)."""
        return self.onset_s + DEADLINE_S + self.interval_s


def load_case(name: str, variant: str = "native", directory: Path = TRACES) -> Case:
    """Read a trace and its labels; a variant resamples or strips it as detection_eval does."""
    label = json.loads((directory / f"{name}.labels.json").read_text())
    interval = {"10s": 10.0, "15s": 15.0, "30s": 30.0}.get(
        variant, float(label["scrape_interval_s"])
    )
    interval = max(interval, float(label["scrape_interval_s"]))
    samples = VARIANTS[variant](list(load_trace(directory / f"{name}.om.gz")))
    return Case(name, label, interval, input_series(samples, interval, names=CONSUMED_METRICS))


def _seconds(t: float) -> str:
    return f"{round(t * 1000)}ms"


def promtool_test(case: Case, rules: Path, expected: dict[str, float] | None) -> dict[str, Any]:
    """Return a promtool test file for a case: when each cause first fires, then what still fires.

    ``expected`` None asks for nothing, so promtool reports what it got (for measuring).
    """
    ns, model = case.label["namespace"], case.label["model"]
    end = case.laid.end_s
    first: list[dict[str, Any]] = [
        {"labels": f'{{cause="{cause}"}}', "value": at} for cause, at in (expected or {}).items()
    ]
    tests: list[dict[str, Any]] = [
        {
            "expr": first_firing(ns, model, end, case.interval_s),
            "eval_time": _seconds(end),
            "exp_samples": first,
        }
    ]
    if expected:
        # The engine's incident stays open to the end of every fault trace; so must the alert.
        cause = min(expected, key=lambda c: expected[c])
        tests.append(
            {
                "expr": (
                    f'count by (cause) (ALERTS{{alertstate="firing", namespace="{ns}", '
                    f'model="{model}", cause="{cause}"}})'
                ),
                "eval_time": _seconds(end),
                "exp_samples": [{"labels": f'{{cause="{cause}"}}', "value": 1}],
            }
        )
    return {
        "rule_files": [str(rules)],
        "evaluation_interval": _seconds(case.interval_s),
        "tests": [
            {
                "interval": _seconds(case.interval_s),
                "input_series": [s.as_dict() for s in case.laid.series],
                "promql_expr_test": tests,
            }
        ],
    }


@dataclass(frozen=True, slots=True)
class Run:
    """One promtool invocation and what it said."""

    code: int
    output: str


def run_promtool(binary: str, args_list: Sequence[Sequence[str]]) -> list[Run]:
    """Run promtool once per argument list, two at a time; each run is waited for."""

    def one(args: Sequence[str]) -> Run:
        proc = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=120, check=False
        )
        return Run(proc.returncode, proc.stdout + proc.stderr)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(one, args_list))


def by_length(cases: Iterable[Case]) -> list[Case]:
    """Longest first: the two workers then finish together."""
    return sorted(cases, key=lambda c: -c.laid.slots * len(c.laid.series))


def write_cases(
    directory: Path,
    cases: Iterable[Case],
    expected: Callable[[Case], dict[str, float] | None],
    thresholds: Thresholds | None = None,
) -> list[Path]:
    """Write one rule file per scrape interval and one test file per case; return the tests."""
    t = thresholds or Thresholds()
    directory.mkdir(parents=True, exist_ok=True)
    out, written = [], set()
    for case in cases:
        rules = directory / f"rules_{round(case.interval_s * 1000)}ms.yaml"
        if rules not in written:
            rules.write_text(render_yaml(rule_file([rule_group(t, case.interval_s)])))
            written.add(rules)
        test = directory / f"{case.name}.test.yaml"
        doc = promtool_test(case, rules, expected(case))
        test.write_text(yaml.safe_dump(doc, sort_keys=False, width=1_000_000))
        out.append(test)
    return out


@pytest.fixture(scope="module")
def native_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every lab trace through the exported rules under promtool, against its pinned firings."""
    binary = promtool_binary()
    cases = by_length(load_case(name) for name in sorted(FIRST_FIRING))
    tests = write_cases(tmp_path_factory.mktemp("rules"), cases, lambda c: FIRST_FIRING[c.name])
    runs = run_promtool(binary, [["test", "rules", str(p)] for p in tests])
    return {case.name: run for case, run in zip(cases, runs, strict=True)}


def test_the_pins_cover_every_lab_trace() -> None:
    """A trace added to the fixtures needs its pinned firings here, and each pin a trace."""
    names = {p.name.removesuffix(".labels.json") for p in TRACES.glob("*.labels.json")}
    assert names == set(FIRST_FIRING)
    assert {c for pin in FIRST_FIRING.values() for c in pin} <= set(CAUSES)


@pytest.mark.parametrize("name", sorted(FIRST_FIRING))
def test_rules_fire_on_the_trace_as_the_engine_diagnoses_it(
    name: str, native_runs: dict[str, Run]
) -> None:
    """The pinned causes fire, exactly; the first is the engine's, after the onset and in time.

    A healthy control fires nothing. A fault's first alert is the engine's first incident's
    cause, at or after the onset and within detection_eval's deadline, and it still fires at
    the end of the trace, as the engine's incident is still open.
    """
    run = native_runs[name]
    assert run.code == 0, run.output
    case = load_case(name)
    engine = score(name, TRACES, "native")
    pinned = FIRST_FIRING[name]
    if case.label["cause"] is None:
        assert engine.verdict == "right" and pinned == {}
        return
    first = min(pinned, key=lambda c: pinned[c])
    assert engine.verdict == "right" and first == engine.got == case.label["cause"]
    assert case.onset_s <= pinned[first] <= case.deadline_s
    assert sorted(pinned.values()).count(pinned[first]) == 1, "two causes fire first together"


def test_exported_rules_pass_promtool_check(tmp_path: Path) -> None:
    """Both formats, at fine and coarse scrape intervals and with overrides, are valid rules."""
    config = tmp_path / "config.yaml"
    config.write_text("thresholds:\n  open_confidence: 0.6\n  rate_window_s: 60\n")
    files = []
    for interval in ("2s", "5s", "15s", "30s", "1m"):
        for fmt in ("rule-file", "prometheus-rule"):
            out = tmp_path / f"{fmt}-{interval}.yaml"
            args = ["rules", "export", "--format", fmt, "--scrape-interval", interval]
            assert main([*args, "--config", str(config), "-o", str(out)]) == 0
            if fmt == "prometheus-rule":
                # promtool checks rule files; a PrometheusRule's spec is one.
                spec = yaml.safe_load(out.read_text())["spec"]
                out.write_text(yaml.safe_dump(spec, sort_keys=False, width=1_000_000))
            files.append(out)
    binary = promtool_binary()
    [run] = run_promtool(binary, [["check", "rules", *map(str, files)]])
    assert run.code == 0, run.output
    assert run.output.count("SUCCESS") == len(files)


def test_subjects_are_keyed_as_the_engine_keys_targets(tmp_path: Path) -> None:
    """namespace/pod as scraped, `instance` outside Kubernetes, exported_* over the scraper's."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(render_yaml(rule_file([rule_group(Thresholds(), 5.0)])))
    counter = "nv_inference_request_success"
    inputs = [
        f'{counter}{{namespace="ml", pod="triton-0", instance="10.0.0.1:8002", model="a"}}',
        f'{counter}{{instance="gpu-host:8002", model="b"}}',
        f'{counter}{{exported_namespace="ml", exported_pod="triton-1", namespace="obs", '
        f'pod="scraper-0", model="c"}}',
    ]
    expected = [
        '{namespace="ml", pod="triton-0", model="a"}',
        '{pod="gpu-host:8002", model="b"}',
        '{namespace="ml", pod="triton-1", model="c"}',
    ]
    doc = {
        "rule_files": [str(rules)],
        "evaluation_interval": "5s",
        "tests": [
            {
                "interval": "5s",
                "input_series": [{"series": s, "values": "0+50x12"} for s in inputs],
                "promql_expr_test": [
                    {
                        "expr": "tritonguard:request_rate",
                        "eval_time": "60s",
                        "exp_samples": [
                            {"labels": "tritonguard:request_rate" + e, "value": 10}
                            for e in expected
                        ],
                    }
                ],
            }
        ],
    }
    test = tmp_path / "keys.test.yaml"
    test.write_text(yaml.safe_dump(doc, sort_keys=False))
    [run] = run_promtool(promtool_binary(), [["test", "rules", str(test)]])
    assert run.code == 0, run.output


def test_a_threshold_override_changes_what_fires(tmp_path: Path) -> None:
    """No confidence reaches an open_confidence of 0.98 (they stop at 0.97): nothing fires."""
    case = load_case("batching_delay_holdout")
    [test] = write_cases(
        tmp_path, [case], lambda c: None, thresholds=Thresholds(open_confidence=0.98)
    )
    [run] = run_promtool(promtool_binary(), [["test", "rules", str(test)]])
    assert run.code == 0, run.output


def test_a_new_version_slower_throughout_is_not_a_cold_start(tmp_path: Path) -> None:
    """The rules stay silent where the engine does: heavier code, not a warm-up or contention.

    Version 2 of ``cpu_bottleneck_deploy_h`` is 48x slower than version 1 from its first
    execution and its compute summary shows its executions alike (p99/p50 2.3): the engine
    stays silent, and the exported rules must not name cold_start either. Nor
    too_many_instances: requests wait longer for the same two instances (queue share 0.12 ->
    0.9), which contention between instances cannot do; the rules named it at +40 s while
    their queue veto read a baseline they did not record.
    """
    held_out_2 = TRACES.parent / "traces_v2" / "held_out_2"
    assert_fires_in_time(
        load_case("cpu_bottleneck_deploy_h", directory=held_out_2), tmp_path, set()
    )


@pytest.mark.parametrize(
    ("part", "name"),
    [("held_out_6", "cold_start_h6"), ("held_out_2", "cold_start_scaleout_llm_h")],
)
def test_the_rules_name_a_scale_out_pods_cold_start_as_the_engine_does(
    tmp_path: Path, part: str, name: str
) -> None:
    """A pod that joins a scale-out is born in the rules, and its birth runs from its first request.

    Nothing of the new pod was in view before its series, so only the new-pod rule (the
    series store's: past the stream's grace, a first value that fits a start from zero)
    births it. ``cold_start_h6``'s pod is Ready 30 s before the load balancer routes to it,
    so an early window dated from the empty series' appearance would end 2 s after its
    first request (``births.first_served``). Without either the rules fired nothing on both
    traces; the engine names cold_start at +6 s and +50 s, and so must the rules, first.
    """
    case = load_case(name, directory=TRACES.parent / "traces_v2" / part)
    got, output = fire(case, tmp_path)
    engine = score(name, TRACES.parent / "traces_v2" / part, "native")
    assert engine.verdict == "right" and engine.delay_s is not None
    assert min(got, key=lambda c: got[c]) == "cold_start", output
    assert got["cold_start"] == pytest.approx(case.onset_s + engine.delay_s, abs=case.interval_s)


def test_a_backlog_that_fills_the_instances_is_no_batcher_on_the_rules_fast_path(
    tmp_path: Path,
) -> None:
    """On the fast path the rules read busy instances in the newest scrapes, as the engine does.

    ``too_few_instances_surge_h10`` (2 s scrapes, the tenth held-out part): traffic steps from
    15 to 70/s on one 20 ms instance without a batcher. The first slow scrapes are read on the
    fast path while the full window still holds the healthy scrapes before the step, so its
    busy instances read 0.42-0.51 (under ``busy_idle``) where the newest scrapes read 0.68-0.98.
    The engine reads the short window there and names nothing until too_few_instances at
    +10 s; the rules read the full window and named batching_delay at +8 s, a cure (lower the
    batcher's delay) for a model with no batcher. Now too_few_instances fires first and alone,
    at +26 s: the rules still read saturation on the full window, so later than the engine.
    """
    directory = TRACES.parent / "traces_v2" / "held_out_10"
    case = load_case("too_few_instances_surge_h10", directory=directory)
    got, output = fire(case, tmp_path)
    engine = score("too_few_instances_surge_h10", directory, "native")
    assert engine.verdict == "right" and engine.delay_s is not None
    assert set(got) == {"too_few_instances"}, output
    # Later than the engine (+26 s against +10 s): saturation is read on the full window.
    assert case.onset_s + engine.delay_s <= got["too_few_instances"] <= case.deadline_s, output


def test_a_node_full_before_the_onset_is_no_contention_in_the_rules(tmp_path: Path) -> None:
    """The rules judge the node against the window before the shift too, as the engine does.

    On ``model_reload_poll_h`` (15 s scrapes) the recording machine's node was 95-100 % busy
    in the scrapes before the first reload, against a baseline of 72 %. Against the baseline
    alone the node "got busier", and the rules named node_contention at +45 s; the engine
    reads the window before the shift (``node_contention.busier``), finds the node already
    saturated, and names no contention. So must the rules, with no node_contention at all.
    (Both named model_reload late until a period needed every spacing near the median: the
    node's stalls at every scrape, with one gap, are no period, and both are silent now.)
    """
    case = load_case("model_reload_poll_h", directory=TRACES.parent / "traces_v2" / "held_out")
    got, output = fire(case, tmp_path)
    assert set(got) <= {"model_reload"}, output
    assert all(at >= case.onset_s for at in got.values()), output


@pytest.mark.parametrize(
    ("name", "expected"),
    [("node_contention_full_p", {"node_contention"}), ("healthy_more_instances_full_p", set())],
)
def test_the_rules_read_cpu_pressure_on_a_full_node_as_the_engine_does(
    tmp_path: Path, name: str, expected: set[str]
) -> None:
    """On a node full before the onset, Triton's CPU pressure names the neighbour in the rules too.

    The node's busy share was 1.0 before and after the hog started, so only the time Triton's
    threads waited for a CPU (0.13 -> 0.8 of the time) shows it; the engine names
    node_contention at +20 s. Raising the instances in place on the same full node fires
    nothing.
    """
    pressure = TRACES.parent / "traces_v2" / "pressure"
    case = load_case(name, directory=pressure)
    assert_fires_in_time(case, tmp_path, expected)


@pytest.mark.parametrize(
    ("part", "name", "expected"),
    [
        ("pressure", "node_contention_full_p", {"node_contention"}),
        ("pressure_held_out", "healthy_night_full_ph", set()),
    ],
)
def test_the_rules_read_a_starved_model_whose_load_fell_as_the_engine_does(
    tmp_path: Path, part: str, name: str, expected: set[str]
) -> None:
    """At 10 s scrapes, a load that fell with each execution slower and waiting is contention.

    Resampled to 10 s, ``node_contention_full_p``'s window reads the load at 0.63 of its
    baseline (the starved clients send less), below the steady band the rules once required,
    so they stayed silent where the engine names node_contention at +30 s: a fall counts when
    each execution is itself ``compute_inflation`` slower and Triton's threads waited more
    (0.14 -> 0.84 of the time). Traffic falling at night on the same full node fires nothing.
    """
    case = load_case(name, "10s", directory=TRACES.parent / "traces_v2" / part)
    assert_fires_in_time(case, tmp_path, expected)


def test_a_batcher_filling_bigger_batches_is_no_slower_work_in_the_rules(tmp_path: Path) -> None:
    """batching_delay's slower-work veto reads compute per inference, as the engine does.

    ``batching_delay_tiny_t`` raises the delay 500 us -> 40 ms: at 10 s scrapes the batches it
    fills cost 1.6x as much an execution while no inference costs more. The rules read
    compute per execution and held batching_delay back until +150 s, past its deadline; the
    engine names it at +30 s, and so must the rules.
    """
    case = load_case(
        "batching_delay_tiny_t", "10s", directory=TRACES.parent / "traces_v2" / "tuning"
    )
    assert_fires_in_time(case, tmp_path, {"batching_delay"})


# The labels of the one model the synthetic rules tests write (``triton_model``).
SUBJECT = '{namespace="prod", pod="triton-0", model="resnet"}'


def _expr_test(
    tmp_path: Path,
    phases: list[Phase],
    interval_s: float,
    expr: str,
    expect: dict[int, list[dict[str, object]]],
) -> Run:
    """Run the rules for ``interval_s`` on one synthetic model; ``expect``: samples by time."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(render_yaml(rule_file([rule_group(Thresholds(), interval_s)])))
    series = triton_model(phases, interval=interval_s)
    step = f"{interval_s:g}s"
    doc = {
        "rule_files": [str(rules)],
        "evaluation_interval": step,
        "tests": [
            {
                "interval": step,
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "promql_expr_test": [
                    {"expr": expr, "eval_time": f"{at}s", "exp_samples": samples}
                    for at, samples in expect.items()
                ],
            }
        ],
    }
    test = tmp_path / "expr.test.yaml"
    test.write_text(yaml.safe_dump(doc, sort_keys=False, width=1_000_000))
    [run] = run_promtool(promtool_binary(), [["test", "rules", str(test)]])
    return run


def _symptom_test(tmp_path: Path, phases: list[Phase], expect: dict[int, bool]) -> Run:
    """Run the 2 s rules on one synthetic model; ``expect`` says when the symptom is up."""
    up = [{"labels": "tritonguard:symptom" + SUBJECT, "value": 1}]
    samples = {at: up if is_up else [] for at, is_up in expect.items()}
    return _expr_test(tmp_path, phases, 2.0, "tritonguard:symptom", samples)


def test_a_start_up_burst_of_queueing_is_no_symptom_in_the_rules(tmp_path: Path) -> None:
    """The rules hold the no-baseline symptom as the engine does: a passed burst is none.

    A model queueing 600 ms a request for its first 8 s, then serving at 1 ms of queue: the
    window's queue share passes one half for a while, but the newest scrapes queue little
    (``symptoms._queued_now``). Before the check the rules, like the engine, read it as a
    symptom with no healthy history.
    """
    burst = [
        Phase(4, rps=25, queue_ms=600.0, infer_ms=9.0),
        Phase(40, rps=25, queue_ms=1.0, infer_ms=9.0),
    ]
    run = _symptom_test(tmp_path, burst, {at: False for at in range(4, 80, 2)})
    assert run.code == 0, run.output


def test_queueing_that_lasts_is_a_symptom_in_the_rules_once_a_window_is_seen(
    tmp_path: Path,
) -> None:
    """Queueing from the first scrape is a symptom from 30 s (rate_window_s) on, as in the engine."""
    lasting = [Phase(40, rps=20, queue_ms=60.0, infer_ms=8.0)]
    run = _symptom_test(tmp_path, lasting, {10: False, 20: False, 28: False, 30: True, 60: True})
    assert run.code == 0, run.output


# ---- measuring, for docs/detection.md -----------------------------------------------------


def fired(output: str) -> dict[str, float]:
    """Return cause -> first firing time from a run that expected nothing (promtool's `got:`)."""
    got = re.search(r"got: (.*)", output)
    if got is None:
        return {}
    return {c: float(v) for c, v in re.findall(r'\{cause="([a-z_]+)"\} ([^,\s]+)', got.group(1))}


def fire(case: Case, tmp_path: Path) -> tuple[dict[str, float], str]:
    """Run the rules on one case under promtool: when each cause first fired, and its output."""
    [test] = write_cases(tmp_path, [case], lambda _: None)
    [run] = run_promtool(promtool_binary(), [["test", "rules", str(test)]])
    return fired(run.output), run.output[-2000:]


def assert_fires_in_time(case: Case, tmp_path: Path, expected: set[str]) -> None:
    """Exactly ``expected`` fire on the case, each after its onset and by its deadline."""
    got, output = fire(case, tmp_path)
    assert set(got) == expected, output
    for cause in expected:
        assert case.onset_s <= got[cause] <= case.deadline_s, output


@dataclass(frozen=True, slots=True)
class Measured:
    """What the rules and the engine first say about one trace under one variant."""

    case: Case
    variant: str
    fired: dict[str, float]
    engine_verdict: str
    engine_cause: str | None
    engine_delay_s: float | None

    @property
    def first(self) -> str | None:
        """The cause whose alert fires first, if any."""
        return min(self.fired, key=lambda c: self.fired[c]) if self.fired else None

    @property
    def delay_s(self) -> float | None:
        """From the onset to the first alert."""
        first = self.first
        return None if first is None else self.fired[first] - self.case.onset_s

    @property
    def verdict(self) -> str:
        """right, late, wrong, silent or false-alarm, as detection_eval judges the engine."""
        cause, first, delay = self.case.label["cause"], self.first, self.delay_s
        if cause is None:
            return "right" if first is None else "false-alarm"
        if first is None or delay is None:
            return "silent"
        if first != cause or delay < 0:
            return "wrong"
        late = self.case.onset_s + delay > self.case.deadline_s
        return "late" if late else "right"

    @property
    def agrees(self) -> bool:
        """Same verdict as the engine, on the same cause."""
        return self.verdict == self.engine_verdict and self.first == self.engine_cause


def measure(
    variants: Sequence[str], directory: Path, traces: Sequence[Path] = (TRACES,)
) -> list[Measured]:
    """Run every trace of ``traces`` under each variant through the rules, the engine beside."""
    binary = promtool_binary()
    where = {
        p.name.removesuffix(".labels.json"): d for d in traces for p in d.glob("*.labels.json")
    }
    out = []
    for variant in variants:
        cases = by_length(load_case(name, variant, where[name]) for name in sorted(where))
        tests = write_cases(directory / variant, cases, lambda c: None)
        runs = run_promtool(binary, [["test", "rules", str(p)] for p in tests])
        for case, run in zip(cases, runs, strict=True):
            engine = score(case.name, where[case.name], variant)
            out.append(
                Measured(
                    case, variant, fired(run.output), engine.verdict, engine.got, engine.delay_s
                )
            )
    return sorted(out, key=lambda m: (variants.index(m.variant), m.case.name))


def report(results: Sequence[Measured]) -> str:
    """Return the per-trace table and, per variant, the counts docs/detection.md quotes."""

    def secs(v: float | None) -> str:
        return "" if v is None else f"{v:+.0f}s"

    rows = [
        "| trace | variant | cause | rules: first alert (others) | onset → fired | engine | onset → opened |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in results:
        others = sorted(set(m.fired) - {m.first}) if m.first else []
        extra = f" (+{', '.join(others)})" if others else ""
        rows.append(
            f"| {m.case.name} | {m.variant} | {m.case.label['cause'] or 'healthy'} | "
            f"{m.first or '-'}{extra} ({m.verdict}) | {secs(m.delay_s)} | "
            f"{m.engine_cause or '-'} ({m.engine_verdict}) | {secs(m.engine_delay_s)} |"
        )
    rows.append("")
    for variant in dict.fromkeys(m.variant for m in results):
        mine = [m for m in results if m.variant == variant]
        counts = {
            v: sum(m.verdict == v for m in mine) for v in ("right", "late", "wrong", "silent")
        }
        alarms = sum(m.verdict == "false-alarm" for m in mine)
        delays = sorted(m.delay_s for m in mine if m.verdict == "right" and m.delay_s is not None)
        both = [
            m for m in mine if m.agrees and m.delay_s is not None and m.engine_delay_s is not None
        ]
        # Rules fire on the scrape grid, the engine at the scrape's own time: whole seconds.
        diffs = [
            round(m.delay_s) - round(m.engine_delay_s)
            for m in both
            if m.delay_s is not None and m.engine_delay_s is not None
        ]
        second = sum(len(m.fired) > 1 for m in mine)
        median = f"{statistics.median(delays):.0f}" if delays else "-"
        tail = f"{p90(delays):.0f}" if delays else "-"
        rows.append(
            f"{variant}: agree with the engine on {sum(m.agrees for m in mine)}/{len(mine)}; "
            f"rules {counts['right']} right, {counts['late']} late, {counts['wrong']} wrong, "
            f"{counts['silent']} silent, {alarms} false alarms; a second cause on {second}; "
            f"delay median {median} s, p90 {tail} s; of {len(diffs)} diagnosed by both, "
            f"{sum(d == 0 for d in diffs)} at the same scrape, {sum(d > 0 for d in diffs)} later "
            f"(at most {max(diffs, default=0)} s), {sum(d < 0 for d in diffs)} earlier "
            f"(at most {-min(diffs, default=0)} s)"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", default="native")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tritonguard-rules-measure"))
    parser.add_argument(
        "traces", nargs="*", type=Path, default=[TRACES], help="trace directories (the lab's)"
    )
    options = parser.parse_args()
    sys.stdout.write(report(measure(options.variants.split(","), options.workdir, options.traces)))


def _steadiness_at(tmp_path: Path, straddle_queue_ms: float, at: int) -> Run:
    """Run the 10 s rules on a batcher's wait whose onset scrape queued ``straddle_queue_ms``.

    Thirty healthy scrapes, the onset's scrape at 300 s, the batcher's 80 ms wait from 310 s.
    The test expects the queue steadiness at ``at`` to be the shift's own: steady (1).
    """
    phases = [
        Phase(30, rps=5, queue_ms=0.5),
        Phase(1, rps=5, queue_ms=straddle_queue_ms),
        Phase(12, rps=5, queue_ms=80.0, batch=1.6),
    ]
    steady = [{"labels": SUBJECT, "value": 1}]
    return _expr_test(
        tmp_path, phases, 10.0, "tritonguard:queue_steadiness >= bool 0.5", {at: steady}
    )


def test_the_rules_leave_the_onsets_half_healthy_scrape_out_of_the_steadiness(
    tmp_path: Path,
) -> None:
    """As ``batching_delay.past_the_onset``: the onset's scrape, lowest of the shift, goes.

    At 330 s the rules' window of per-scrape readings holds the onset's (a quarter of the
    wait) and two of the batcher's: judged with the onset's scrape the wait read as a burst (steadiness 0.25,
    the veto); the shift's own two scrapes queue alike.
    """
    run = _steadiness_at(tmp_path, 20.0, 330)
    assert run.code == 0, run.output[-3000:]
