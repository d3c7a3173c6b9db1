"""Run history, pending verifications, changes in flight and approvals handed to the next leader.

Each replica keeps its own audit trail, so without this a replica that takes over leadership
would not know the cooldowns, rate limits, budget and reload history the previous leader built
up, and could repeat a reload it had just made. The leader publishes its recent runs with every
renewal; followers adopt them, so whichever replica leads next honours the same guards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tritonguard.core.findings import IncidentEvent
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
    """Return the newest real (not dry-run) runs of the last day as compact JSON.

    Runs that changed nothing (``RunRecord.covered_by``) are named beside the rows, under
    ``covered`` as [index, incident] pairs, so a replica that predates it still reads the
    rows and counts those runs as changes, which errs on the safe side. Past ``MAX_RUNS``,
    runs that changed something go first: covered runs use no budget, so a large fleet group
    can log hundreds in an hour, and were they to push the hour's changes out, the next
    leader would make that many changes again within the same hour.
    """
    eligible = sorted(
        (r for r in runs if not r.dry_run and now - WINDOW_S <= r.at <= now), key=lambda r: r.at
    )
    changed = [r for r in eligible if not r.covered_by][-MAX_RUNS:]
    room = MAX_RUNS - len(changed)
    covered_runs = [r for r in eligible if r.covered_by][-room:] if room > 0 else []
    recent = sorted([*changed, *covered_runs], key=lambda r: r.at)
    rows = [[r.playbook, r.subject_key, r.model_key, round(r.at, 3), int(r.reload)] for r in recent]
    doc: dict[str, Any] = {"v": FORMAT_VERSION, "runs": rows}
    covered = [[i, r.covered_by] for i, r in enumerate(recent) if r.covered_by]
    if covered:
        doc["covered"] = covered
    return json.dumps(doc, separators=(",", ":"))


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
    # Absent in annotations written before runs that changed nothing were told apart.
    covered = json.loads(text).get("covered", [])
    if not isinstance(covered, list):
        raise ValueError("'covered' must be a list")
    for pair in covered:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[0], int)
            and 0 <= pair[0] < len(out)
            and isinstance(pair[1], str)
            and pair[1]
        ):
            raise ValueError(f"covered must hold [run index, incident] pairs, got {pair!r}")
        out[pair[0]] = replace(out[pair[0]], covered_by=pair[1])
    return out


# Pending verifications travel in a second annotation, with the undo steps a failed verdict
# rolls back, and so do change steps in flight ("intents", under their own key, which readers
# of the first format ignore). A model config reload's undo holds the whole previous config,
# so the set is capped well inside the 256 KiB Kubernetes allows for all annotations of an
# object.
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
    # Which of ``undos`` (by index) put their value back when the incident resolves.
    on_resolve: frozenset[int] = frozenset()
    # The incident whose raise the run relied on (``PendingVerification.leaning_on``).
    leaning_on: str = ""

    def key(self) -> tuple[str, str, float]:
        """Return what identifies the verification on every replica."""
        return (self.incident_id, self.playbook, round(self.started_at, 3))


@dataclass(frozen=True, slots=True)
class HandedIntent:
    """A change step in flight (its outcome unknown), as the leader publishes it.

    If the leader dies before the step's outcome is known, the next leader puts back the
    state from before it (``undo``) and rolls back the steps before it (``undos``).
    """

    incident_id: str
    playbook: str
    cause: str
    namespace: str
    model: str
    pod: str
    opened_at: float
    action: str
    started_at: float
    # (action, params) restoring the state from just before the step's change.
    undo: tuple[str, dict[str, Any]]
    # (action, params) of each undo of the steps before it, in the order they took them.
    undos: tuple[tuple[str, dict[str, Any]], ...]
    # Which of ``undos`` (by index) put their value back when the incident resolves.
    on_resolve: frozenset[int] = frozenset()
    # The incident whose raise the run relied on (``PendingIntent.leaning_on``).
    leaning_on: str = ""

    def key(self) -> tuple[str, str, str, float]:
        """Return what identifies the step on every replica."""
        return (self.incident_id, self.playbook, self.action, round(self.started_at, 3))


@dataclass(frozen=True, slots=True)
class HandedApproval:
    """A step waiting for a human's decision, as the leader publishes it.

    The next leader keeps it waiting until the same deadline, so a click on the buttons the
    old leader posted decides it there. ``thread`` (when the old leader's outbox had posted
    it) says where the incident's Slack thread is, so the next leader's replies and updates
    go into it: ``channel`` and ``root_ts``, ``seq`` (the highest message number used),
    ``root`` (the newest root message, text and blocks) and ``request`` (the key and ts of
    the reply that asked for this approval).
    """

    approval_id: str
    incident_id: str
    playbook: str
    cause: str
    namespace: str
    model: str
    pod: str
    opened_at: float
    step_index: int
    action: str
    params: dict[str, Any]
    approvers: tuple[str, ...]
    requested_at: float
    expires_at: float
    undos: tuple[tuple[str, dict[str, Any]], ...]
    thread: dict[str, Any] | None = None
    # Which of ``undos`` (by index) put their value back when the incident resolves.
    on_resolve: frozenset[int] = frozenset()
    # The incident whose raise the run relied on (``PendingApproval.leaning_on``).
    leaning_on: str = ""


Handed = HandedVerification | HandedIntent


def _common_row(item: Handed | HandedApproval) -> dict[str, Any]:
    """Return the fields every handed-over row carries: the incident, the playbook, the undos.

    ``on_resolve`` sits beside ``undos`` (not inside its pairs), so a replica that predates it
    still reads the pairs; it is left out when no undo restores on resolve.
    """
    row: dict[str, Any] = {
        "incident": item.incident_id,
        "playbook": item.playbook,
        "cause": item.cause,
        "subject": [item.namespace, item.model, item.pod],
        "opened_at": round(item.opened_at, 3),
        "undos": [[action, params] for action, params in item.undos],
    }
    if item.on_resolve:
        row["on_resolve"] = sorted(item.on_resolve)
    return row


def _leaning(item: Handed | HandedApproval) -> dict[str, Any]:
    """Return the ``leaning_on`` field of a row, left out when the run relied on nothing."""
    return {"leaning_on": item.leaning_on} if item.leaning_on else {}


def _verification_row(item: HandedVerification) -> dict[str, Any]:
    return {
        **_common_row(item),
        "checks": list(item.checks),
        "wait_s": item.wait_s,
        "started_at": round(item.started_at, 3),
        **_leaning(item),
    }


def _intent_row(item: HandedIntent) -> dict[str, Any]:
    return {
        **_common_row(item),
        "action": item.action,
        "started_at": round(item.started_at, 3),
        "undo": list(item.undo),
        **_leaning(item),
    }


def _approval_row(item: HandedApproval) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": item.approval_id,
        **_common_row(item),
        "step": item.step_index,
        "action": item.action,
        "params": item.params,
        "approvers": list(item.approvers),
        "requested_at": round(item.requested_at, 3),
        "expires_at": round(item.expires_at, 3),
        **_leaning(item),
    }
    if item.thread is not None:
        row["thread"] = item.thread
    return row


def encode_verifications(items: Sequence[Handed | HandedApproval]) -> tuple[str, int]:
    """Return the annotation text within the byte cap, and how many items were left out.

    Changes in flight go first (an unknown change matters more than an unjudged one), then
    approvals (a human may be about to click), then verifications; newest first within each.
    An approval whose thread does not fit goes without it: it is still decided, and only
    the thread's updates are lost.
    """
    intents = sorted(
        (i for i in items if isinstance(i, HandedIntent)), key=lambda v: v.started_at, reverse=True
    )
    checks = sorted(
        (i for i in items if isinstance(i, HandedVerification)),
        key=lambda v: v.started_at,
        reverse=True,
    )
    approvals = sorted(
        (i for i in items if isinstance(i, HandedApproval)),
        key=lambda a: a.requested_at,
        reverse=True,
    )
    size = 0
    kept: dict[str, list[dict[str, Any]]] = {"verifications": [], "intents": [], "approvals": []}
    rows: list[tuple[str, dict[str, Any]]] = [("intents", _intent_row(i)) for i in intents]
    rows += [("approvals", _approval_row(a)) for a in approvals]
    rows += [("verifications", _verification_row(v)) for v in checks]
    for key, row in rows:
        cost = len(json.dumps(row, separators=(",", ":"), default=str))
        if size + cost > MAX_VERIFICATIONS_BYTES and "thread" in row:
            row = {k: v for k, v in row.items() if k != "thread"}  # noqa: PLW2901 - the lighter row
            cost = len(json.dumps(row, separators=(",", ":"), default=str))
        if size + cost > MAX_VERIFICATIONS_BYTES:
            continue
        size += cost
        kept[key].append(row)
    doc: dict[str, Any] = {"v": FORMAT_VERSION, "verifications": kept["verifications"]}
    for extra in ("intents", "approvals"):
        if kept[extra]:
            doc[extra] = kept[extra]
    text = json.dumps(doc, separators=(",", ":"), default=str)
    return text, len(items) - sum(len(v) for v in kept.values())


def _common_fields(row: Any) -> dict[str, Any]:
    """Decode the fields every handed-over row carries (``_common_row``), as keyword arguments.

    Raises KeyError, TypeError or ValueError on a malformed row; the caller names the row.
    """
    ns, model, pod = (str(x) for x in row["subject"])
    undos = tuple((str(a), dict(p)) for a, p in row["undos"])
    # Absent in annotations written before restores on resolve were handed over.
    on_resolve = frozenset(int(i) for i in row.get("on_resolve", ()))
    if any(not 0 <= i < len(undos) for i in on_resolve):
        raise ValueError(f"on_resolve {sorted(on_resolve)} names an undo that is not there")
    return {
        "incident_id": str(row["incident"]),
        "playbook": str(row["playbook"]),
        "cause": str(row["cause"]),
        "namespace": ns,
        "model": model,
        "pod": pod,
        "opened_at": float(row["opened_at"]),
        "undos": undos,
        "on_resolve": on_resolve,
    }


def _extra_rows(text: str, key: str) -> list[Any]:
    """Return an optional list of the annotation (absent before its kind was handed over)."""
    _rows(text, "verifications")
    rows = json.loads(text).get(key, [])
    if not isinstance(rows, list):
        raise ValueError(f"'{key}' must be a list")
    return rows


def decode_verifications(text: str) -> list[Handed]:
    """Parse an annotation written by ``encode_verifications``; ValueError says what is wrong."""
    out: list[Handed] = []
    for i, row in enumerate(_rows(text, "verifications")):
        try:
            out.append(
                HandedVerification(
                    **_common_fields(row),
                    checks=tuple(dict(c) for c in row["checks"]),
                    wait_s=float(row["wait_s"]),
                    started_at=float(row["started_at"]),
                    # Absent before relied-on raises were handed over, and when there is none.
                    leaning_on=str(row.get("leaning_on", "")),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"verification {i} is malformed ({exc})") from None
    for i, row in enumerate(_extra_rows(text, "intents")):
        try:
            action, params = row["undo"]
            out.append(
                HandedIntent(
                    **_common_fields(row),
                    action=str(row["action"]),
                    started_at=float(row["started_at"]),
                    undo=(str(action), dict(params)),
                    leaning_on=str(row.get("leaning_on", "")),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"change in flight {i} is malformed ({exc})") from None
    return out


def decode_approvals(text: str) -> list[HandedApproval]:
    """Parse the approvals of an annotation written by ``encode_verifications``.

    Absent in annotations written before approvals were handed over. ValueError says what
    is wrong.
    """
    out: list[HandedApproval] = []
    for i, row in enumerate(_extra_rows(text, "approvals")):
        try:
            thread = row.get("thread")
            if thread is not None and not isinstance(thread, dict):
                raise TypeError("thread must be an object")
            out.append(
                HandedApproval(
                    **_common_fields(row),
                    approval_id=str(row["id"]),
                    step_index=int(row["step"]),
                    action=str(row["action"]),
                    params=dict(row["params"]),
                    approvers=tuple(str(a) for a in row["approvers"]),
                    requested_at=float(row["requested_at"]),
                    expires_at=float(row["expires_at"]),
                    thread=thread,
                    leaning_on=str(row.get("leaning_on", "")),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"approval {i} is malformed ({exc})") from None
    return out


# How far apart two replicas may see one incident open: each opens it at its own evaluation,
# a few scrape intervals (15 s by default) apart at most.
SAME_INCIDENT_S = 90.0


def same_incident(
    theirs: IncidentEvent, ours: IncidentEvent, tolerance_s: float = SAME_INCIDENT_S
) -> bool:
    """Return whether another replica's incident is this replica's ``ours``.

    Incident ids hash each replica's own evaluation time, so they differ between replicas;
    the incident is the same when subject and cause are and it opened within the tolerance.
    """
    if theirs.incident_id == ours.incident_id:
        return True
    return (
        theirs.subject.key() == ours.subject.key()
        and theirs.cause == ours.cause
        and abs(theirs.opened_at - ours.opened_at) <= tolerance_s
    )
