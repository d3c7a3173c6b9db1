"""Run history handed from the leading daemon replica to the next one, as a Lease annotation (pure).

Each replica keeps its own audit trail, so without this a replica that takes over leadership
would not know the cooldowns, rate limits, budget and reload history the previous leader built
up, and could repeat a reload it had just made. The leader publishes its recent runs with every
renewal; followers adopt them, so whichever replica leads next honours the same guards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tritonguard.core.guards import RunRecord

ANNOTATION = "tritonguard.io/recent-runs"
FORMAT_VERSION = 1
# A day is what the guards look back; 200 runs keep the annotation far below the 256 KiB
# Kubernetes allows for all annotations of an object, even with long subject keys.
WINDOW_S = 86400.0
MAX_RUNS = 200


def encode_runs(runs: Sequence[RunRecord], now: float) -> str:
    """Return the newest real (not dry-run) runs of the last day as compact JSON."""
    recent = sorted(
        (r for r in runs if not r.dry_run and now - WINDOW_S <= r.at <= now), key=lambda r: r.at
    )[-MAX_RUNS:]
    rows = [[r.playbook, r.subject_key, r.model_key, round(r.at, 3), int(r.reload)] for r in recent]
    return json.dumps({"v": FORMAT_VERSION, "runs": rows}, separators=(",", ":"))


def decode_runs(text: str) -> list[RunRecord]:
    """Parse an annotation written by ``encode_runs``; raise ValueError saying what is wrong."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(doc, dict) or doc.get("v") != FORMAT_VERSION:
        raise ValueError(f"expected an object with v={FORMAT_VERSION}")
    rows = doc.get("runs")
    if not isinstance(rows, list):
        raise ValueError("'runs' must be a list")
    out: list[RunRecord] = []
    for i, row in enumerate(rows):
        if not (
            isinstance(row, list)
            and len(row) == 5
            and all(isinstance(x, str) for x in row[:3])
            and isinstance(row[3], int | float)
            and row[4] in (0, 1)
        ):
            raise ValueError(f"run {i} must be [playbook, subject, model, at, reload], got {row!r}")
        out.append(RunRecord(row[0], row[1], row[2], float(row[3]), False, bool(row[4])))
    return out
