"""Saved baselines as JSON lines: one subject a line, checked on the way back in.

The file is the daemon's own, but it outlives the code that wrote it (an upgrade changes the
baseline features) and may be cut short by a crash or a full disk. So every line stands
alone, a feature the running code does not know is dropped, and a line that does not parse,
or carries a value that is not a finite number, is refused by number with the reason; the
other lines still count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from tritonguard.core.baselines import BASELINE_FEATURES, Baseline
from tritonguard.core.features import SubjectKey

FORMAT = 1
# A line is one subject's two dicts of about twenty features: a few KB. Far longer is not
# ours (a corrupted or substituted file) and is refused before it is parsed.
MAX_LINE_CHARS = 64 * 1024
_KNOWN = frozenset(BASELINE_FEATURES)


def _finite_only(values: dict[str, float]) -> dict[str, float]:
    # A gauge exposed as +Inf can reach a median; JSON has no number for it, and a reference
    # of infinity judges nothing, so it is not saved (the subject learns it again).
    return {k: v for k, v in values.items() if math.isfinite(v)}


def encode(rows: Iterable[tuple[SubjectKey, float, Baseline]]) -> Iterator[str]:
    """Yield one JSON line per subject (newline included); non-finite values are left out."""
    for (ns, pod, model), saved_at, b in rows:
        values = _finite_only(b.values)
        if not values or not (math.isfinite(saved_at) and math.isfinite(b.span_s)):
            continue
        yield (
            json.dumps(
                {
                    "format": FORMAT,
                    "namespace": ns,
                    "pod": pod,
                    "model": model,
                    "saved_at": saved_at,
                    "span_s": b.span_s,
                    "snapshots": b.snapshots,
                    "values": values,
                    "spreads": _finite_only(b.spreads),
                },
                separators=(",", ":"),
                allow_nan=False,
            )
            + "\n"
        )


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} is {value!r}, not a finite number")
    return float(value)


def _features(obj: Any, what: str) -> dict[str, float]:
    if not isinstance(obj, dict):
        raise ValueError(f"{what} is not an object")
    return {k: _finite(v, f"{what}.{k}") for k, v in obj.items() if k in _KNOWN}


def _text(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{name} is {value!r}, not a string")
    return value


def decode_line(text: str) -> tuple[SubjectKey, float, Baseline]:
    """Return one saved subject; raise ValueError naming what is wrong."""
    if len(text) > MAX_LINE_CHARS:
        raise ValueError(f"line of {len(text)} characters, over {MAX_LINE_CHARS}")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("format") != FORMAT:
        raise ValueError(f"format {obj.get('format')!r}, this version reads {FORMAT}")
    key = (_text(obj, "namespace"), _text(obj, "pod"), _text(obj, "model"))
    saved_at = _finite(obj.get("saved_at"), "saved_at")
    span = _finite(obj.get("span_s"), "span_s")
    snapshots = obj.get("snapshots")
    if isinstance(snapshots, bool) or not isinstance(snapshots, int) or snapshots < 1:
        raise ValueError(f"snapshots is {snapshots!r}, not a positive integer")
    values = _features(obj.get("values"), "values")
    if not values:
        raise ValueError("no baseline feature this version knows")
    spreads = _features(obj.get("spreads", {}), "spreads")
    return key, saved_at, Baseline(values, span, snapshots, spreads, source="carried")
