"""The image: base pinned by digest, every dependency from requirements.lock by hash, a HEALTHCHECK."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"


def _instructions() -> list[tuple[str, str]]:
    """Return the Dockerfile's (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _commands(kind: str) -> list[list[str]]:
    """Return each `pip KIND ...` command the RUN instructions run, as argument lists."""
    found: list[list[str]] = []
    for word, rest in _instructions():
        if word != "RUN":
            continue
        for command in re.split(r"&&|;", rest):
            argv = shlex.split(command)
            if len(argv) >= 2 and argv[0].endswith("pip") and argv[1] == kind:
                found.append(argv)
    return found


def _locked() -> dict[str, tuple[Version, list[str]]]:
    """Return the lock's pins: name → (version, hashes); every entry must be `==` pinned."""
    text = re.sub(r"\\\n", " ", LOCK.read_text())
    pins: dict[str, tuple[Version, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, *options = shlex.split(line)
        req = Requirement(requirement)
        (spec,) = req.specifier
        assert spec.operator == "==", line
        hashes = [o.removeprefix("--hash=") for o in options if o.startswith("--hash=")]
        assert len(hashes) == len(options), f"only hashes may follow a pin: {line}"
        pins[canonicalize_name(req.name)] = (Version(spec.version), hashes)
    return pins


def test_the_base_image_is_pinned_by_digest() -> None:
    """Both stages start from the same ARG, a python:3.11-slim reference with a sha256 digest."""
    instructions = _instructions()
    args = [rest for word, rest in instructions if word == "ARG"]
    (pinned,) = [a for a in args if a.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", pinned)
    bases = [rest.split()[0] for word, rest in instructions if word == "FROM"]
    assert bases == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    # The ARG comes before the first FROM, so both stages see it.
    assert instructions[0][0] == "ARG"


def test_pip_installs_only_the_lock_by_hash_and_the_local_wheel() -> None:
    """Dependencies come from requirements.lock with --require-hashes; nothing else is fetched.

    The one other install is the package's own wheel, built here, with --no-deps --no-index;
    the wheel is built without an isolated build environment (which would download setuptools).
    """
    installs = _commands("install")
    assert len(installs) == 2
    from_lock, local = installs
    assert "--require-hashes" in from_lock and "--no-deps" in from_lock
    assert from_lock[from_lock.index("-r") + 1] == LOCK.name
    assert {"--no-deps", "--no-index"} <= set(local)
    assert all(a.startswith("-") or a.startswith("/wheels/") for a in local[2:])
    (wheel,) = _commands("wheel")
    assert {"--no-deps", "--no-build-isolation"} <= set(wheel)
    assert _commands("check"), "pip check proves the locked set satisfies the package"
    copied = [rest.split() for word, rest in _instructions() if word == "COPY"]
    assert [LOCK.name, "./"] in copied


def test_every_locked_distribution_is_pinned_with_hashes() -> None:
    """Each line of the lock is name==version followed by at least one sha256 hash."""
    pins = _locked()
    assert len(pins) > 20
    for name, (_, hashes) in pins.items():
        assert hashes, name
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), name


def test_the_lock_covers_the_pyproject_dependencies_and_build_backend() -> None:
    """Every runtime dependency and build requirement in pyproject.toml is locked, in range.

    A dependency added to pyproject.toml without regenerating the lock fails here (and the
    image build's `pip check`); so does a pin outside a raised lower bound.
    """
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = _locked()
    wanted = [
        Requirement(r)
        for r in pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]
    ]
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in {LOCK.name}: regenerate it (docs/deploy.md)"
        version, _ = pins[name]
        assert req.specifier.contains(version, prereleases=True), f"{name}=={version} vs {req}"
    header = LOCK.read_text().split("\n\n", 1)[0]
    assert "pyproject.toml" in header and "--generate-hashes" in header
    # The lock is resolved for the base image's Python.
    assert "with Python 3.11" in header


def test_healthcheck_asks_healthz_with_urllib_on_the_probed_port() -> None:
    """HEALTHCHECK runs Python's urllib on /healthz at 9108, the port the Deployment probes."""
    (healthcheck,) = [rest for word, rest in _instructions() if word == "HEALTHCHECK"]
    options, _, command = healthcheck.partition(" CMD ")
    assert "--interval=" in options and "--timeout=" in options
    argv = yaml.safe_load(command)  # the JSON (exec) form
    assert argv[:2] == ["python", "-c"]
    assert "urllib.request.urlopen('http://127.0.0.1:9108/healthz'" in argv[2]
    assert "curl" not in healthcheck and "wget" not in healthcheck
    deployment = yaml.safe_load((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", 9108)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert ("EXPOSE", "9108") in _instructions()
