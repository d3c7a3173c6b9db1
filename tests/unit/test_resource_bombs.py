"""Hostile or nonsensical input refused by the command in bounded time and memory, in one line.

Each case runs ``tritonguard`` in a child process whose address space is capped at 1 GiB (the
inputs below take several GB when read naively) and checks: exit status 2, a single stderr
line naming the file and line with what to do, no traceback, done within a few seconds.
"""

from __future__ import annotations

import gzip
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "traces" / "batching_delay.om.gz"
ADDRESS_SPACE = 1024 * 1024 * 1024
SECONDS = 10.0

# Nine levels of nine aliases: 9**9 (387 million) strings once expanded, from 342 bytes.
LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
LAUGHS_AT = "5:23: alias *d expands the document past 50000 values"


def _test_file(series_values: str = "0+1x10", header: str = "", case: str = "") -> str:
    return (
        f"playbooks: [../pb]\n{header}tests:\n  - name: t\n{case}"
        "    input_series:\n"
        "      - series: 'nv_inference_count{model=\"m\"}'\n"
        f"        values: '{series_values}'\n"
        "    expect:\n      no_incidents: true\n"
    )


def _gzip_bomb(path: Path) -> Path:
    """Write a trace of plausible lines inflating to 1 GiB from about 1 MB (many gzip members)."""
    member = gzip.compress(b'nv_inference_count{model="m"} 1 1700000000\n' * 400_000, 9)
    with path.open("wb") as out:
        for _ in range(64):
            out.write(member)
        out.write(gzip.compress(b"# EOF\n"))
    return path


def _zeros_bomb(path: Path) -> Path:
    """Write 1 GiB of NUL bytes, gzipped: no line ends at all."""
    member = gzip.compress(b"\x00" * (16 * 1024 * 1024), 9)
    path.write_bytes(member * 64)
    return path


def _laughs_dir(tmp: Path) -> Path:
    pb = tmp / "pb"
    pb.mkdir(exist_ok=True)
    (pb / "bomb.yaml").write_text(LAUGHS)
    return pb


Case = Callable[[Path], tuple[list[str], str]]


def _validate_file(tmp: Path) -> tuple[list[str], str]:
    (tmp / "laughs.yaml").write_text(LAUGHS)
    return ["validate", str(tmp / "laughs.yaml")], f"laughs.yaml:{LAUGHS_AT}"


def _validate_dir(tmp: Path) -> tuple[list[str], str]:
    return ["validate", str(_laughs_dir(tmp))], f"bomb.yaml:{LAUGHS_AT}"


def _daemon_config(tmp: Path) -> tuple[list[str], str]:
    (tmp / "cfg.yaml").write_text(LAUGHS)
    return ["run", "--config", str(tmp / "cfg.yaml")], "cfg.yaml:5: alias *d expands"


def _daemon_playbooks(tmp: Path) -> tuple[list[str], str]:
    pb = _laughs_dir(tmp)
    cfg = tmp / "cfg.yaml"
    cfg.write_text(
        f"playbook_dirs: [{pb}]\naudit_db_path: {tmp / 'audit.sqlite3'}\nlisten: 127.0.0.1:0\n"
    )
    return ["run", "--config", str(cfg)], f"bomb.yaml:{LAUGHS_AT}"


def _replay_config(tmp: Path) -> tuple[list[str], str]:
    (tmp / "cfg.yaml").write_text(LAUGHS)
    return ["replay", str(TRACE), "--config", str(tmp / "cfg.yaml")], "cfg.yaml:5: alias *d"


def _replay_playbooks(tmp: Path) -> tuple[list[str], str]:
    return ["replay", str(TRACE), "--playbooks", str(_laughs_dir(tmp))], f"bomb.yaml:{LAUGHS_AT}"


def _test_file_laughs(tmp: Path) -> tuple[list[str], str]:
    (tmp / "t").mkdir()
    (tmp / "t" / "bomb.test.yaml").write_text(LAUGHS)
    return ["test", str(tmp / "t" / "bomb.test.yaml")], f"bomb.test.yaml:{LAUGHS_AT}"


def _gzip_trace(tmp: Path) -> tuple[list[str], str]:
    path = _gzip_bomb(tmp / "bomb.om.gz")
    return ["replay", str(path)], "bomb.om.gz:"


def _zeros_trace(tmp: Path) -> tuple[list[str], str]:
    path = _zeros_bomb(tmp / "zeros.om.gz")
    return ["replay", str(path)], "zeros.om.gz:1: line is over 65536 characters long"


def _series(values: str, header: str = "", case: str = "") -> Case:
    def make(tmp: Path) -> tuple[list[str], str]:
        (tmp / "pb").mkdir(exist_ok=True)
        (tmp / "t").mkdir(exist_ok=True)
        (tmp / "t" / "x.test.yaml").write_text(_test_file(values, header, case))
        return ["test", str(tmp / "t" / "x.test.yaml")], "x.test.yaml:"

    return make


def _eval_interval(value: str) -> Case:
    def make(tmp: Path) -> tuple[list[str], str]:
        return (
            ["replay", str(TRACE), "--format", "json", "--eval-interval", value],
            f"--eval-interval {float(value)}: must be a positive number of seconds",
        )

    return make


CASES: dict[str, tuple[Case, str]] = {
    "validate-laughs": (_validate_file, "write the values out"),
    "validate-dir-laughs": (_validate_dir, "write the values out"),
    "daemon-config-laughs": (_daemon_config, "write the values out"),
    "daemon-playbook-laughs": (_daemon_playbooks, "write the values out"),
    "replay-config-laughs": (_replay_config, "write the values out"),
    "replay-playbook-laughs": (_replay_playbooks, "write the values out"),
    "test-file-laughs": (_test_file_laughs, "write the values out"),
    "gzip-bomb-trace": (_gzip_trace, "gzip bomb"),
    "zeros-gzip-trace": (_zeros_trace, "binary data has no line ends"),
    "series-billion": (_series("0+1x1000000000"), "expand to more than 500000 samples"),
    "series-long-count": (_series("1x" + "9" * 5000), "far too large"),
    "interval-0": (_series("0+1x10", header="interval: 0s\n"), "interval: must be above 0"),
    "evaluation-interval-0": (
        _series("0+1x10", header="evaluation_interval: 0s\n"),
        "evaluation_interval: must be above 0",
    ),
    "test-interval-0": (_series("0+1x10", case="    interval: 0\n"), "interval: must be above 0"),
    "evaluation-interval-nan": (
        _series("0+1x10", header="evaluation_interval: .nan\n"),
        "must be a finite number of seconds",
    ),
    "eval-interval-nan": (_eval_interval("nan"), "(e.g. 5)"),
    "eval-interval-inf": (_eval_interval("inf"), "(e.g. 5)"),
    "eval-interval-0": (_eval_interval("0"), "(e.g. 5)"),
    "eval-interval-negative": (_eval_interval("-5"), "(e.g. 5)"),
}


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_in_one_line_with_exit_2_in_bounded_time_and_memory(
    tmp_path: Path, name: str
) -> None:
    """The command refuses the input: exit 2, one line naming file and line, quickly."""
    make, advice = CASES[name]
    argv, where = make(tmp_path)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tritonguard.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        preexec_fn=_cap_memory,
    )
    elapsed = time.monotonic() - started
    err = proc.stderr.strip()
    assert proc.returncode == 2, f"exit {proc.returncode}: {err[-1500:]}"
    assert len(err.splitlines()) == 1, err[-1500:]
    assert "Traceback" not in err and where in err and advice in err, err
    assert elapsed < SECONDS, f"took {elapsed:.1f} s"
