"""Playbooks reload on change and on SIGHUP; a broken set never replaces the last good one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import yaml

from tests import waiting
from tests.fixtures_prometheus import MetricsServer
from tests.playbook_harness import stage
from tritonguard.lab.triton_server import free_port
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_files import load_playbook_files
from tritonguard.runtime.playbook_reloader import PlaybookReloader

NOTIFY = """
name: {name}
when: {{causes: [batching_delay]}}
steps:
  - action: slack.post
"""
BROKEN = NOTIFY.format(name="broken").replace("slack.post", "slack.pots")


def reloader(books: Path, db: Path) -> PlaybookReloader:
    """Return a reloader over ``books`` that started with what the directory holds."""
    on = stage([], AuditStore(db))
    r = PlaybookReloader(on, [books], on.store)
    r.start(load_playbook_files([books]))
    return r


def names(r: PlaybookReloader) -> list[str]:
    """Return the names of the playbooks active in the stage."""
    return sorted(b.name for b in r.stage.playbooks)


def test_a_changed_or_added_file_is_loaded_and_a_broken_one_keeps_the_last_good_set(
    tmp_path: Path,
) -> None:
    """Edits and new files take effect; a broken set is refused with file:line and kept out."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "a.yaml").write_text(NOTIFY.format(name="a"))
    r = reloader(books, tmp_path / "audit.sqlite3")
    assert names(r) == ["a"] and r.check() is False  # nothing changed
    (books / "b.yaml").write_text(NOTIFY.format(name="b"))
    assert r.check() is True and names(r) == ["a", "b"]
    (books / "b.yaml").write_text(BROKEN)
    assert r.check() is False
    assert names(r) == ["a", "b"]  # the last good set stays active
    assert r.state.ok is False
    assert r.state.problems[0].startswith(f"{books / 'b.yaml'}:5:")
    assert "slack.pots" in r.state.problems[0]
    (books / "b.yaml").write_text(NOTIFY.format(name="c"))
    assert r.check() is True and names(r) == ["a", "c"] and r.state.ok is True


def test_a_configmap_symlink_swap_is_seen(tmp_path: Path) -> None:
    """Kubernetes swaps a ConfigMap volume's ``..data`` symlink atomically; the change loads."""
    books = tmp_path / "books"
    books.mkdir()

    def publish(version: str, text: str) -> None:
        data = books / f"..{version}"
        data.mkdir()
        (data / "notify.yaml").write_text(text)
        tmp = books / "..data_tmp"
        tmp.symlink_to(data.name)
        tmp.replace(books / "..data")

    publish("v1", NOTIFY.format(name="first"))
    (books / "notify.yaml").symlink_to("..data/notify.yaml")
    r = reloader(books, tmp_path / "audit.sqlite3")
    assert names(r) == ["first"]
    publish("v2", NOTIFY.format(name="second"))
    assert r.check() is True and names(r) == ["second"]
    publish("v3", BROKEN)
    assert r.check() is False and names(r) == ["second"]


def test_start_up_with_broken_files_uses_the_last_good_set_from_the_audit_database(
    tmp_path: Path,
) -> None:
    """A restart after a bad edit starts with what last loaded, instead of crash-looping."""
    books = tmp_path / "books"
    books.mkdir()
    db = tmp_path / "audit.sqlite3"
    (books / "a.yaml").write_text(NOTIFY.format(name="a"))
    reloader(books, db).store.close()
    (books / "a.yaml").write_text(BROKEN)
    on = stage([], AuditStore(db))
    r = PlaybookReloader(on, [books], on.store)
    assert r.start_from_saved(["a.yaml:5:13: unknown action 'slack.pots'"]) is True
    assert names(r) == ["a"]
    assert r.state.ok is False and "audit database" in r.state.source
    fresh = AuditStore(tmp_path / "new.sqlite3")
    empty = PlaybookReloader(stage([], fresh), [books], fresh)
    assert empty.start_from_saved(["x"]) is False  # nothing saved: the daemon cannot start


@pytest.fixture
async def target() -> AsyncIterator[MetricsServer]:
    """Yield a metrics endpoint for the daemon to watch."""
    body = "# TYPE nv_inference_request_success counter\n"
    body += 'nv_inference_request_success{model="m",version="1"} 1\n'
    server = await MetricsServer(render=lambda: body).start()
    try:
        yield server
    finally:
        await server.stop()


def _get(url: str) -> tuple[int, str]:
    """Return status and body of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def _until(check: Callable[[], object], timeout_s: float = 20.0) -> None:
    """Poll ``check`` until it holds (the daemon may not be listening yet)."""
    # A refused or reset connection is a miss, not a failure, until the deadline.
    await waiting.wait_for(check, timeout_s, poll_s=0.2, ignoring=(OSError,))


async def test_the_daemon_process_reports_a_broken_set_reloads_on_sighup_and_survives_a_restart(
    tmp_path: Path, target: MetricsServer
) -> None:
    """The daemon process keeps its last good playbooks through bad edits and a restart.

    A broken file shows in /readyz and the metric; SIGHUP loads the fix at once; a restart
    with broken files starts on the last good set from the audit database.
    """
    books = tmp_path / "books"
    books.mkdir()
    (books / "a.yaml").write_text(NOTIFY.format(name="a"))
    port = free_port()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "targets": [{"name": "t", "metrics_url": target.url}],
                "scrape_interval_s": 0.5,
                "evaluation_interval_s": 0.5,
                "listen": f"127.0.0.1:{port}",
                "playbook_dirs": [str(books)],
                "audit_db_path": str(tmp_path / "audit.sqlite3"),
            }
        )
    )
    base = f"http://127.0.0.1:{port}"

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tritonguard.cli.main", "run", "--config", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def playbooks() -> dict[str, object]:
        doc: dict[str, object] = json.loads(_get(f"{base}/readyz")[1])["playbooks"]
        return doc

    daemon = start()
    try:
        await _until(lambda: playbooks()["count"] == 1)
        (books / "b.yaml").write_text(BROKEN)
        await _until(lambda: playbooks()["last_reload_ok"] is False)
        assert "slack.pots" in str(playbooks()["problems"])
        # The gauge follows at the next evaluation (0.5 s here), not with /readyz's answer.
        await _until(lambda: "tritonguard_playbooks_reload_ok 0.0" in _get(f"{base}/metrics")[1])
        assert playbooks()["count"] == 1
        (books / "b.yaml").write_text(NOTIFY.format(name="b"))
        daemon.send_signal(signal.SIGHUP)
        await _until(lambda: playbooks()["count"] == 2 and playbooks()["last_reload_ok"])
        (books / "b.yaml").write_text(BROKEN)
        await _until(lambda: playbooks()["last_reload_ok"] is False)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=15)
    restarted = start()
    try:
        await _until(lambda: playbooks()["count"] == 2)
        state = playbooks()
        assert state["last_reload_ok"] is False and "audit database" in str(state["source"])
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(timeout=15)
