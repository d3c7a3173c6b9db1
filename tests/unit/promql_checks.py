"""Shared checks for the PromQL shipped under deploy/: promtool, and the metric names it reads."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from tritonguard.core.metric_names import (
    CONSUMED_PREFIXES,
    TRITON_COUNTERS,
    TRITON_GAUGES,
    is_consumed,
)
from tritonguard.core.shards import Shard
from tritonguard.runtime.self_metrics import SelfMetrics
from tritonguard.runtime.shard_metrics import ShardMetrics

# Triton's optional latency summaries (--metrics-config summary_latencies=true).
TRITON_SUMMARIES = frozenset(
    f"nv_inference_{part}_summary_us"
    for part in ("request", "queue", "compute_input", "compute_infer", "compute_output")
)
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}
# What is left of an expression once strings, label matchers, ranges and grouping clauses
# are cut out: identifiers not followed by `(` are metric names, keywords or aggregations.
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(?!\s*\()")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_KEYWORDS = frozenset(
    {"offset", "bool", "and", "or", "unless", "inf", "nan"}
    | {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk"}
    | {"quantile", "count_values"}
)
_NAME_REGEX = re.compile(r'__name__=~"([^"]+)"')


def promtool() -> str:
    """Return the path of the real promtool, failing the test when it is missing."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed; run `make system-deps`")
    return path


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run promtool with ``args`` in ``cwd``; the caller judges the exit code."""
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=60
    )


def check_exprs(exprs: list[str], tmp_path: Path) -> str:
    """Parse every expression with `promtool check rules` (as recording rules); return stdout."""
    rules = [{"record": f"check:expr_{i}", "expr": expr} for i, expr in enumerate(exprs)]
    path = tmp_path / "exprs.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "exprs", "rules": rules}]}))
    result = run_promtool("check", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def self_metric_names() -> frozenset[str]:
    """Every series name tritonguard's own /metrics can carry."""
    metrics = SelfMetrics(CollectorRegistry())
    # The daemon registers its shard's gauges on the same registry, beside SelfMetrics.
    ShardMetrics(metrics.registry, Shard())
    names: set[str] = set()
    for family in metrics.registry.collect():
        names.update(family.name + suffix for suffix in _SUFFIXES[family.type])
    return frozenset(names)


def consumed_names() -> frozenset[str]:
    """Series names of Triton and the other exporters that the engine reads (DESIGN's list)."""
    exact = {p for p in CONSUMED_PREFIXES if not p.endswith("_")}
    return frozenset(exact | TRITON_COUNTERS | TRITON_GAUGES | TRITON_SUMMARIES)


def metric_names(expr: str) -> tuple[set[str], set[str]]:
    """Return the metric names an expression selects, and its ``__name__=~`` regexes."""
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    for pattern in (r"\{[^}]*\}", r"\[[^\]]*\]", _GROUPING.pattern):
        stripped = re.sub(pattern, " ", stripped)
    names = {n for n in _IDENT.findall(stripped) if n.lower() not in _KEYWORDS}
    return names, set(_NAME_REGEX.findall(expr))


def assert_known_metrics(exprs: list[str], known: frozenset[str]) -> set[str]:
    """Every name an expression reads is in ``known``; each name regex matches one; return all."""
    seen: set[str] = set()
    for expr in exprs:
        names, regexes = metric_names(expr)
        unknown = sorted(n for n in names if n not in known)
        assert unknown == [], f"{unknown} in {expr!r}"
        for regex in regexes:
            matched = {n for n in known if re.fullmatch(regex, n)}
            assert matched, f"{regex!r} matches no known metric in {expr!r}"
            seen |= matched
        seen |= names
    assert all(is_consumed(n) or n.startswith("tritonguard_") for n in seen)
    return seen
