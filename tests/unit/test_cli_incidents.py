"""`tritonguard incidents` lists the daemon's past incidents from the one shared audit database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonguard.cli.main import main
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.settings import AUDIT_DB_ENV, Settings


def _audit(path: Path) -> None:
    store = AuditStore(path)
    for k, cause in enumerate(("batching_delay", "retry_storm")):
        store.record_incident(
            incident_id=f"inc-{k}",
            cause=cause,
            namespace="prod",
            model="ranker",
            pod=f"ranker-{k}",
            opened_at=1_800_000_000.0 + 60 * k,
        )
    store.resolve_incident("inc-0", 1_800_000_030.0)
    store.close()


def test_lists_open_and_resolved_incidents_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON lines, newest first; --state narrows to resolved or open ones."""
    db = tmp_path / "audit.sqlite3"
    _audit(db)
    assert main(["incidents", "--audit-db", str(db), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["incident_id"] for r in rows] == ["inc-1", "inc-0"]
    assert (
        main(["incidents", "--audit-db", str(db), "--format", "json", "--state", "resolved"]) == 0
    )
    assert [json.loads(x)["incident_id"] for x in capsys.readouterr().out.splitlines()] == ["inc-0"]


def test_the_table_names_each_incident_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default table shows ids, causes and whether each is still open."""
    db = tmp_path / "audit.sqlite3"
    _audit(db)
    assert main(["incidents", "--audit-db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "inc-0" in out and "inc-1" in out and "retry_storm" in out and "open" in out


def test_the_cli_reads_the_daemons_setting_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One environment variable and one default for the daemon and the CLI."""
    db = tmp_path / "shared.sqlite3"
    _audit(db)
    monkeypatch.setenv(AUDIT_DB_ENV, str(db))
    assert Settings().audit_db_path == db
    assert main(["incidents", "--format", "json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    monkeypatch.delenv(AUDIT_DB_ENV)
    assert Settings().audit_db_path == Path("tritonguard-audit.sqlite3")


def test_a_missing_database_says_where_to_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No file: exit 2 with the path and the setting to fix, no traceback, no empty file made."""
    missing = tmp_path / "nope.sqlite3"
    assert main(["incidents", "--audit-db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and AUDIT_DB_ENV in err
    assert not missing.exists()


def test_a_file_that_is_not_a_database_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A text file given as the audit database: exit 2 naming it."""
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not sqlite\n" * 100)
    assert main(["incidents", "--audit-db", str(bogus)]) == 2
    assert str(bogus) in capsys.readouterr().err
