"""`tritonguard test/validate/schema`: shipped tests pass, failures diff, bad input exits 2."""

from __future__ import annotations

import argparse
import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.cli import cmd_playbooks
from tritonguard.core import playbook_tests
from tritonguard.core.engine import Engine
from tritonguard.core.playbook_model import PlaybookError
from tritonguard.core.playbook_tests import MAX_TEST_SAMPLES, expand_inputs, parse_test_file
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample
from tritonguard.core.series_notation import SeriesNotationError
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import load_playbook_files
from tritonguard.runtime.playbook_stage import PlaybookStage

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted((ROOT / "playbooks" / "tests").glob("*.test.yaml"))


def cli(*argv: str) -> int:
    """Run one of the playbook subcommands and return its exit code."""
    parser = argparse.ArgumentParser()
    cmd_playbooks.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


def test_every_shipped_playbook_test_passes_and_covers_every_playbook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default playbooks' tests pass and a JUnit report lists each test."""
    assert len(TESTS) == 9
    junit = tmp_path / "junit.xml"
    assert cli("test", *map(str, TESTS), "--junit", str(junit)) == 0
    out = capsys.readouterr().out
    assert "27 passed, 0 failed" in out
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert len(suites) == 9 and all(s.get("failures") == "0" for s in suites)


