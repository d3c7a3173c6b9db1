"""Run history and pending verifications handed from the leader to the next one, on the Lease (pure).

Each replica keeps its own audit trail, so without this a replica that takes over leadership
would not know the cooldowns, rate limits, budget and reload history the previous leader built
up, and could repeat a reload it had just made. The leader publishes its recent runs with every
renewal; followers adopt them, so whichever replica leads next honours the same guards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonguard.core.guards import RunRecord

ANNOTATION = "tritonguard.io/recent-runs"
FORMAT_VERSION = 1
# A day is what the guards look back; 200 runs keep the annotation far below the 256 KiB
# Kubernetes allows for all annotations of an object, even with long subject keys.
WINDOW_S = 86400.0
MAX_RUNS = 200


def _rows(text: str, key: str) -> list[Any]:
    """Return the list under ``key`` of an annotation's versioned JSON object."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(doc, dict) or doc.get("v") != FORMAT_VERSION:
        raise ValueError(f"expected an object with v={FORMAT_VERSION}")
    rows = doc.get(key)
    if not isinstance(rows, list):
        raise ValueError(f"'{key}' must be a list")
    return rows


def encode_runs(runs: Sequence[RunRecord], now: float) -> str:
    """Return the newest real (not dry-run) runs of the last day as compact JSON."""
    recent = sorted(
        (r for r in runs if not r.dry_run and now - WINDOW_S <= r.at <= now), key=lambda r: r.at
    )[-MAX_RUNS:]
    rows = [[r.playbook, r.subject_key, r.model_key, round(r.at, 3), int(r.reload)] for r in recent]
    return json.dumps({"v": FORMAT_VERSION, "runs": rows}, separators=(",", ":"))


def decode_runs(text: str) -> list[RunRecord]:
    """Parse an annotation written by ``encode_runs``; raise ValueError saying what is wrong."""
    rows = _rows(text, "runs")
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


# Pending verifications travel in a second annotation, with the undo steps a failed verdict
# rolls back. A model config reload's undo holds the whole previous config, so the set is
# capped well inside the 256 KiB Kubernetes allows for all annotations of an object.
VERIFICATIONS_ANNOTATION = "tritonguard.io/pending-verifications"
MAX_VERIFICATIONS_BYTES = 128 * 1024


@dataclass(frozen=True, slots=True)
class HandedVerification:
    """A verification without a verdict, as the leader publishes it for the next leader."""

    incident_id: str
    playbook: str
    cause: str
    namespace: str
    model: str
    pod: str
    opened_at: float
    checks: tuple[dict[str, Any], ...]
    wait_s: float
    started_at: float
    # (action, params) of each undo, in the order the steps took them.
    undos: tuple[tuple[str, dict[str, Any]], ...]

    def key(self) -> tuple[str, str, float]:
        """Return what identifies the verification on every replica."""
        return (self.incident_id, self.playbook, round(self.started_at, 3))


def encode_verifications(items: Sequence[HandedVerification]) -> tuple[str, int]:
    """Return the annotation text, newest first within the byte cap, and how many were left out."""
    rows: list[dict[str, Any]] = []
    size = 0
    for item in sorted(items, key=lambda v: v.started_at, reverse=True):
        row = {
            "incident": item.incident_id,
            "playbook": item.playbook,
            "cause": item.cause,
            "subject": [item.namespace, item.model, item.pod],
            "opened_at": round(item.opened_at, 3),
            "checks": list(item.checks),
            "wait_s": item.wait_s,
            "started_at": round(item.started_at, 3),
            "undos": [[action, params] for action, params in item.undos],
        }
        cost = len(json.dumps(row, separators=(",", ":"), default=str))
        if size + cost > MAX_VERIFICATIONS_BYTES:
            continue
        size += cost
        rows.append(row)
    text = json.dumps(
        {"v": FORMAT_VERSION, "verifications": rows}, separators=(",", ":"), default=str
    )
    return text, len(items) - len(rows)


def decode_verifications(text: str) -> list[HandedVerification]:
    """Parse an annotation written by ``encode_verifications``; ValueError says what is wrong."""
    rows = _rows(text, "verifications")
    out = []
    for i, row in enumerate(rows):
        try:
            ns, model, pod = (str(x) for x in row["subject"])
            undos = tuple((str(a), dict(p)) for a, p in row["undos"])
            out.append(
                HandedVerification(
                    incident_id=str(row["incident"]),
                    playbook=str(row["playbook"]),
                    cause=str(row["cause"]),
                    namespace=ns,
                    model=model,
                    pod=pod,
                    opened_at=float(row["opened_at"]),
                    checks=tuple(dict(c) for c in row["checks"]),
                    wait_s=float(row["wait_s"]),
                    started_at=float(row["started_at"]),
                    undos=undos,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"verification {i} is malformed ({exc})") from None
    return out
