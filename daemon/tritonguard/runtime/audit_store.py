"""Persistent audit trail and guard state in SQLite: decisions, runs, undos, approvals, incidents."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tritonguard.core.action_records import ActionRecord, Phase, Status
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.guards import RunRecord
from tritonguard.core.playbook_decisions import (
    Ledger,
    PendingApproval,
    PendingIntent,
    PendingVerification,
)
from tritonguard.core.run_handover import (
    Handed,
    HandedApproval,
    HandedIntent,
    HandedVerification,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    incident_id TEXT NOT NULL,
    event TEXT NOT NULL,
    playbook TEXT NOT NULL,
    subject TEXT NOT NULL,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    dry_run INTEGER NOT NULL,
    status TEXT NOT NULL,
    guard TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    phase TEXT NOT NULL DEFAULT 'step'
);
CREATE INDEX IF NOT EXISTS decisions_incident ON decisions (incident_id);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    playbook TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    model_key TEXT NOT NULL,
    at REAL NOT NULL,
    dry_run INTEGER NOT NULL,
    reload INTEGER NOT NULL,
    incident_id TEXT NOT NULL DEFAULT '',
    covered_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_at ON runs (at);
CREATE TABLE IF NOT EXISTS undos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id TEXT NOT NULL,
    playbook TEXT NOT NULL,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    on_resolve INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    dry_run INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS verifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id TEXT NOT NULL,
    playbook TEXT NOT NULL,
    cause TEXT NOT NULL,
    namespace TEXT NOT NULL,
    model TEXT NOT NULL,
    pod TEXT NOT NULL,
    opened_at REAL NOT NULL,
    checks TEXT NOT NULL,
    wait_s REAL NOT NULL,
    started_at REAL NOT NULL,
    undo_ids TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    origin TEXT NOT NULL DEFAULT '',
    leaning_on TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS verifications_state ON verifications (state);
CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id TEXT NOT NULL,
    playbook TEXT NOT NULL,
    cause TEXT NOT NULL,
    namespace TEXT NOT NULL,
    model TEXT NOT NULL,
    pod TEXT NOT NULL,
    opened_at REAL NOT NULL,
    action TEXT NOT NULL,
    undo_action TEXT NOT NULL,
    undo_params TEXT NOT NULL,
    undo_ids TEXT NOT NULL,
    started_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    origin TEXT NOT NULL DEFAULT '',
    leaning_on TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS intents_state ON intents (state);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY,
    incident_id TEXT NOT NULL,
    playbook TEXT NOT NULL,
    cause TEXT NOT NULL,
    namespace TEXT NOT NULL,
    model TEXT NOT NULL,
    pod TEXT NOT NULL,
    opened_at REAL NOT NULL,
    step_index INTEGER NOT NULL,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    approvers TEXT NOT NULL,
    requested_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    undo_ids TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    decided_by TEXT NOT NULL DEFAULT '',
    decided_at REAL,
    leaning_on TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS approvals_state ON approvals (state);
CREATE TABLE IF NOT EXISTS playbook_sets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    saved_at REAL NOT NULL,
    texts TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS incidents (
    incident_id TEXT PRIMARY KEY,
    cause TEXT NOT NULL,
    namespace TEXT NOT NULL,
    model TEXT NOT NULL,
    pod TEXT NOT NULL,
    opened_at REAL NOT NULL,
    resolved_at REAL,
    trace_path TEXT,
    resolution TEXT NOT NULL DEFAULT ''
);
"""


# Columns added after the first release: an audit file written by an older daemon gains them
# (with their defaults) when it is opened, so upgrading keeps the trail.
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("decisions", "phase", "TEXT NOT NULL DEFAULT 'step'"),
    ("runs", "incident_id", "TEXT NOT NULL DEFAULT ''"),
    ("undos", "dry_run", "INTEGER NOT NULL DEFAULT 0"),
    ("incidents", "resolution", "TEXT NOT NULL DEFAULT ''"),
    ("runs", "covered_by", "TEXT NOT NULL DEFAULT ''"),
    ("verifications", "leaning_on", "TEXT NOT NULL DEFAULT ''"),
    ("intents", "leaning_on", "TEXT NOT NULL DEFAULT ''"),
    ("approvals", "leaning_on", "TEXT NOT NULL DEFAULT ''"),
)
_RUNS_INDEX = "CREATE INDEX IF NOT EXISTS runs_incident ON runs (incident_id)"


@dataclass(frozen=True, slots=True)
class PendingUndo:
    """One undo in the ledger that has not been carried out yet."""

    undo_id: int
    playbook: str
    action: str
    params: dict[str, Any]
    dry_run: bool = False
    # Whether it puts its value back when the incident resolves (else only on a rollback).
    on_resolve: bool = False


