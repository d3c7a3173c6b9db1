"""`tritonguard incidents`: list past incidents from the audit trail, with their ids.

The pods' incidents of one fleet group (one cause on one model, open at the same time) are
one row of the table, listing the pods; the JSON keeps a line per incident (each id is what
``tritonguard test --from-incident`` takes) and names its group's first incident and pods.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tritonguard.core.fleet_groups import MAX_LISTED, past_groups, past_pods, with_past_groups
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.settings import AUDIT_DB_ENV, DEFAULT_AUDIT_DB_PATH

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `incidents` subcommand."""
    p = sub.add_parser(
        "incidents", help="list past incidents (ids for `tritonguard test --from-incident`)"
    )
    p.add_argument(
        "--audit-db",
        metavar="PATH",
        default=os.environ.get(AUDIT_DB_ENV, str(DEFAULT_AUDIT_DB_PATH)),
        help=f"the daemon's audit database (default ${AUDIT_DB_ENV} or {DEFAULT_AUDIT_DB_PATH})",
    )
    p.add_argument(
        "--state", choices=("all", "open", "resolved"), default="all", help="which incidents"
    )
    p.add_argument("--limit", type=int, default=50, metavar="N", help="newest N (default 50)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the newest incidents; exit 2 when the database is missing or unreadable."""
    path = Path(args.audit_db)
    if not path.is_file():
        print(
            f"tritonguard: {path}: no audit database; point --audit-db (or ${AUDIT_DB_ENV}) "
            "at the daemon's audit_db_path",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        store = AuditStore(path)
    except (OSError, sqlite3.DatabaseError) as exc:
        print(f"tritonguard: {path}: not an audit database ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        rows = [r for r in store.incidents(limit=max(1, args.limit)) if _wanted(r, args.state)]
    finally:
        store.close()
    if args.format == "json":
        for row in with_past_groups(rows):
            sys.stdout.write(json.dumps(row, sort_keys=True) + "\n")
        return EXIT_OK
    groups = past_groups(rows)
    table = Table(title=f"incidents in {path}")
    for column in ("id", "cause", "subject", "opened", "resolved", "resolution"):
        table.add_column(column)
    for g in groups:
        first = _by_opening(g)[0]
        ends = [r["resolved_at"] for r in g]
        if len(g) == 1:
            subject = "/".join(x for x in (first["namespace"], first["pod"], first["model"]) if x)
            ident = first["incident_id"]
        else:
            pods = past_pods(g)
            shown = ", ".join(pods[:MAX_LISTED])
            more = f" and {len(pods) - MAX_LISTED} more" if len(pods) > MAX_LISTED else ""
            subject = f"{first['namespace']}/{first['model']} on {len(pods)} pods: {shown}{more}"
            ident = f"{first['incident_id']} (+{len(g) - 1})"
        table.add_row(
            ident,
            first["cause"],
            subject,
            _when(first["opened_at"]),
            _when(max(ends)) if all(e is not None for e in ends) else "open",
            ", ".join(sorted({str(r["resolution"]) for r in g} - {""})),
        )
    Console(width=160).print(table)
    return EXIT_OK


def _by_opening(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: (float(r["opened_at"]), str(r["pod"])))


def _wanted(row: dict[str, Any], state: str) -> bool:
    if state == "all":
        return True
    return (row["resolved_at"] is None) == (state == "open")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z"
