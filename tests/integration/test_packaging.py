"""The wheel the image is built from: a fresh install runs the daemon and its shipped playbooks.

The Dockerfile builds a wheel and installs it without the lab or dev extras. This builds the
same wheel, installs it into a new virtual environment (runtime dependencies only) and runs
the commands the image runs, from a directory outside the source tree.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the wheel and install it (with its runtime dependencies only) into a new venv."""
    work = tmp_path_factory.mktemp("image")
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
        timeout=300,
    )
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=True)
    [wheel] = wheels.glob("tritonguard-*.whl")
    subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(wheel)], check=True, timeout=600
    )
    yield env_dir


def run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed ``tritonguard`` outside the source tree."""
    return subprocess.run(
        [str(env_dir / "bin" / "tritonguard"), *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runtime_imports_need_no_dev_or_lab_extras(installed: Path, tmp_path: Path) -> None:
    """Every runtime module imports with the declared dependencies (the image has no extras)."""
    probe = (
        "import daemon.runtime.daemon_app, daemon.runtime.playbook_runner as p, "
        "daemon.sources.prometheus, daemon.clients.slack_api, daemon.clients.kubernetes_api; "
        "print(p.SHIPPED_PLAYBOOKS)"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", probe],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == installed / "share" / "tritonguard" / "playbooks"


def test_shipped_playbooks_and_their_tests_come_with_the_install(
    installed: Path, tmp_path: Path
) -> None:
    """`validate` and `test` work on the installed playbooks, as a user's CI would run them."""
    books = installed / "share" / "tritonguard" / "playbooks"
    assert sorted(p.stem for p in books.glob("*.yaml")) == [
        "batching_delay",
        "cold_start",
        "cpu_bottleneck",
        "memory_copy",
        "model_reload",
        "node_contention",
        "retry_storm",
        "too_few_instances",
        "too_many_instances",
    ]
    validated = run(installed, "validate", str(books), cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    tests = sorted(str(p) for p in (books / "tests").glob("*.test.yaml"))
    tested = run(installed, "test", *tests, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "0 failed" in tested.stdout


def test_daemon_starts_and_refuses_an_empty_config_with_one_line(
    installed: Path, tmp_path: Path
) -> None:
    """`run --once` with nothing to watch exits 2 with what to give, not a traceback."""
    out = run(installed, "run", "--once", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "tritonguard: nothing to watch; give --target, --prometheus or a config"
    ]
