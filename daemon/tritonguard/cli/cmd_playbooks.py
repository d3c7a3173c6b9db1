"""`tritonguard validate`, `schema` and `test`: lint playbooks, export the schema, dry-run tests."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonguard.actions.registry import schemas
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Subject
from tritonguard.core.guards import GuardSettings, RunRecord, model_key
from tritonguard.core.playbook_model import Playbook, PlaybookError, json_schema
from tritonguard.core.playbook_tests import (
    TestCase,
    TestFile,
    check,
    expand_inputs,
    parse_test_file,
)
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample, label
from tritonguard.core.series_notation import is_stale
from tritonguard.core.targets import target_of
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import load_playbook_files, playbook_paths
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.settings import AUDIT_DB_ENV, DEFAULT_AUDIT_DB_PATH
from tritonguard.sources.replay import TraceError
from tritonguard.sources.trace_stream import open_trace, scan_trace

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(ValueError):
    """Input that cannot be tested; the message is one line per problem."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``validate``, ``schema`` and ``test`` subcommands."""
    p = subparsers.add_parser("validate", help="lint playbook files or directories")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(handler=validate)

    p = subparsers.add_parser("schema", help="print the playbook JSON Schema (for editors)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(handler=schema)

    p = subparsers.add_parser("test", help="dry-run playbook tests (like promtool test rules)")
    p.add_argument("files", nargs="*", metavar="FILE")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("--from-incident", metavar="ID", help="turn a recorded incident into a test")
    p.add_argument(
        "--audit-db",
        metavar="PATH",
        default=os.environ.get(AUDIT_DB_ENV, str(DEFAULT_AUDIT_DB_PATH)),
        help=f"audit database holding the incident (default ${AUDIT_DB_ENV} or "
        f"{DEFAULT_AUDIT_DB_PATH}, as the daemon)",
    )
    p.add_argument("--playbooks", metavar="DIR", default="playbooks", help="for --from-incident")
    p.add_argument("--out", metavar="FILE", help="where --from-incident writes the test file")
    p.set_defaults(handler=test)


def _err(text: str) -> None:
    for line in text.splitlines():
        print(f"tritonguard: {line}", file=sys.stderr)


def validate(args: argparse.Namespace) -> int:
    """Lint playbooks: exit 0 when all load, 1 with ``file:line:col`` lines when not.

    A file refused outright (an alias bomb, a huge document) is bad input: exit 2.
    """
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _err(f"{', '.join(missing)}: no such file or directory")
        return EXIT_BAD_INPUT
    try:
        books = load_playbook_files(paths)
    except PlaybookError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT if exc.refused else EXIT_FAIL
    files = len(playbook_paths(paths))
    print(f"ok: {len(books)} playbook(s) in {files} file(s)")
    return EXIT_OK


def schema(args: argparse.Namespace) -> int:
    """Print (or write) the JSON Schema of playbook files, with each action's parameters."""
    text = json.dumps(json_schema(schemas), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


@dataclass(slots=True)
class TestResult:
    """The outcome of one test case."""

    file: str
    name: str
    failures: list[str]
    seconds: float
    events: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)


def _samples(test: TestCase, tf: TestFile, base: Path) -> tuple[Iterable[Sample], float]:
    if test.trace:
        path = Path(test.trace)
        path = path if path.is_absolute() else base / path
        # Streamed from time buckets on disk, as replay does: a day-long recorded trace
        # costs disk, not memory; its files go when the test is done with it.
        trace = open_trace(path)
        return trace, trace.start
    out = []
    for series in expand_inputs(test, tf.interval):
        for t, value in series.points:
            if value is None or is_stale(value):
                continue
            out.append(Sample(series.name, series.labels, value, t))
    return out, test.start


async def run_case(test: TestCase, tf: TestFile, books: list[Playbook], base: Path) -> TestResult:
    """Run one test: the engine over the input, the playbook stage in dry-run, then the checks."""
    started = time.perf_counter()
    samples, start = _samples(test, tf, base)
    engine = Engine()
    _note_configs(engine, samples, test.triton_configs)
    now = [start]
    env = ExecutorEnv(features=engine, clock=lambda: now[0], static_configs=test.triton_configs)
    settings = GuardSettings(dry_run=True)
    if test.action_budget_per_hour is not None:
        settings = GuardSettings(dry_run=True, action_budget_per_hour=test.action_budget_per_hour)
    store = AuditStore()
    for prior in test.prior_runs:
        subject = Subject(prior.namespace, prior.model, prior.pod)
        store.record_run(
            RunRecord(
                prior.playbook,
                subject.key(),
                model_key(subject),
                start - prior.ago,
                True,
                prior.reload,
            )
        )
    stage = PlaybookStage(
        books,
        PlaybookExecutor(store, env),
        settings=settings,
        open_incidents=engine.announced_incidents,
    )
    events: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    models: dict[str, str] = {}
    for t, batch in drive(engine, samples, eval_interval_s=tf.evaluation_interval):
        now[0] = t
        models.update({e.incident_id: e.subject.model for e in engine.open_incidents()})
        models.update({e.incident_id: e.subject.model for e in batch})
        by_incident = await stage.run_step(batch, t)
        for ev in batch:
            ev.actions = [r.as_dict() for r in by_incident.pop(ev.incident_id, [])]
            events.append(ev.as_dict())
            actions += [
                dict(r, model=ev.subject.model, incident=ev.incident_id) for r in ev.actions
            ]
        for incident_id, records in by_incident.items():
            model = models.get(incident_id, "")
            actions += [dict(r.as_dict(), model=model, incident=incident_id) for r in records]
    store.close()
    failures = check(test.expect, events, actions, start)
    return TestResult("", test.name, failures, time.perf_counter() - started, events, actions)


def _note_configs(
    engine: Engine, samples: Iterable[Sample], configs: dict[str, dict[str, Any]]
) -> None:
    """Give the engine the fixture configs, as the daemon does from ``GET .../config``."""
    if not configs:
        return
    seen: set[Subject] = set()
    for s in samples:
        model = label(s.labels, "model")
        if model in configs:
            ns, pod = target_of(s.labels)
            seen.update({Subject(ns, model, pod), Subject(ns, model, "")})
    for subject in seen:
        engine.note_model_config(subject, configs[subject.model])


def _load_file(path: Path) -> tuple[TestFile, list[Playbook]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    try:
        tf = parse_test_file(text, str(path))
    except PlaybookError as exc:
        raise BadInput(str(exc)) from None
    base = path.parent
    sources = [base / p for p in tf.playbooks] or [base.parent]
    missing = [str(p) for p in sources if not p.exists()]
    if missing:
        raise BadInput(f"{path}: playbooks not found: {', '.join(missing)}; fix 'playbooks'")
    try:
        books = load_playbook_files(sources)
    except PlaybookError as exc:
        raise BadInput(str(exc)) from None
    return tf, books


def run_files(files: list[Path]) -> tuple[list[TestResult], list[str]]:
    """Run every test of every file; return results and bad-input problems."""
    results: list[TestResult] = []
    problems: list[str] = []
    for path in files:
        try:
            tf, books = _load_file(path)
        except BadInput as exc:
            problems.append(str(exc))
            continue
        for case in tf.tests:
            try:
                result = asyncio.run(run_case(case, tf, books, path.parent))
            except (TraceError, ValueError) as exc:
                problems.append(f"{path}: test {case.name!r}: {exc}")
                continue
            result.file = str(path)
            results.append(result)
    return results, problems


def print_results(results: list[TestResult]) -> None:
    """Print a readable pass/fail report with expected-vs-got for failures."""
    current = None
    for r in results:
        if r.file != current:
            current = r.file
            print(f"Unit Testing: {r.file}")
        if r.failures:
            print(f"  FAIL  {r.name} ({r.seconds:.2f}s)")
            for failure in r.failures:
                print(f"    - {failure}")
        else:
            print(f"  PASS  {r.name} ({r.seconds:.2f}s)")
    failed = sum(1 for r in results if r.failures)
    print(f"{len(results) - failed} passed, {failed} failed")


def write_junit(results: list[TestResult], path: Path) -> None:
    """Write a JUnit XML report, one testsuite per file."""
    root = ET.Element("testsuites", name="tritonguard")
    by_file: dict[str, list[TestResult]] = {}
    for r in results:
        by_file.setdefault(r.file, []).append(r)
    for file, rs in by_file.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=file,
            tests=str(len(rs)),
            failures=str(sum(1 for r in rs if r.failures)),
            time=f"{sum(r.seconds for r in rs):.3f}",
        )
        for r in rs:
            case = ET.SubElement(
                suite, "testcase", classname=file, name=r.name, time=f"{r.seconds:.3f}"
            )
            if r.failures:
                fail = ET.SubElement(case, "failure", message=r.failures[0].splitlines()[0])
                fail.text = "\n".join(r.failures)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def test(args: argparse.Namespace) -> int:
    """Run dry-run playbook tests: exit 0 all pass, 1 failures, 2 bad input."""
    files = [Path(f) for f in args.files]
    if args.from_incident:
        try:
            files.append(test_from_incident(args))
        except BadInput as exc:
            _err(str(exc))
            return EXIT_BAD_INPUT
    if not files:
        _err("give test files, or --from-incident ID")
        return EXIT_BAD_INPUT
    results, problems = run_files(files)
    if results:
        print_results(results)
    if args.junit:
        write_junit(results, Path(args.junit))
    if problems:
        for problem in problems:
            _err(problem)
        return EXIT_BAD_INPUT
    return EXIT_FAIL if any(r.failures for r in results) else EXIT_OK


def test_from_incident(args: argparse.Namespace) -> Path:
    """Write a regression test for a recorded incident (its flight-recorder trace) and return it."""
    db = Path(args.audit_db)
    if not db.exists():
        raise BadInput(f"{db}: no audit database; pass --audit-db")
    store = AuditStore(db)
    try:
        row = store.incident(args.from_incident)
        decisions = store.decisions(args.from_incident)
    finally:
        store.close()
    if row is None:
        raise BadInput(f"{db}: no incident {args.from_incident!r}; list them in the audit trail")
    if not row.get("trace_path"):
        raise BadInput(f"incident {args.from_incident}: no flight-recorder trace was saved")
    trace = Path(row["trace_path"]).resolve()
    try:
        start = scan_trace(trace).start
    except TraceError as exc:
        raise BadInput(str(exc)) from None
    out = Path(args.out or f"incident-{args.from_incident}.test.yaml").resolve()
    planned = {
        (d.playbook, d.action)
        for d in decisions
        if d.status in ("planned", "ran") and d.action != "*"
    }
    expect: dict[str, Any] = {
        "incidents": [
            {
                "cause": row["cause"],
                "model": row["model"],
                "by": f"{max(0.0, row['opened_at'] - start) + 60:.0f}s",
            }
        ]
    }
    if planned:
        expect["actions"] = [{"playbook": p, "action": a} for p, a in sorted(planned)]
    doc = {
        "playbooks": [os.path.relpath(Path(args.playbooks).resolve(), out.parent)],
        "tests": [
            {
                "name": f"incident {args.from_incident} ({row['cause']} on {row['model']})",
                "trace": os.path.relpath(trace, out.parent),
                "expect": expect,
            }
        ],
    }
    out.write_text(
        f"# Regression test generated from incident {args.from_incident}.\n"
        + yaml.safe_dump(doc, sort_keys=False),
        encoding="utf-8",
    )
    print(f"wrote {out}")
    return out
