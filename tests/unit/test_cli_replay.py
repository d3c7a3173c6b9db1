"""`tritonguard replay`: the JSON Lines contract, and one-line errors with exit 2 on bad traces."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_slack import validate_blocks
from tests.unit.synthetic import Phase, samples_of, triton_model
from tritonguard.cli.main import main
from tritonguard.core.engine import Engine
from tritonguard.core.replay import InTimeOrder, check_eval_interval, drive
from tritonguard.core.samples import Sample
from tritonguard.core.trace_writer import render_trace

IV = 5.0
RECORDED = Path(__file__).parent.parent / "fixtures" / "traces"


def _trace(tmp_path: Path, gz: bool = True) -> Path:
    series = triton_model(
        [Phase(24, rps=30, infer_ms=20), Phase(24, rps=49, infer_ms=20, queue_ms=300, pending=12)],
        interval=IV,
    )
    text = render_trace(samples_of(series, interval=IV))
    path = tmp_path / ("t.om.gz" if gz else "t.om")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_json_lines_follow_the_cli_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every line is one JSON object with the contract's keys; the overload is diagnosed."""
    assert main(["replay", str(_trace(tmp_path)), "--format", "json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines, "expected at least one incident transition"
    for obj in lines:
        assert {
            "event",
            "cause",
            "namespace",
            "pod",
            "model",
            "at",
            "confidence",
            "evidence",
            "summary",
            "actions",
        } <= obj.keys()
        assert 0 <= obj["confidence"] <= 1
    assert lines[0]["event"] == "opened" and lines[0]["cause"] == "too_few_instances"
    assert lines[0]["model"] == "resnet" and lines[0]["pod"] == "triton-0"


def test_text_format_is_a_readable_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The text format names the cause, the model and the fix."""
    assert main(["replay", str(_trace(tmp_path, gz=False))]) == 0
    out = capsys.readouterr().out
    assert "OPENED" in out and "too_few_instances" in out and "fix:" in out


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"", ":1: empty trace"),
        (b'nv_inference_count{model="m" 1 2\n# EOF\n', ":1:"),
        (b"<html><body>502 Bad Gateway</body></html>\n# EOF\n", ":1:"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "not UTF-8"),
        (b'{"data": {"result": []}}\n', "bad.om:1:"),
        (
            b'nv_inference_count{model="m"} 1 100\nnv_inference_count{model="m"} abc 105\n# EOF\n',
            ":2:",
        ),
        (b"\x1f\x8b\x08\x00truncated-gzip", "corrupt gzip"),
    ],
    ids=["empty", "garbled", "html", "binary", "json", "bad-value", "truncated-gzip"],
)
def test_bad_traces_exit_2_with_one_line_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expect: str
) -> None:
    """Unreadable input: exit 2, a single stderr line naming file and line, no traceback."""
    path = tmp_path / "bad.om"
    path.write_bytes(content)
    assert main(["replay", str(path), "--format", "json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert expect in err and "Traceback" not in err


def test_truncated_trace_without_eof_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace cut off mid-line names the last line rather than replaying half a sample."""
    text = render_trace(samples_of(triton_model([Phase(4, rps=1)], interval=IV), interval=IV))
    path = tmp_path / "cut.om"
    path.write_text(text[: len(text) // 2].rsplit(" ", 1)[0])
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cut.om:" in err and "EOF" in err and len(err.strip().splitlines()) == 1


def test_sample_without_timestamp_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scrape saved without timestamps cannot be replayed: say so and where."""
    path = tmp_path / "untimed.om"
    path.write_text('nv_inference_count{model="m"} 1 100\nnv_inference_count{model="m"} 2\n# EOF\n')
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "untimed.om:2: sample nv_inference_count has no timestamp" in err


def test_huge_trace_is_refused_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past the sample limit the replay stops with the offending line instead of exhausting memory."""
    from tritonguard.sources import replay as replay_source

    path = tmp_path / "huge.om"
    path.write_text(
        "".join(f'nv_inference_count{{model="m"}} {i} {i}\n' for i in range(50)) + "# EOF\n"
    )
    old = replay_source.MAX_TRACE_SAMPLES
    replay_source.MAX_TRACE_SAMPLES = 10
    try:
        with pytest.raises(replay_source.TraceError, match=r"huge.om:11:"):
            replay_source.load_trace(path, max_samples=10)
    finally:
        replay_source.MAX_TRACE_SAMPLES = old


def test_the_sample_limit_is_the_users_to_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-samples refuses a longer trace with the line and the flag; raised, it replays.

    A day of a 50-pod fleet holds more samples than the default allows; the message names
    the flag that lets it through, and a bad value is refused before the trace is read.
    """
    path = _trace(tmp_path)
    assert main(["replay", str(path), "--format", "json", "--max-samples", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tritonguard: {path}:") and "--max-samples" in err
    assert len(err.splitlines()) == 1
    assert main(["replay", str(path), "--format", "json", "--max-samples", "1000000"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(e["event"] == "opened" for e in events)
    assert main(["replay", str(path), "--max-samples", "0"]) == 2
    assert "--max-samples 0" in capsys.readouterr().err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is bad input, not a crash."""
    assert main(["replay", "/nonexistent/trace.om.gz"]) == 2
    assert "cannot read trace" in capsys.readouterr().err


def test_threshold_overrides_change_the_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config file raising the open threshold above any confidence silences the engine."""
    cfg = tmp_path / "tg.yaml"
    cfg.write_text("thresholds:\n  open_confidence: 0.99\n")
    assert main(["replay", str(_trace(tmp_path)), "--format", "json", "--config", str(cfg)]) == 0
    assert capsys.readouterr().out == ""


def test_unknown_threshold_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a threshold name is an error naming the file, not silently ignored."""
    cfg = tmp_path / "tg.yaml"
    cfg.write_text("thresholds:\n  open_confidense: 0.99\n")
    assert main(["replay", str(_trace(tmp_path)), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "tg.yaml" in err and "open_confidense" in err


def test_the_cli_loads_no_network_sdk_until_a_subcommand_needs_it() -> None:
    """replay/validate/test in a playbook author's CI start without aiohttp or the cluster SDKs."""
    import subprocess
    import sys

    probe = (
        "import sys, tritonguard.cli.main; "
        "print(','.join(m for m in ('aiohttp', 'kubernetes', 'slack_sdk', "
        "'prometheus_api_client', 'tritonclient', 'tritonguard.lab.demo') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5"])
def test_an_eval_interval_that_evaluates_nothing_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """NaN, infinity, 0 or less would replay silently with no events: exit 2 with the reason."""
    code = main(["replay", str(_trace(tmp_path)), "--format", "json", f"--eval-interval={value}"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    [line] = out.err.splitlines()
    assert line.startswith(f"tritonguard: --eval-interval {float(value)}: must be a positive")


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -1.0])
def test_drive_refuses_an_eval_interval_that_evaluates_nothing(value: float) -> None:
    """The engine's driver itself refuses, so no caller can replay vacuously."""
    samples = [Sample("a", (), 1.0, 10.0)]
    with pytest.raises(ValueError, match="must be a positive number of seconds"):
        list(drive(Engine(), samples, eval_interval_s=value))
    assert check_eval_interval(0.5) == 0.5


class _Given(InTimeOrder):
    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)


def test_samples_in_time_order_are_streamed_and_checked() -> None:
    """Samples said to be in time order are not sorted, and time going backwards stops."""
    ordered = [Sample("a", (), 1.0, 10.0), Sample("a", (), 2.0, 20.0)]
    assert [t for t, _ in drive(Engine(), _Given(ordered))] == [10.0, 20.0]
    with pytest.raises(ValueError, match="comes after"):
        list(drive(Engine(), _Given(ordered[::-1])))


def test_stats_count_the_streamed_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stats reports how many samples were replayed, counted while streaming."""
    path = tmp_path / "t.om"
    path.write_text(render_trace([Sample("a", (), float(i), 100.0 + i) for i in range(7)]))
    assert main(["replay", str(path), "--stats"]) == 0
    assert "replayed 6 s of trace (7 samples)" in capsys.readouterr().err


def _slack_calls(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["replay", *argv, "--format", "slack"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_slack_format_prints_the_thread_root_first_then_its_replies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded batching delay makes one thread: the root, then the chart and replies in it.

    Every call is one JSON line with the Web API method, the channel, the thread and blocks
    Block Kit accepts; the chart is a PNG on disk; the shipped playbook's change shows as
    planned, never as done.
    """
    trace = str(RECORDED / "batching_delay.om.gz")
    calls = _slack_calls(capsys, trace, "--charts", str(tmp_path))
    assert len(calls) >= 3
    root, *rest = calls
    assert root["method"] == "chat.postMessage" and root["thread_ts"] is None
    assert root["channel"] == "#tritonguard"
    assert "batching_delay" in str(root["text"]) and "search/ranker" in str(root["text"])
    ts = rest[0]["thread_ts"]
    assert isinstance(ts, str) and ts
    for call in rest:
        assert call["thread"] == root["thread"] and call["thread_ts"] == ts
        assert call["method"] in ("chat.postMessage", "chat.update", "files_upload_v2")
    assert any(c["method"] == "chat.update" and c["ts"] == ts for c in rest)
    (upload,) = [c for c in rest if c["method"] == "files_upload_v2"]
    (file,) = upload["files"]
    png = Path(file["path"])
    assert png.parent == tmp_path and png.read_bytes().startswith(b"\x89PNG")
    replies = [str(c["text"]) for c in rest if c["method"] == "chat.postMessage"]
    assert any("would run (dry-run)" in t and "triton.update_config" in t for t in replies)
    for call in calls:
        assert {"method", "channel", "thread", "text", "blocks", "files"} <= call.keys()
        assert validate_blocks(call["blocks"]) == [], call


def test_slack_format_routes_the_thread_from_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config's routes pick the channel and the mentions; its charts switch is honoured."""
    config = tmp_path / "tritonguard.yaml"
    config.write_text(
        "slack:\n"
        "  channel: '#ml-alerts'\n"
        "  charts: false\n"
        "  routes:\n"
        "    - match: {namespace: speech}\n"
        "      channel: '#speech-oncall'\n"
        "      mention: [S0SPEECH]\n"
    )
    calls = _slack_calls(capsys, str(RECORDED / "retry_storm.om.gz"), "--config", str(config))
    assert calls and {c["channel"] for c in calls} == {"#speech-oncall"}
    assert "S0SPEECH" in json.dumps(calls[0]["blocks"])
    assert not any(c["files"] for c in calls)
