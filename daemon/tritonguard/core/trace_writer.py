"""Render timestamped samples as an OpenMetrics trace that promtool can backfill into Prometheus."""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable, Iterable, Mapping

from tritonguard.core.samples import Labels, Sample

__all__ = ["family_of", "render_trace", "render_trace_gz"]

# The sample-name suffixes each OpenMetrics family type allows, the family name being the base.
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "summary": ("", "_sum", "_count", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}
_ALL_SUFFIXES = ("_total", "_created", "_sum", "_count", "_bucket", "_gcount", "_gsum", "_info")
# 0.0.4 calls unknown "untyped"; OpenMetrics only knows "unknown".
_OPENMETRICS_TYPE = {"untyped": "unknown"}
# The trace's own series (core/config_info.py): config reads, rollouts and mounted ConfigMaps'
# changes, as info families.
_TRACE_INFO_TYPES = {
    "tritonguard_model_config": "info",
    "tritonguard_rollout": "info",
    "tritonguard_config_map": "info",
}


def family_of(name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """Return (family name, OpenMetrics type) for a sample name, given the declared types.

    A sample name that no declared family explains forms its own ``unknown`` family. A 0.0.4
    counter declared with its ``_total`` suffix becomes the OpenMetrics family without it.
    """
    declared = types.get(name)
    if declared is not None:
        kind = _OPENMETRICS_TYPE.get(declared, declared)
        if kind == "counter" and name.endswith("_total"):
            return name[: -len("_total")], "counter"
        return name, kind
    for suffix in _ALL_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            base_type = types.get(base)
            if base_type is not None:
                kind = _OPENMETRICS_TYPE.get(base_type, base_type)
                if suffix in _SUFFIXES.get(kind, ()):
                    return base, kind
    return name, "unknown"


def render_trace(
    samples: Iterable[Sample],
    types: Mapping[str, str] | None = None,
    *,
    help: Mapping[str, str] | None = None,
) -> str:
    """Render timestamped samples (seconds) as one OpenMetrics trace ending with ``# EOF``.

    Families are written whole and in name order; within a family samples are ordered by
    series, then time; a repeated (series, timestamp) keeps the last value. A family whose
    samples its declared type does not allow (Triton's counters lack ``_total``) is written
    as one ``unknown`` family per sample name, which promtool accepts.
    """
    declared = {**_TRACE_INFO_TYPES, **(types or {})}
    families: dict[tuple[str, str], dict[tuple[str, Labels, float], float]] = {}
    for sample in samples:
        if sample.timestamp is None:
            raise ValueError(
                f"sample {sample.name}{_render_labels(sample.labels)} has no timestamp; "
                "every sample of a trace needs one (pass default_timestamp when parsing)"
            )
        key = family_of(sample.name, declared)
        points = families.get(key)
        if points is None:
            points = families[key] = {}
        points[(sample.name, sample.labels, float(sample.timestamp))] = float(sample.value)

    blocks: dict[str, tuple[str, list[tuple[tuple[str, Labels, float], float]]]] = {}
    for (family, kind), points in families.items():
        allowed = _SUFFIXES.get(kind, ("",))
        if all(name[len(family) :] in allowed for name, _, _ in points):
            _add_block(blocks, family, kind, list(points.items()))
            continue
        by_name: dict[str, list[tuple[tuple[str, Labels, float], float]]] = {}
        for point in points.items():
            by_name.setdefault(point[0][0], []).append(point)
        for name, named_points in by_name.items():
            _add_block(blocks, name, "unknown", named_points)

    out: list[str] = []
    for family in sorted(blocks):
        kind, rows = blocks[family]
        text = (help or {}).get(family)
        if text is not None:
            out.append(f"# HELP {family} {_escape(text)}\n")
        out.append(f"# TYPE {family} {kind}\n")
        rows.sort(key=_point_order(family, kind))
        for (name, labels, timestamp), value in rows:
            out.append(
                f"{name}{_render_labels(labels)} {format_number(value)} {format_number(timestamp)}\n"
            )
    out.append("# EOF\n")
    return "".join(out)


def render_trace_gz(
    samples: Iterable[Sample],
    types: Mapping[str, str] | None = None,
    *,
    help: Mapping[str, str] | None = None,
) -> bytes:
    """Render a trace as gzip bytes (an ``.om.gz`` file); the same input gives the same bytes."""
    return gzip.compress(render_trace(samples, types, help=help).encode("utf-8"), mtime=0)


def _add_block(
    blocks: dict[str, tuple[str, list[tuple[tuple[str, Labels, float], float]]]],
    family: str,
    kind: str,
    points: list[tuple[tuple[str, Labels, float], float]],
) -> None:
    existing = blocks.get(family)
    if existing is None:
        blocks[family] = (kind, points)
        return
    # Two families may only meet under one name when both were demoted to unknown.
    existing[1].extend(points)
    if existing[0] != kind:
        blocks[family] = ("unknown", existing[1])


def _point_order(
    family: str, kind: str
) -> Callable[[tuple[tuple[str, Labels, float], float]], tuple[object, ...]]:
    """Order a family as OpenMetrics MetricPoints: per label group, by time, then by part.

    Summary quantiles and histogram buckets of one scrape form one point, so their ``quantile``
    or ``le`` label is not part of the group; strict readers reject time going backwards
    inside a group, and promtool needs each series in time order, which this also gives.
    """
    parts = _SUFFIXES.get(kind, ("",))
    bound = "quantile" if kind == "summary" else "le"

    def key(row: tuple[tuple[str, Labels, float], float]) -> tuple[object, ...]:
        (name, labels, timestamp), _ = row
        group = tuple(pair for pair in labels if pair[0] != bound)
        suffix = name[len(family) :]
        rank = parts.index(suffix) if suffix in parts else len(parts)
        return (group, timestamp, rank, _bound_value(labels, bound), name, labels)

    return key


def _bound_value(labels: Labels, bound: str) -> float:
    for name, value in labels:
        if name == bound:
            try:
                return float(value)
            except ValueError:
                return math.inf
    return -math.inf


def format_number(value: float) -> str:
    """Format a value or timestamp as a trace writes it (integers without a fraction)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _render_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in labels) + "}"