# The columns ``_undo`` rebuilds an undo from, in its order.
_UNDO_COLUMNS = "id, playbook, action, params, dry_run, on_resolve"
# What verifications, intents and approvals store first: the incident and the playbook
# (``_incident_values`` writes them, ``_left_incident`` reads them back).
_INCIDENT_COLUMNS = "incident_id, playbook, cause, namespace, model, pod, opened_at"
_VERIFICATION_COLUMNS = f"id, {_INCIDENT_COLUMNS}, checks, wait_s, started_at, undo_ids, leaning_on"
_INTENT_COLUMNS = (
    f"id, {_INCIDENT_COLUMNS}, action, undo_action, undo_params, undo_ids, started_at, leaning_on"
)
_APPROVAL_COLUMNS = (
    f"approval_id, {_INCIDENT_COLUMNS}, step_index, action, params, approvers, requested_at,"
    " expires_at, undo_ids, leaning_on"
)


def _undo(row: Sequence[Any]) -> PendingUndo:
    """Rebuild an undo from its row (columns as ``_UNDO_COLUMNS``)."""
    return PendingUndo(
        int(row[0]), str(row[1]), str(row[2]), json.loads(row[3]), bool(row[4]), bool(row[5])
    )


class AuditStore:
    """SQLite-backed audit trail; ``:memory:`` for dry-run tests, a file for the daemon.

    Calls are synchronous: each is one small local transaction, far below a millisecond, so
    the event loop is not held up in practice.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except sqlite3.Error as exc:
            raise OSError(f"{self.path}: cannot open the audit database: {exc}") from None
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()

    def _migrate(self) -> None:
        for table, column, decl in _ADDED_COLUMNS:
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        self._db.execute(_RUNS_INDEX)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def record(self, rec: ActionRecord) -> int:
        """Append one decision (ran, planned, skipped and why, failed, rolled back)."""
        with self._lock:
            return self._insert_decision(rec)

    def _insert_decision(self, rec: ActionRecord) -> int:
        """Insert one decision; the caller holds the lock."""
        cur = self._db.execute(
            "INSERT INTO decisions (at, incident_id, event, playbook, subject, action, params,"
            " dry_run, status, guard, reason, detail, phase) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                rec.at,
                rec.incident_id,
                rec.event,
                rec.playbook,
                rec.subject,
                rec.action,
                json.dumps(rec.params, sort_keys=True, default=str),
                int(rec.dry_run),
                rec.status,
                rec.guard,
                rec.reason,
                json.dumps(rec.detail, sort_keys=True, default=str),
                rec.phase,
            ),
        )
        return int(cur.lastrowid or 0)

    def decisions(self, incident_id: str | None = None, limit: int = 1000) -> list[ActionRecord]:
        """Return decisions, oldest first, optionally for one incident."""
        where, args = ("WHERE incident_id = ?", (incident_id,)) if incident_id else ("", ())
        rows = self._exec(
            "SELECT at, incident_id, event, playbook, subject, action, params, dry_run, status,"
            f" guard, reason, detail, phase FROM decisions {where} ORDER BY id LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [
            ActionRecord(
                at=float(r[0]),
                incident_id=str(r[1]),
                event=str(r[2]),
                playbook=str(r[3]),
                subject=str(r[4]),
                action=str(r[5]),
                params=json.loads(r[6]),
                dry_run=bool(r[7]),
                status=cast(Status, r[8]),
                guard=str(r[9]),
                reason=str(r[10]),
                detail=json.loads(r[11]),
                phase=cast(Phase, r[12]),
            )
            for r in rows
        ]

    def ledger(
        self,
        incident_ids: Collection[str],
        *,
        since: float,
        busy: Collection[str] = (),
        in_flight: Collection[int] = (),
        intents_in_flight: Collection[int] = (),
    ) -> Ledger:
        """Return what the playbook stage decides against, read once per evaluation.

        That is: what ran and was skipped for the incidents in view, recent runs, restores
        waiting for recovery, verifications left without a verdict and change steps left
        without an outcome. ``in_flight`` are verifications this process is running now, and
        ``intents_in_flight`` change steps it is running (or left when it was cancelled):
        neither is another daemon's to settle.
        """
        ids = sorted(set(incident_ids))
        done: set[tuple[str, str]] = set()
        skipped: set[tuple[str, str, str]] = set()
        # SQLite binds at most 999 parameters per statement on older builds.
        for k in range(0, len(ids), 500):
            chunk = ids[k : k + 500]
            marks = ",".join("?" * len(chunk))
            for inc, book in self._exec(
                f"SELECT DISTINCT incident_id, playbook FROM runs WHERE incident_id IN ({marks})",
                tuple(chunk),
            ).fetchall():
                done.add((str(inc), str(book)))
            for inc, book, guard in self._exec(
                "SELECT DISTINCT incident_id, playbook, guard FROM decisions"
                f" WHERE status = 'skipped' AND action = '*' AND incident_id IN ({marks})",
                tuple(chunk),
            ).fetchall():
                skipped.add((str(inc), str(book), str(guard)))
        return Ledger(
            done=frozenset(done),
            skipped=frozenset(skipped),
            history=tuple(self.history(since)),
            busy=frozenset(busy),
            awaiting=tuple(self.awaiting_recovery()),
            verifications=tuple(
                v for v in self.pending_verifications() if v.verification_id not in in_flight
            ),
            intents=tuple(
                i for i in self.pending_intents() if i.intent_id not in intents_in_flight
            ),
            approvals=tuple(self.pending_approvals()),
        )

    def record_run(self, run: RunRecord, *, incident_id: str = "") -> int:
        """Remember a run (or a dry-run plan) for cooldowns, rates, budgets and reload loops.

        ``incident_id`` is empty for runs adopted from another replica or given by a test.
        Returns the run's id, for :meth:`mark_run_covered` once it is over.
        """
        cur = self._exec(
            "INSERT INTO runs (playbook, subject_key, model_key, at, dry_run, reload, incident_id,"
            " covered_by) VALUES (?,?,?,?,?,?,?,?)",
            (
                run.playbook,
                run.subject_key,
                run.model_key,
                run.at,
                int(run.dry_run),
                int(run.reload),
                incident_id,
                run.covered_by,
            ),
        )
        return int(cur.lastrowid or 0)

    def mark_run_covered(self, run_id: int, covered_by: str) -> None:
        """Record that a finished run changed nothing, relying on ``covered_by``'s raise.

        It then counts toward no budget and no other incident's rate
        (``guards.RunRecord.covered_by``), in this process, after a restart and, once
        published, on the next leader. Until this is written the run counts as a change.
        """
        self._exec("UPDATE runs SET covered_by = ? WHERE id = ?", (covered_by, run_id))

    def adopt_runs(self, runs: Iterable[RunRecord]) -> int:
        """Add runs another replica made (leader handover) that this store lacks; return how many.

        A run is the same when playbook, subject, mode and time (to the millisecond) agree, so
        adopting the same published history every few seconds adds nothing twice. A run the
        leader published while it was going and later as covered (it changed nothing) is
        marked covered here too.
        """
        added = 0
        for run in runs:
            seen = self._exec(
                "SELECT id, covered_by FROM runs WHERE playbook = ? AND subject_key = ?"
                " AND dry_run = ? AND abs(at - ?) < 0.001 LIMIT 1",
                (run.playbook, run.subject_key, int(run.dry_run), run.at),
            ).fetchone()
            if seen is None:
                self.record_run(run)
                added += 1
            elif run.covered_by and not seen[1]:
                self.mark_run_covered(int(seen[0]), run.covered_by)
        return added

    def history(self, since: float) -> list[RunRecord]:
        """Return runs at or after ``since`` (the guards look back at most a day)."""
        rows = self._exec(
            "SELECT playbook, subject_key, model_key, at, dry_run, reload, covered_by FROM runs"
            " WHERE at >= ? ORDER BY at",
            (since,),
        ).fetchall()
        return [
            RunRecord(r[0], r[1], r[2], float(r[3]), bool(r[4]), bool(r[5]), str(r[6]))
            for r in rows
        ]

    def add_undo(
        self,
        incident_id: str,
        playbook: str,
        action: str,
        params: dict[str, Any],
        on_resolve: bool,
        *,
        dry_run: bool = False,
    ) -> int:
        """Persist how to undo an action, so a restart can still restore on resolve.

        Dry-run plans record the restore a real run would make, in the same ledger.
        """
        with self._lock:
            return self._insert_undo(incident_id, playbook, action, params, on_resolve, dry_run)

    def _insert_undo(  # noqa: PLR0917 - the columns of one undo row
        self,
        incident_id: str,
        playbook: str,
        action: str,
        params: dict[str, Any],
        on_resolve: bool,
        dry_run: bool,
    ) -> int:
        """Insert one undo; the caller holds the lock."""
        cur = self._db.execute(
            "INSERT INTO undos (incident_id, playbook, action, params, on_resolve, dry_run)"
            " VALUES (?,?,?,?,?,?)",
            (
                incident_id,
                playbook,
                action,
                json.dumps(params, default=str),
                int(on_resolve),
                int(dry_run),
            ),
        )
        return int(cur.lastrowid or 0)

    def pending_undos(
        self,
        incident_id: str,
        *,
        on_resolve: bool | None = None,
        playbook: str | None = None,
        dry_run: bool | None = None,
    ) -> list[PendingUndo]:
        """Return undos not yet done, newest first (the order they undo in)."""
        sql = f"SELECT {_UNDO_COLUMNS} FROM undos WHERE incident_id = ? AND done = 0"
        args: list[Any] = [incident_id]
        for column, value in (("on_resolve", on_resolve), ("playbook", playbook)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value if isinstance(value, str) else int(value))
        if dry_run is not None:
            sql += " AND dry_run = ?"
            args.append(int(dry_run))
        rows = self._exec(sql + " ORDER BY id DESC", tuple(args)).fetchall()
        return [_undo(r) for r in rows]

    def hand_over_undos(self, from_incident: str, to_incident: str) -> list[PendingUndo]:
        """Move pending restore-on-resolve undos to another incident; return what moved."""
        moved = self.pending_undos(from_incident, on_resolve=True)
        self._exec(
            "UPDATE undos SET incident_id = ? WHERE incident_id = ? AND done = 0 AND on_resolve = 1",
            (to_incident, from_incident),
        )
        return moved

    def live_undos_elsewhere(self, action: str, incident_id: str) -> list[tuple[str, PendingUndo]]:
        """Return real undos of ``action`` other incidents still hold, oldest first.

        A restore-on-resolve undo holds until it runs; any other undo holds only while its
        incident is open (it is kept for a rollback, never run on success).
        """
        columns = ", ".join(f"u.{c.strip()}" for c in _UNDO_COLUMNS.split(","))
        rows = self._exec(
            f"SELECT {columns}, u.incident_id FROM undos u"
            " LEFT JOIN incidents i ON i.incident_id = u.incident_id"
            " WHERE u.action = ? AND u.done = 0 AND u.dry_run = 0 AND u.incident_id != ?"
            # An undo whose incident this store never saw open (one adopted with an approval
            # from another replica, filed under that replica's id) covers nothing.
            " AND (u.on_resolve = 1 OR (i.incident_id IS NOT NULL AND i.resolved_at IS NULL))"
            " ORDER BY u.id",
            (action, incident_id),
        ).fetchall()
        return [(str(r[6]), _undo(r)) for r in rows]

    def mark_undo_done(self, undo_id: int) -> None:
        """Mark an undo as carried out."""
        self._exec("UPDATE undos SET done = 1 WHERE id = ?", (undo_id,))

    def record_incident(
        self,
        *,
        incident_id: str,
        cause: str,
        namespace: str,
        model: str,
        pod: str,
        opened_at: float,
    ) -> None:
        """Remember an incident when it opens (idempotent)."""
        self._exec(
            "INSERT OR IGNORE INTO incidents (incident_id, cause, namespace, model, pod, opened_at)"
            " VALUES (?,?,?,?,?,?)",
            (incident_id, cause, namespace, model, pod, opened_at),
        )

    def resolve_incident(self, incident_id: str, at: float, *, recovered: bool = True) -> None:
        """Record when an incident resolved, and whether fresh data showed the subject recover.

        An incident closed without that evidence (its subject stopped reporting) keeps its
        restores pending until the subject reports again and has recovered.
        """
        self._exec(
            "UPDATE incidents SET resolved_at = ?, resolution = ? WHERE incident_id = ?",
            (at, "recovered" if recovered else "vanished", incident_id),
        )

    def awaiting_recovery(self) -> list[IncidentEvent]:
        """Return incidents closed without recovery evidence whose restores still wait.

        Each comes back as the resolution that would release its restores: the subject,
        cause and times as stored, ``recovered`` set.
        """
        rows = self._exec(
            "SELECT incident_id, cause, namespace, model, pod, opened_at, resolved_at"
            " FROM incidents WHERE resolution = 'vanished' AND incident_id IN"
            " (SELECT incident_id FROM undos WHERE done = 0 AND on_resolve = 1)"
            " ORDER BY opened_at"
        ).fetchall()
        return [
            IncidentEvent(
                event="resolved",
                incident_id=str(r[0]),
                cause=str(r[1]),
                subject=Subject(str(r[2]), str(r[3]), str(r[4])),
                at=float(r[6] or r[5]),
                confidence=0.0,
                summary=f"{r[3]} reports again and has recovered",
                evidence={},
                fix=Fix(""),
                opened_at=float(r[5]),
            )
            for r in rows
        ]

    def set_trace(self, incident_id: str, path: str) -> None:
        """Store the path of the flight-recorder trace of an incident."""
        self._exec("UPDATE incidents SET trace_path = ? WHERE incident_id = ?", (path, incident_id))

    def incident(self, incident_id: str) -> dict[str, Any] | None:
        """Return the stored incident row, or None."""
        row = self._exec("SELECT * FROM incidents WHERE incident_id = ?", (incident_id,)).fetchone()
        return dict(row) if row is not None else None

    def incidents(self, limit: int = 100) -> list[dict[str, Any]]:
        """Return the latest incidents, newest first."""
        rows = self._exec(
            "SELECT * FROM incidents ORDER BY opened_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [dict(r) for r in rows]

    # ---- verifications that must survive a restart ------------------------------------------
    def begin_verification(  # noqa: PLR0917 - one row: the incident, the step, its undos
        self,
        event: IncidentEvent,
        playbook: str,
        checks: list[dict[str, Any]],
        wait_s: float,
        started_at: float,
        undo_ids: list[int],
        *,
        origin: str = "",
        leaning_on: str = "",
    ) -> int:
        """Write a verification down before its wait begins, so a killed daemon's is not lost.

        ``leaning_on`` names the incident whose raise the run relied on
        (``PendingVerification.leaning_on``), so a verdict after a restart rolls back as the
        run would have.
        """
        cur = self._exec(
            f"INSERT INTO verifications ({_INCIDENT_COLUMNS}, checks, wait_s, started_at,"
            " undo_ids, origin, leaning_on) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                *_incident_values(event, playbook),
                json.dumps(checks, sort_keys=True),
                wait_s,
                started_at,
                json.dumps(undo_ids),
                origin,
                leaning_on,
            ),
        )
        return int(cur.lastrowid or 0)

    def settle_verification(self, verification_id: int, state: str) -> None:
        """Record a verification's verdict (passed, failed, abandoned, handed)."""
        self._exec("UPDATE verifications SET state = ? WHERE id = ?", (state, verification_id))

    def pending_verifications(self) -> list[PendingVerification]:
        """Return verifications without a verdict, oldest first."""
        rows = self._exec(
            f"SELECT {_VERIFICATION_COLUMNS} FROM verifications WHERE state = 'pending' ORDER BY id"
        ).fetchall()
        return [_verification(r) for r in rows]

    def undos_by_id(self, undo_ids: Iterable[int]) -> list[PendingUndo]:
        """Return the undos among ``undo_ids`` not yet done, in the order given."""
        out = []
        for undo_id in undo_ids:
            row = self._exec(
                f"SELECT {_UNDO_COLUMNS} FROM undos WHERE id = ? AND done = 0", (undo_id,)
            ).fetchone()
            if row is not None:
                out.append(_undo(row))
        return out

    def handed_undos(self, undo_ids: Iterable[int]) -> dict[str, Any]:
        """Return the ``undos`` and ``on_resolve`` fields handing these undos to the next leader."""
        undos = self.undos_by_id(undo_ids)
        return {
            "undos": tuple((u.action, u.params) for u in undos),
            "on_resolve": frozenset(i for i, u in enumerate(undos) if u.on_resolve),
        }

    def adopt_undos(self, item: Handed | HandedApproval) -> list[int]:
        """Write the undos another replica handed over down here, each restoring as it did."""
        return [
            self.add_undo(item.incident_id, item.playbook, action, params, i in item.on_resolve)
            for i, (action, params) in enumerate(item.undos)
        ]

    def settle_handed_undos(self, undo_ids: Iterable[int]) -> None:
        """Drop the undos of work the leader settled: they are in its ledger, its to carry out.

        Kept here, a follower's resolution would restore them too (a second actor), and a
        raise they describe would look held after the leader put it back.
        """
        for undo_id in undo_ids:
            self.mark_undo_done(undo_id)

    def adopted_incidents(self) -> list[IncidentEvent]:
        """Return other replicas' incidents whose restores on resolve were handed over here.

        Their ids are the other replica's (each hashes its own evaluation time), so this
        store never saw them open; the handed-over rows say what they were. A local incident
        that is the same one (``same_incident``) takes their restores when it resolves.
        """
        parts = " UNION ".join(
            f"SELECT {_INCIDENT_COLUMNS} FROM {table}"
            for table in ("verifications", "intents", "approvals")
        )
        rows = self._exec(
            f"SELECT DISTINCT {_INCIDENT_COLUMNS} FROM ({parts})"
            " WHERE incident_id IN (SELECT incident_id FROM undos WHERE done = 0 AND on_resolve = 1)"
            " AND incident_id NOT IN (SELECT incident_id FROM incidents) ORDER BY opened_at"
        ).fetchall()
        return [
            _left_incident((None, *r), float(r[6]), f"{r[1]} handed over by another replica")
            for r in rows
        ]

    def handed_verifications(self) -> list[Handed]:
        """Return the pending verifications and changes in flight, for the next leader."""
        out: list[Handed] = [
            HandedVerification(
                **_handed_incident(v.incident, v.playbook),
                **self.handed_undos(v.undo_ids),
                checks=v.checks,
                wait_s=v.wait_s,
                started_at=v.started_at,
                leaning_on=v.leaning_on,
            )
            for v in self.pending_verifications()
        ]
        out += [
            HandedIntent(
                **_handed_incident(i.incident, i.playbook),
                **self.handed_undos(i.undo_ids),
                action=i.action,
                started_at=i.started_at,
                undo=(i.undo_action, dict(i.undo_params)),
                leaning_on=i.leaning_on,
            )
            for i in self.pending_intents()
        ]
        return out

    def handed_approvals(
        self, thread_of: Callable[[str, str], dict[str, Any] | None]
    ) -> list[HandedApproval]:
        """Return the approvals waiting here with their undos, and their threads, for the next leader."""
        return [
            HandedApproval(
                **_handed_incident(p.incident, p.playbook),
                **self.handed_undos(p.undo_ids),
                approval_id=p.approval_id,
                step_index=p.step_index,
                action=p.action,
                params=dict(p.params),
                approvers=p.approvers,
                requested_at=p.requested_at,
                expires_at=p.expires_at,
                thread=thread_of(p.incident.incident_id, p.approval_id),
                leaning_on=p.leaning_on,
            )
            for p in self.pending_approvals()
        ]

    def adopt_verifications(self, published: list[Handed], origin: str) -> int:
        """Make this store's pending verifications and intents the leader's; return how many were new.

        The leader is the only replica that acts and it publishes every verification it still
        owes a verdict and every change step it has no outcome for, so one it no longer
        publishes has been settled: here it is marked ``handed``. New ones come with their
        undo steps, written to this store's ledger.
        """
        checks = [v for v in published if isinstance(v, HandedVerification)]
        intents = [i for i in published if isinstance(i, HandedIntent)]
        return self._adopt_checks(checks, origin) + self._adopt_intents(intents, origin)

    def _adopt_checks(self, published: list[HandedVerification], origin: str) -> int:
        wanted = {v.key(): v for v in published}
        have = {}
        for v in self.pending_verifications():
            key = (v.incident.incident_id, v.playbook, round(v.started_at, 3))
            have[key] = v.verification_id
            if key not in wanted:
                self.settle_verification(v.verification_id, "handed")
                self.settle_handed_undos(v.undo_ids)
        added = 0
        for key, item in wanted.items():
            if key in have:
                continue
            undo_ids = self.adopt_undos(item)
            self.begin_verification(
                handed_event(item),
                item.playbook,
                list(item.checks),
                item.wait_s,
                item.started_at,
                undo_ids,
                origin=origin,
                leaning_on=item.leaning_on,
            )
            added += 1
        return added

    def _adopt_intents(self, published: list[HandedIntent], origin: str) -> int:
        wanted = {i.key(): i for i in published}
        have = {}
        for i in self.pending_intents():
            key = (i.incident.incident_id, i.playbook, i.action, round(i.started_at, 3))
            have[key] = i.intent_id
            if key not in wanted:
                self.settle_intent(i.intent_id, "handed")
                self.settle_handed_undos(i.undo_ids)
        added = 0
        for key, item in wanted.items():
            if key in have:
                continue
            undo_ids = self.adopt_undos(item)
            self.begin_intent(
                handed_event(item),
                item.playbook,
                item.action,
                item.undo,
                undo_ids,
                item.started_at,
                origin=origin,
                leaning_on=item.leaning_on,
            )
            added += 1
        return added

    # ---- change steps in flight (intents) ---------------------------------------------------
    def begin_intent(  # noqa: PLR0917 - one row: the incident, the step, its way back
        self,
        event: IncidentEvent,
        playbook: str,
        action: str,
        undo: tuple[str, dict[str, Any]],
        undo_ids: list[int],
        started_at: float,
        *,
        origin: str = "",
        leaning_on: str = "",
    ) -> int:
        """Write a change step's undo down before the call that changes the server.

        ``undo`` is (action, params) restoring the state from just before the change;
        ``undo_ids`` the ledger's undos of the run's earlier steps. It stays ``pending`` until
        the step's outcome is known (:meth:`settle_step`); one still pending at the next start
        belongs to a daemon that stopped or died with the call in flight.
        """
        cur = self._exec(
            f"INSERT INTO intents ({_INCIDENT_COLUMNS}, action, undo_action, undo_params,"
            " undo_ids, started_at, origin, leaning_on) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                *_incident_values(event, playbook),
                action,
                undo[0],
                json.dumps(undo[1], sort_keys=True, default=str),
                json.dumps(undo_ids),
                started_at,
                origin,
                leaning_on,
            ),
        )
        return int(cur.lastrowid or 0)

    def settle_step(
        self,
        rec: ActionRecord,
        intent_ids: Collection[int],
        *,
        undo: tuple[str, dict[str, Any], bool] | None = None,
    ) -> int | None:
        """Record a step's outcome, its undo and its intents' end in one transaction.

        ``undo`` is (action, params, on_resolve) of a step that ran. The intents become
        ``ran`` (their way back is now the step's own undo) or, for a step that failed (the
        action kept or put back the server's state), ``failed``. Return the undo's id.

        One transaction, so a daemon killed in between leaves either the step's record and
        undo, or its intent still pending: never neither.
        """
        state = "ran" if rec.status == "ran" else "failed"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._insert_decision(rec)
                undo_id = (
                    self._insert_undo(
                        rec.incident_id, rec.playbook, undo[0], undo[1], undo[2], False
                    )
                    if undo is not None
                    else None
                )
                for intent_id in intent_ids:
                    self._db.execute(
                        "UPDATE intents SET state = ? WHERE id = ?", (state, intent_id)
                    )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return undo_id

    def settle_intent(self, intent_id: int, state: str) -> None:
        """Record how an intent ended (ran, failed, restoring, restored, restore_failed, handed)."""
        self._exec("UPDATE intents SET state = ? WHERE id = ?", (state, intent_id))

    def pending_intents(self) -> list[PendingIntent]:
        """Return change steps without an outcome, oldest first."""
        rows = self._exec(
            f"SELECT {_INTENT_COLUMNS} FROM intents WHERE state = 'pending' ORDER BY id"
        ).fetchall()
        return [_intent(r) for r in rows]

    # ---- steps waiting for a human's approval ----------------------------------------------
    def begin_approval(  # noqa: PLR0917 - one row: the incident, the step, who, until when
        self,
        approval_id: str,
        event: IncidentEvent,
        playbook: str,
        step_index: int,
        action: str,
        params: dict[str, Any],
        approvers: Sequence[str],
        requested_at: float,
        expires_at: float,
        undo_ids: Sequence[int],
        *,
        leaning_on: str = "",
    ) -> PendingApproval:
        """Write a waiting step down before anyone can click: a restart keeps it waiting.

        ``leaning_on`` is the raise the run relied on so far (``PendingApproval``).
        """
        self._exec(
            f"INSERT INTO approvals ({_APPROVAL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                approval_id,
                *_incident_values(event, playbook),
                step_index,
                action,
                json.dumps(params, sort_keys=True, default=str),
                json.dumps(list(approvers)),
                requested_at,
                expires_at,
                json.dumps(list(undo_ids)),
                leaning_on,
            ),
        )
        return PendingApproval(
            approval_id=approval_id,
            incident=event,
            playbook=playbook,
            step_index=step_index,
            action=action,
            params=dict(params),
            approvers=tuple(approvers),
            requested_at=requested_at,
            expires_at=expires_at,
            undo_ids=tuple(undo_ids),
            leaning_on=leaning_on,
        )

    def pending_approvals(self, incident_id: str | None = None) -> list[PendingApproval]:
        """Return the steps still waiting for a decision (expired ones too), oldest first."""
        where, args = ("AND incident_id = ?", (incident_id,)) if incident_id else ("", ())
        rows = self._exec(
            f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE state = 'pending' {where}"
            " ORDER BY requested_at, approval_id",
            args,
        ).fetchall()
        return [_approval(r) for r in rows]

    def approval(self, approval_id: str) -> tuple[PendingApproval, dict[str, Any]] | None:
        """Return an approval and its state (``state``, ``decided_by``, ``decided_at``)."""
        row = self._exec(
            f"SELECT {_APPROVAL_COLUMNS}, state, decided_by, decided_at FROM approvals"
            " WHERE approval_id = ?",
            (approval_id,),
        ).fetchone()
        if row is None:
            return None
        return _approval(row), {
            "state": str(row[16]),
            "decided_by": str(row[17]),
            "decided_at": None if row[18] is None else float(row[18]),
        }

    def settle_approval(self, approval_id: str, state: str, by: str, at: float) -> bool:
        """Record how an approval ended (approved, rejected, expired); False if it had already.

        Only a pending approval is settled, in one statement, so two clicks at once (or a
        click racing the expiry) decide it once.
        """
        cur = self._exec(
            "UPDATE approvals SET state = ?, decided_by = ?, decided_at = ?"
            " WHERE approval_id = ? AND state = 'pending'",
            (state, by, at, approval_id),
        )
        return cur.rowcount == 1

    # ---- the last good playbook set -----------------------------------------------------------
    def save_playbook_set(self, texts: dict[str, str], at: float) -> None:
        """Keep the texts of a set that loaded (when they differ from the last one kept)."""
        doc = json.dumps(texts, sort_keys=True)
        last = self._exec("SELECT texts FROM playbook_sets ORDER BY id DESC LIMIT 1").fetchone()
        if last is not None and last[0] == doc:
            return
        self._exec("INSERT INTO playbook_sets (saved_at, texts) VALUES (?, ?)", (at, doc))
        # Only the newest matters; a few are kept to show what changed.
        self._exec(
            "DELETE FROM playbook_sets WHERE id NOT IN"
            " (SELECT id FROM playbook_sets ORDER BY id DESC LIMIT 5)"
        )

    def last_playbook_set(self) -> dict[str, str] | None:
        """Return path → text of the last set that loaded, or None."""
        row = self._exec("SELECT texts FROM playbook_sets ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        texts: dict[str, str] = json.loads(row[0])
        return texts


def _incident_values(event: IncidentEvent, playbook: str) -> tuple[Any, ...]:
    """Return the values of ``_INCIDENT_COLUMNS`` for a row of ``event``'s playbook."""
    s = event.subject
    return (
        event.incident_id,
        playbook,
        event.cause,
        s.namespace,
        s.model,
        s.pod,
        event.opened_at,
    )


def _handed_incident(incident: IncidentEvent, playbook: str) -> dict[str, Any]:
    """Return the incident fields of a row handed to the next leader (``core.run_handover``)."""
    s = incident.subject
    return {
        "incident_id": incident.incident_id,
        "playbook": playbook,
        "cause": incident.cause,
        "namespace": s.namespace,
        "model": s.model,
        "pod": s.pod,
        "opened_at": incident.opened_at,
    }


def _verification(r: Sequence[Any]) -> PendingVerification:
    """Rebuild a pending verification from its row (columns as ``_VERIFICATION_COLUMNS``)."""
    return PendingVerification(
        verification_id=int(r[0]),
        incident=_left_incident(r, float(r[10]), f"verification of {r[2]} left without a verdict"),
        playbook=str(r[2]),
        checks=tuple(json.loads(r[8])),
        wait_s=float(r[9]),
        started_at=float(r[10]),
        undo_ids=tuple(int(i) for i in json.loads(r[11])),
        leaning_on=str(r[12]),
    )


def _intent(r: Sequence[Any]) -> PendingIntent:
    """Rebuild a change step in flight from its row (columns as ``_INTENT_COLUMNS``)."""
    return PendingIntent(
        intent_id=int(r[0]),
        incident=_left_incident(r, float(r[12]), f"{r[8]} of {r[2]} left without an outcome"),
        playbook=str(r[2]),
        action=str(r[8]),
        undo_action=str(r[9]),
        undo_params=json.loads(r[10]),
        undo_ids=tuple(int(i) for i in json.loads(r[11])),
        started_at=float(r[12]),
        leaning_on=str(r[13]),
    )


def _approval(row: Sequence[Any]) -> PendingApproval:
    """Rebuild a pending approval from its row (columns as ``_APPROVAL_COLUMNS``)."""
    return PendingApproval(
        approval_id=str(row[0]),
        incident=_left_incident(row, float(row[12]), f"{row[9]} of {row[2]} awaiting approval"),
        playbook=str(row[2]),
        step_index=int(row[8]),
        action=str(row[9]),
        params=json.loads(row[10]),
        approvers=tuple(str(a) for a in json.loads(row[11])),
        requested_at=float(row[12]),
        expires_at=float(row[13]),
        undo_ids=tuple(int(i) for i in json.loads(row[14])),
        leaning_on=str(row[15]),
    )


def handed_event(item: Handed | HandedApproval, summary: str = "") -> IncidentEvent:
    """Return the incident a handed-over row belongs to, as far as it says."""
    return IncidentEvent(
        event="updated",
        incident_id=item.incident_id,
        cause=item.cause,
        subject=Subject(item.namespace, item.model, item.pod),
        at=item.requested_at if isinstance(item, HandedApproval) else item.started_at,
        confidence=0.0,
        summary=summary,
        evidence={},
        fix=Fix(""),
        opened_at=item.opened_at,
    )


def _left_incident(row: Sequence[Any], at: float, summary: str) -> IncidentEvent:
    """Rebuild the incident of a step left pending from its row's leading columns.

    Verifications and intents both store (id, incident_id, playbook, cause, namespace, model,
    pod, opened_at, ...) first; only what the restart needs to act on is restored.
    """
    return IncidentEvent(
        event="updated",
        incident_id=str(row[1]),
        cause=str(row[3]),
        subject=Subject(str(row[4]), str(row[5]), str(row[6])),
        at=at,
        confidence=0.0,
        summary=summary,
        evidence={},
        fix=Fix(""),
        opened_at=float(row[7]),
    )
