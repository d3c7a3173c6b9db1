"""The Dockerfile's HEALTHCHECK command, run as written against a real daemon, and against none."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests import waiting
from tests.fixtures_prometheus import free_port

ROOT = Path(__file__).resolve().parents[2]


def _healthcheck_argv() -> list[str]:
    """Return the HEALTHCHECK's exec-form command from the Dockerfile."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    (line,) = [x for x in text.splitlines() if x.startswith("HEALTHCHECK ")]
    argv = json.loads(line.partition(" CMD ")[2])
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def _check(argv: list[str], port: int) -> int:
    """Run the command with this interpreter, on ``port`` instead of the image's 9108."""
    assert argv[0] == "python"
    script = argv[2].replace(":9108/", f":{port}/")
    assert script != argv[2]
    # Its traceback on failure is what Docker would keep as the check's output.
    done = subprocess.run(
        [sys.executable, *argv[1:2], script], capture_output=True, check=False, timeout=30
    )
    return done.returncode


def test_healthcheck_passes_on_a_running_daemon_and_fails_without_one(tmp_path: Path) -> None:
    """Exit 0 while the daemon serves /healthz; exit 1 (not a hang) once it has stopped."""
    argv = _healthcheck_argv()
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {"listen": f"127.0.0.1:{port}", "audit_db_path": str(tmp_path / "audit.sqlite3")}
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITONGUARD_")}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tritonguard.cli.main", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    try:

        def healthy() -> bool:
            # Only a failing check asks whether the daemon has exited, as Docker only sees
            # the check.
            passed = _check(argv, port) == 0
            assert passed or daemon.poll() is None, "the daemon exited"
            return passed

        waiting.wait_for_blocking(healthy, 20, what="/healthz", poll_s=0.2)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    assert _check(argv, port) == 1