def test_a_wrong_expectation_fails_with_expected_and_got(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test expecting another parameter fails (exit 1) and shows what was planned instead."""
    source = (ROOT / "playbooks" / "tests" / "batching_delay.test.yaml").read_text()
    broken = tmp_path / "tests" / "broken.test.yaml"
    broken.parent.mkdir()
    broken.write_text(
        source.replace(
            "../batching_delay.yaml", str(ROOT / "playbooks" / "batching_delay.yaml")
        ).replace("max_queue_delay_microseconds: 500", "max_queue_delay_microseconds: 400")
    )
    junit = tmp_path / "j.xml"
    assert cli("test", str(broken), "--junit", str(junit)) == 1
    out = capsys.readouterr().out
    assert "FAIL  batching_delay is diagnosed" in out
    assert "max_queue_delay_microseconds': 400" in out  # expected
    assert "max_queue_delay_microseconds': 500" in out  # got
    assert ET.parse(junit).getroot().find("testsuite/testcase/failure") is not None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tests: []\n", "tests: List should have at least 1 item"),
        (
            "playbooks: [nowhere.yaml]\ntests: [{name: x, trace: t.om, expect: {}}]\n",
            "playbooks not found",
        ),
        (
            "tests: [{name: x, input_series: [{series: 'a{b=}', values: '1'}], expect: {}}]\n",
            ":1:43:",
        ),
        (
            "tests: [{name: x, input_series: [{series: a, values: '1+x'}], expect: {}}]\n",
            "fix the values",
        ),
    ],
)
def test_bad_test_files_exit_2_with_a_positioned_one_line_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    """Malformed test files give exit 2 and a file:line:col reason, never a traceback."""
    path = tmp_path / "t.test.yaml"
    path.write_text(text)
    (tmp_path / "pb.yaml").write_text("")
    assert cli("test", str(path)) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert all(line.startswith("tritonguard: ") for line in err.splitlines())


def test_validate_reports_problems_and_schema_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate: exit 0 on the defaults, 1 with positioned lines on a bad file; schema is JSON."""
    assert cli("validate", str(ROOT / "playbooks")) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nwhen: {causes: [cold_start]}\nsteps: [{action: nope}]\n")
    capsys.readouterr()
    assert cli("validate", str(bad)) == 1
    assert f"{bad}:3:18: unknown action 'nope'" in capsys.readouterr().err
    assert cli("schema") == 0
    assert json.loads(capsys.readouterr().out)["title"] == "tritonguard playbook"


def test_recorded_incident_becomes_a_passing_regression_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flight recorder saves an incident's series; --from-incident turns it into a test."""
    series = triton_model(
        [
            Phase(24, rps=20, infer_ms=20),
            Phase(24, rps=48, infer_ms=20, queue_ms=900, pending=90, canceled_rps=15),
            Phase(30, rps=20, infer_ms=20),
        ],
        interval=5.0,
    )
    samples = samples_of(series, interval=5.0)
    db = tmp_path / "audit.sqlite3"
    store = AuditStore(db)
    engine = Engine()
    recorder = FlightRecorder(tmp_path / "traces", store, engine.store, pre_s=120)
    on = PlaybookStage(
        load_playbook_files([ROOT / "playbooks"]),
        PlaybookExecutor(store, ExecutorEnv(features=engine)),
        open_incidents=engine.announced_incidents,
    )
    by_t: dict[float, list[Sample]] = {}
    for s in samples:
        by_t.setdefault(s.timestamp or 0.0, []).append(s)
    opened_id = ""

    async def run() -> None:
        nonlocal opened_id
        for t, events in drive(engine, samples, eval_interval_s=5.0):
            recorder.observe(by_t.get(t, []), t)
            await on.run_step(events, t)
            for ev in events:
                recorder.on_event(ev)
                if ev.event == "opened" and ev.cause == "retry_storm":
                    opened_id = ev.incident_id

    asyncio.run(run())
    assert opened_id, "the retry storm was not diagnosed"
    row = store.incident(opened_id)
    assert row is not None and row["trace_path"] and Path(row["trace_path"]).exists()
    store.close()
    out = tmp_path / "regress.test.yaml"
    code = cli(
        "test",
        "--from-incident",
        opened_id,
        "--audit-db",
        str(db),
        "--playbooks",
        str(ROOT / "playbooks"),
        "--out",
        str(out),
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "retry-storm-shed-load" in out.read_text()
    assert "1 passed, 0 failed" in printed


def test_from_incident_with_unknown_id_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An incident id the audit trail does not hold is bad input."""
    AuditStore(tmp_path / "a.sqlite3").close()
    assert cli("test", "--from-incident", "nope", "--audit-db", str(tmp_path / "a.sqlite3")) == 2
    assert "no incident 'nope'" in capsys.readouterr().err


SERIES_FILE = """\
playbooks: []
{header}tests:
  - name: t
{case}    input_series:
      - series: 'nv_inference_count{{model="m"}}'
        values: '{values}'
    expect: {{no_incidents: true}}
"""


def _problems(values: str = "0+1x10", header: str = "", case: str = "") -> list[str]:
    with pytest.raises(PlaybookError) as err:
        parse_test_file(SERIES_FILE.format(values=values, header=header, case=case), "t.yaml")
    return err.value.problems


def test_a_billion_samples_is_refused_at_its_values() -> None:
    """'0+1x1000000000' is counted, not expanded: one line at the values, what to do."""
    [line] = _problems("0+1x1000000000")
    assert line.startswith("t.yaml:6:17: the input series of test 't' expand to more than")
    assert "split the test" in line


def test_the_sample_limit_holds_for_a_tests_series_together() -> None:
    """Many series each under the limit still cannot add up to more than MAX_TEST_SAMPLES."""
    half = MAX_TEST_SAMPLES // 2
    text = SERIES_FILE.format(values=f"0+1x{half}", header="", case="").replace(
        "    expect:",
        "".join(f"      - {{series: 'x{{i=\"{i}\"}}', values: '0+1x{half}'}}\n" for i in range(2))
        + "    expect:",
    )
    with pytest.raises(PlaybookError) as err:
        parse_test_file(text, "t.yaml")
    [line] = err.value.problems
    assert line.startswith("t.yaml:7:38:") and f"more than {MAX_TEST_SAMPLES} samples" in line


def test_expansion_at_run_time_keeps_the_limit_too() -> None:
    """A test built in code (not parsed) is bounded when its series are expanded."""
    case = playbook_tests.TestCase.model_validate(
        {
            "name": "t",
            "input_series": [{"series": "a", "values": f"0+1x{MAX_TEST_SAMPLES}"}],
            "expect": {},
        }
    )
    with pytest.raises(SeriesNotationError, match="more than"):
        expand_inputs(case, 5.0)


@pytest.mark.parametrize(
    ("header", "case", "where", "needle"),
    [
        ("interval: 0s\n", "", "t.yaml:2:11:", "interval: must be above 0"),
        ("evaluation_interval: 0s\n", "", "t.yaml:2:22:", "evaluation_interval: must be above 0"),
        ("", "    interval: 0\n", "t.yaml:4:15:", "interval: must be above 0"),
        ("evaluation_interval: .nan\n", "", "t.yaml:2:22:", "finite number of seconds"),
        ("interval: -5s\n", "", "t.yaml:2:11:", "is not a duration"),
        ("", "    start: .inf\n", "t.yaml:4:12:", "finite number"),
    ],
    ids=["interval-0", "evaluation-interval-0", "test-interval-0", "nan", "negative", "inf-start"],
)
def test_intervals_that_would_pass_vacuously_are_refused(
    header: str, case: str, where: str, needle: str
) -> None:
    """At 0 every sample lands on one instant and nothing is evaluated; NaN never compares."""
    [line] = _problems(header=header, case=case)
    assert line.startswith(where) and needle in line, line
