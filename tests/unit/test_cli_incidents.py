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


def _fleet(path: Path) -> None:
    """Three pods' batching_delay on ranker at once, one later on its own, another cause."""
    store = AuditStore(path)
    t = 1_800_000_000.0
    rows = [
        ("inc-a", "batching_delay", "ranker-0", t, t + 300),
        ("inc-b", "batching_delay", "ranker-1", t + 10, t + 200),
        ("inc-c", "batching_delay", "ranker-2", t + 250, t + 400),
        ("inc-d", "batching_delay", "ranker-0", t + 5000, t + 5100),
        ("inc-e", "retry_storm", "ranker-1", t + 20, None),
    ]
    for incident_id, cause, pod, opened, resolved in rows:
        store.record_incident(
            incident_id=incident_id,
            cause=cause,
            namespace="prod",
            model="ranker",
            pod=pod,
            opened_at=opened,
        )
        if resolved is not None:
            store.resolve_incident(incident_id, resolved)
    store.close()


def test_pods_open_at_once_with_one_cause_are_one_row_of_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The three overlapping pods are one row listing them.

    The pod that opened again long after and the other cause are rows of their own.
    """
    db = tmp_path / "audit.sqlite3"
    _fleet(db)
    assert main(["incidents", "--audit-db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "prod/ranker on 3 pods: ranker-0, ranker-1, ranker-2" in out
    assert "inc-a (+2)" in out and "inc-b" not in out and "inc-c" not in out
    assert "inc-d" in out and "inc-e" in out


def test_json_keeps_a_line_per_incident_naming_its_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each id stays a line of its own (what --from-incident takes), with the group's lead."""
    db = tmp_path / "audit.sqlite3"
    _fleet(db)
    assert main(["incidents", "--audit-db", str(db), "--format", "json"]) == 0
    rows = {r["incident_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert sorted(rows) == ["inc-a", "inc-b", "inc-c", "inc-d", "inc-e"]
    for grouped in ("inc-a", "inc-b", "inc-c"):
        assert rows[grouped]["group"] == {
            "lead": "inc-a",
            "pods": ["ranker-0", "ranker-1", "ranker-2"],
            "count": 3,
        }
    assert "group" not in rows["inc-d"] and "group" not in rows["inc-e"]
