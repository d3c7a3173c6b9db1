"""Coverage-guided fuzzing of the parsers with atheris, for long runs on a developer machine.

CI fuzzes the same parsers with Hypothesis (``tests/unit/test_parser_fuzz.py``), bounded in
time. This harness runs for as long as you let it, guided by coverage, from the same seeds::

    pip install atheris
    python -m tests.fuzz.atheris_parsers exposition -max_total_time=600 -timeout=2
    python -m tests.fuzz.atheris_parsers --list

The contract is the one the Hypothesis tests check: each parser raises its documented error
with a one-line message, or nothing. A crash is another exception or a failed check; libFuzzer
writes the input to ``crash-*`` in the working directory. A slow input is a ``timeout-*``.
"""

from __future__ import annotations

import gzip
import importlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritonguard.actions.registry import catalog
from tritonguard.core.exposition import ExpositionError, parse_exposition
from tritonguard.core.playbook_model import PlaybookError, load_playbooks_text
from tritonguard.core.playbook_tests import parse_test_file
from tritonguard.core.series_notation import SeriesNotationError, expand, parse_series_selector
from tritonguard.runtime.alertmanager_webhook import WebhookError, parse_webhook_body
from tritonguard.sources.replay import TraceError, load_trace

ROOT = Path(__file__).resolve().parents[2]
CATALOG = catalog()
_TRACE_FILE = Path(tempfile.mkdtemp(prefix="fuzz-trace-")) / "trace.om.gz"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _one_line(exc: Exception) -> None:
    message = str(exc)
    if not message or "\n" in message:
        raise AssertionError(f"{type(exc).__name__} message is not one line: {message!r}")


def _problems_one_line(exc: PlaybookError) -> None:
    for problem in exc.problems or [""]:
        if not problem or "\n" in problem:
            raise AssertionError(f"a PlaybookError problem is not one line: {problem!r}")


def _exposition(data: bytes) -> None:
    text = _text(data[1:])
    openmetrics = (None, True, False)[data[0] % 3] if data else None
    try:
        parse_exposition(text, source="fuzz", openmetrics=openmetrics, max_samples=100_000)
    except ExpositionError as exc:
        _one_line(exc)


def _trace(data: bytes) -> None:
    # The first byte chooses plain or gzipped; a trace is read from a file, as replay reads it.
    body = data[1:]
    _TRACE_FILE.write_bytes(gzip.compress(body) if data[:1] == b"z" else body)
    try:
        load_trace(_TRACE_FILE)
    except TraceError as exc:
        _one_line(exc)


def _series(data: bytes) -> None:
    text = _text(data)
    for parse in (
        lambda: parse_series_selector(text),
        lambda: expand(text, start=0.0, interval=5.0, max_points=100_000),
    ):
        try:
            parse()
        except SeriesNotationError as exc:
            _one_line(exc)


def _playbooks(data: bytes) -> None:
    try:
        load_playbooks_text(_text(data), "fuzz.yaml", CATALOG)
    except PlaybookError as exc:
        _problems_one_line(exc)


def _playbook_tests(data: bytes) -> None:
    try:
        parse_test_file(_text(data), "fuzz.test.yaml")
    except PlaybookError as exc:
        _problems_one_line(exc)


def _webhook(data: bytes) -> None:
    try:
        parse_webhook_body(data, max_depth=8)
    except WebhookError as exc:
        _one_line(exc)


def _seeds_exposition() -> list[bytes]:
    files = [*sorted((ROOT / "tests/fixtures/expositions").glob("*.prom"))]
    files.append(ROOT / "benchmarks/data/triton_50_models.prom")
    return [b"\x00" + f.read_bytes()[:20_000] for f in files]


def _seeds_trace() -> list[bytes]:
    traces = sorted((ROOT / "tests/fixtures/traces").glob("*_holdout.om.gz"))[:3]
    return [b"p" + gzip.decompress(t.read_bytes())[:20_000] for t in traces]


def _seeds(pattern: str) -> Callable[[], list[bytes]]:
    return lambda: [p.read_bytes() for p in sorted(ROOT.glob(pattern))]


def _seeds_series() -> list[bytes]:
    return [b"up{a=\"b\",c='d'}", b"0+25x24 625+25x23 _x3 stale"]


def _seeds_webhook() -> list[bytes]:
    alert = {"status": "firing", "labels": {"alertname": "TritonQueue"}, "annotations": {}}
    return [json.dumps({"version": "4", "status": "firing", "alerts": [alert]}).encode()]


TARGETS: dict[str, tuple[Callable[[bytes], None], Callable[[], list[bytes]]]] = {
    "exposition": (_exposition, _seeds_exposition),
    "trace": (_trace, _seeds_trace),
    "series": (_series, _seeds_series),
    "playbooks": (_playbooks, _seeds("playbooks/*.yaml")),
    "playbook-tests": (_playbook_tests, _seeds("playbooks/tests/*.test.yaml")),
    "webhook": (_webhook, _seeds_webhook),
}


def main(argv: list[str]) -> int:
    """Fuzz the target named first on the command line; the rest goes to libFuzzer."""
    if len(argv) < 2 or argv[1] not in TARGETS:
        print(f"usage: {argv[0]} TARGET [libFuzzer options]; targets: {', '.join(TARGETS)}")
        return 0 if "--list" in argv else 2
    try:
        atheris: Any = importlib.import_module("atheris")
    except ImportError:
        print("atheris is not installed: pip install atheris")
        return 2
    target, seeds = TARGETS[argv[1]]
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{argv[1]}-"))
    for i, seed in enumerate(seeds()):
        (corpus / f"seed-{i}").write_bytes(seed)
    # Coverage of the parsers' Python code is what guides the fuzzer.
    atheris.instrument_all()
    atheris.Setup([argv[0], *argv[2:], str(corpus)], target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
