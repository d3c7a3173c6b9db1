"""The wheel the image is built from: what it declares and carries, and that an install runs.

The Dockerfile builds a wheel and installs it without the lab or dev extras. This builds the
same wheel, checks that every third-party module the daemon imports (outside the lab) comes
from a declared runtime dependency, and that the shipped playbooks and their tests travel with
it; then installs it into a new virtual environment and runs the commands the image runs, from
a directory outside the source tree. The new environment borrows the dependencies already
installed for the tests instead of downloading them again (that part is what the declared-
dependency check covers).
"""

from __future__ import annotations

import ast
import email
import importlib.metadata
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.live

SHIPPED = [
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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from the source tree, as the image's build does (without its lock).

    The image installs the locked dependencies first and builds without isolation
    (tests/unit/test_image_build.py pins that); the wheel's contents are the same.
    """
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    [built] = out.glob("tritonguard-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Install the wheel alone into a new venv that sees the test environment's dependencies."""
    env_dir = tmp_path_factory.mktemp("image") / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Appended after the venv's own site-packages, so the installed `tritonguard` wins over the
    # test environment's editable one (a plain path line does not run that .pth's finder).
    (Path(site) / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
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


def _imported_roots() -> set[str]:
    roots: set[str] = set()
    for path in (ROOT / "daemon" / "tritonguard").rglob("*.py"):
        if "lab" in path.relative_to(ROOT / "daemon" / "tritonguard").parts:
            continue  # the fault lab needs the `lab` extra; the daemon never imports it
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    return {r for r in roots if r not in sys.stdlib_module_names and r not in ("tritonguard",)}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_declared_runtime_dependency(wheel: Path) -> None:
    """The image installs only Requires-Dist without extras: each imported package is in it."""
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(meta_name))
    declared = {
        _normalise(re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0])
        for req in meta.get_all("Requires-Dist") or []
        if "extra ==" not in req
    }
    owners = importlib.metadata.packages_distributions()
    missing = {
        root: owners.get(root)
        for root in _imported_roots()
        if not any(_normalise(d) in declared for d in owners.get(root, []))
    }
    assert missing == {}


def test_wheel_holds_the_tritonguard_package_alone_and_no_test_fakes(wheel: Path) -> None:
    """The only top-level import package is ``tritonguard``: no ``daemon`` to clash with python-daemon.

    The fake Kubernetes API and fake Slack are test code and never ship.
    """
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith((".dist-info", ".data"))} == {"tritonguard"}
    assert not [n for n in names if "fake" in n.rsplit("/", 1)[-1]]


def test_wheel_carries_the_shipped_playbooks_and_their_tests(wheel: Path) -> None:
    """share/tritonguard/playbooks holds one playbook per cause and one test file for each."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    data = "tritonguard-0.1.0.data/data/share/tritonguard/playbooks/"
    assert sorted(n[len(data) :] for n in names if n.startswith(data) and "/tests/" not in n) == [
        f"{c}.yaml" for c in SHIPPED
    ]
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith(data + "tests/")) == [
        f"{c}.test.yaml" for c in SHIPPED
    ]


def test_installed_daemon_finds_its_playbooks_outside_the_source_tree(
    installed: Path, tmp_path: Path
) -> None:
    """The runtime imports, and the default playbooks are the installed copy."""
    probe = (
        "import tritonguard, tritonguard.runtime.daemon_app, tritonguard.runtime.playbook_files as p; "
        "print(tritonguard.__file__); print(p.SHIPPED_PLAYBOOKS)"
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
    module, books = out.stdout.split()
    assert Path(module).is_relative_to(installed)  # the wheel's copy, not the source tree
    assert Path(books) == installed / "share" / "tritonguard" / "playbooks"


def test_shipped_playbooks_and_their_tests_run_from_the_install(
    installed: Path, tmp_path: Path
) -> None:
    """`validate` and `test` work on the installed playbooks, as a user's CI would run them."""
    books = installed / "share" / "tritonguard" / "playbooks"
    validated = run(installed, "validate", str(books), cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    tests = sorted(str(p) for p in (books / "tests").glob("*.test.yaml"))
    tested = run(installed, "test", *tests, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert " passed, 0 failed" in tested.stdout


def test_daemon_starts_and_refuses_an_empty_config_with_one_line(
    installed: Path, tmp_path: Path
) -> None:
    """`run --once` with nothing to watch exits 2 with what to give, not a traceback."""
    out = run(installed, "run", "--once", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "tritonguard: nothing to watch; give --target, --prometheus or a config"
    ]
