"""`tritonguard incidents`: list past incidents from the audit trail, with their ids."""

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
        for row in rows:
            sys.stdout.write(json.dumps(row, sort_keys=True) + "\n")
        return EXIT_OK
    table = Table(title=f"incidents in {path}")
    for column in ("id", "cause", "subject", "opened", "resolved", "resolution"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["incident_id"],
            r["cause"],
            "/".join(x for x in (r["namespace"], r["pod"], r["model"]) if x),
            _when(r["opened_at"]),
            _when(r["resolved_at"]) if r["resolved_at"] is not None else "open",
            r["resolution"],
        )
    Console(width=160).print(table)
    return EXIT_OK


def _wanted(row: dict[str, Any], state: str) -> bool:
    if state == "all":
        return True
    return (row["resolved_at"] is None) == (state == "open")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z"
