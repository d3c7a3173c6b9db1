"""Mounted ConfigMap changes inside a trace: tritonguard_config_map_info, read back by replay."""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_rollout_changes import incident
from tritonguard.cli.cmd_playbooks import run_files
from tritonguard.cli.main import main
from tritonguard.core.change_text import HIDDEN
from tritonguard.core.config_changes import ConfigChange
from tritonguard.core.config_info import (
    CONFIG_MAP_INFO,
    config_map_sample,
    read_config_map_sample,
)
from tritonguard.core.config_map_changes import ConfigMapChange
from tritonguard.core.config_patch import Change
from tritonguard.core.engine import Engine
from tritonguard.core.replay import drive
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.trace_writer import render_trace_gz
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import FlightRecorder
from tritonguard.sources.replay import TraceError, load_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2" / "tuning"
SCENARIO = "too_many_instances_tiny_t"
LABELS = json.loads((TRACES / f"{SCENARIO}.labels.json").read_text())
ONSET = float(LABELS["onset"])
POD = "click-model-0"


def _edit(at: float = ONSET - 10.0) -> ConfigMapChange:
    """Return an edit of models-config's config.pbtxt line 4, as discovery diffs it."""
    return ConfigMapChange(
        namespace="ads",
        name="models-config",
        at_earliest=at - 1.5,
        at_latest=at,
        resource_version="4812",
        previous_version="4790",
        keys=("config.pbtxt",),
        changes=(
            Change(
                "config.pbtxt:4",
                "max_queue_delay_microseconds: 500",
                "max_queue_delay_microseconds: 150000",
            ),
        ),
    )


def _trace(tmp_path: Path, *extra: Sample) -> Path:
    """Write the recorded deploy's metrics with ``extra`` info samples."""
    samples = [*load_trace(TRACES / f"{SCENARIO}.om.gz"), *extra]
    path = tmp_path / "deploy.om.gz"
    path.write_bytes(render_trace_gz(samples))
    return path


def _replayed(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, Any]]:
    assert main(["replay", str(path), "--format", "json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


def _with(sample: Sample, **labels: str) -> Sample:
    """Return ``sample`` with some labels replaced or added."""
    return replace(sample, labels=make_labels({**dict(sample.labels), **labels}))


def test_a_config_map_sample_reads_back_as_the_change_written() -> None:
    """Written and read again, the pod and the change are what they were, timed at the read."""
    sample = config_map_sample(POD, _edit())
    assert sample.name == CONFIG_MAP_INFO and sample.timestamp == ONSET - 10.0
    assert read_config_map_sample(sample) == (POD, _edit())


def test_a_trace_with_a_config_map_change_replays_to_an_incident_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The incident on the mounting pod names the ConfigMap, its key and line, JSON and text."""
    path = _trace(tmp_path, config_map_sample(POD, _edit()))
    [opened] = [x for x in _replayed(capsys, path) if x.get("event") == "opened"]
    assert opened["cause"] == "too_many_instances" and opened["pod"] == POD
    change = opened["change"]
    assert change["kind"] == "config_map"
    mounted = change["config_map"]
    assert (mounted["name"], mounted["keys"]) == ("models-config", ["config.pbtxt"])
    assert (mounted["previous_version"], mounted["resource_version"]) == ("4790", "4812")
    assert mounted["changes"] == [
        {
            "path": "config.pbtxt:4",
            "old": "max_queue_delay_microseconds: 500",
            "new": "max_queue_delay_microseconds: 150000",
        }
    ]
    assert mounted["seen_before_onset_s"] > 0
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "what changed: ConfigMap models-config key config.pbtxt changed (config.pbtxt:4:" in text


def test_a_config_map_change_of_another_pod_or_after_onset_is_not_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a ConfigMap the incident's own pod mounts, changed before its onset, is its change."""
    late = config_map_sample(POD, _edit(at=float(LABELS["end"]) - 1.0))
    other = config_map_sample("click-model-1", _edit())
    path = _trace(tmp_path, late, other)
    [opened] = [x for x in _replayed(capsys, path) if x.get("event") == "opened"]
    assert opened.get("change") is None


PLAYBOOK = """\
name: revert-what-changed
when:
  causes: [too_many_instances]
steps:
  - action: triton.revert_config
"""


def _playbook_test(tmp_path: Path, trace: Path) -> Path:
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "revert.yaml").write_text(PLAYBOOK)
    test = tmp_path / "revert.test.yaml"
    test.write_text(
        "playbooks: [books]\n"
        "tests:\n"
        "  - name: after a ConfigMap edit\n"
        f"    trace: {trace.name}\n"
        "    expect:\n"
        f"      incidents: [{{cause: too_many_instances, model: click-model, pod: {POD}}}]\n"
        "      actions: [{action: triton.revert_config, status: planned}]\n"
    )
    return test


def test_a_playbook_test_on_such_a_trace_sees_the_config_map_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A playbook test feeds the change to the same engine: its incident and plan name it.

    revert_config's plan says a ConfigMap edit is no model config to put back, and how to.
    """
    test = _playbook_test(tmp_path, _trace(tmp_path, config_map_sample(POD, _edit())))
    assert main(["test", str(test)]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out
    [result], problems = run_files([test])
    assert problems == []
    [opened] = [e for e in result.events if e["event"] == "opened"]
    assert opened["change"]["config_map"]["name"] == "models-config"
    [plan] = [a for a in result.actions if a["action"] == "triton.revert_config"]
    note = plan["detail"]["note"]
    assert "ConfigMap models-config key config.pbtxt changed" in note
    assert "kubectl -n ads edit configmap models-config" in note


def _line_of(path: Path, needle: str) -> int:
    text = gzip.decompress(path.read_bytes()).decode()
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"changes": "[not json"}, "the changes label is not JSON"),
        ({"changes": '[["labels.txt", "a", "b"]]'}, "change path 'labels.txt' is not one of"),
        ({"changes": '[["config.pbtxt:x", "a", "b"]]'}, "change path 'config.pbtxt:x'"),
        ({"changes": '[["config.pbtxt", 3, "b"]]'}, "a changed value must be a string or null"),
        (
            {"keys": "config.pbtxt,bad key"},
            "keys='config.pbtxt,bad key' is not a comma-separated list of ConfigMap keys",
        ),
        ({"keys": ""}, "no keys label"),
        ({"config_map": "Models_Config"}, "config_map='Models_Config' is not a ConfigMap name"),
        ({"changed_at": "soon"}, "changed_at='soon' is not unix seconds"),
        ({"changed_at_earliest": "9999999999"}, "changed_at_earliest=9999999999.0 is after"),
        ({"untold": "-1"}, "label untold='-1' is not a count"),
    ],
)
def test_a_malformed_config_map_sample_is_refused_naming_its_line_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: dict[str, str], reason: str
) -> None:
    """Replay and tritonguard test exit 2 before anything runs, with file:line and what is wrong."""
    good = config_map_sample(POD, _edit())
    path = _trace(tmp_path, _with(good, **labels))
    assert main(["replay", str(path), "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = _line_of(path, CONFIG_MAP_INFO + "{")
    assert f"{path}:{line}: {CONFIG_MAP_INFO} at {good.timestamp}: {reason}" in captured.err
    with pytest.raises(TraceError, match=f":{line}: "):
        load_trace(path)
    assert main(["test", str(_playbook_test(tmp_path, path))]) == 2
    assert f"{path}:{line}: {CONFIG_MAP_INFO}" in capsys.readouterr().err


def test_a_hand_written_sample_shows_no_more_than_the_daemon_would() -> None:
    """Secret-looking keys and lines are hidden again; multi-line, binary or long values by size."""
    changes = [
        ["auth_token", "old-secret", "new-secret"],
        ["app.properties:2", "password: hunter2", "password = swordfish"],
        ["labels.txt", "a\nb", "a\nb\nc"],
        ["blob.bin", None, "\0\1\2"],
        ["vocab.txt", "x", "y" * 5000],
    ]
    keys = "app.properties,auth_token,blob.bin,labels.txt,vocab.txt"
    labels = make_labels(
        {
            "namespace": "ads",
            "pod": POD,
            "config_map": "models-config",
            "resource_version": "9",
            "changed_at": "100.0",
            "keys": keys,
            "changes": json.dumps(changes),
        }
    )
    _, change = read_config_map_sample(Sample(CONFIG_MAP_INFO, labels, 1.0, 100.0))
    shown = repr(change.as_dict())
    for secret in ("old-secret", "new-secret", "hunter2", "swordfish"):
        assert secret not in shown
    got = {c.path: (c.old, c.new) for c in change.changes}
    assert got["auth_token"] == (f"{HIDDEN} (10 characters)", f"{HIDDEN} (10 characters)")
    assert got["app.properties:2"] == (f"password: {HIDDEN}", f"password = {HIDDEN}")
    assert got["labels.txt"] == ("(2 lines, 3 characters)", "(3 lines, 5 characters)")
    assert got["blob.bin"][1] is not None and got["blob.bin"][1].startswith("(3 characters, sha256")
    assert got["vocab.txt"][1] is not None
    assert got["vocab.txt"][1].startswith("(5000 characters, sha256 ")
    assert (change.previous_version, change.at_earliest, change.untold) == ("", 100.0, 0)


def test_a_large_change_is_written_within_a_line_replay_reads(tmp_path: Path) -> None:
    """Long lines go by size and digest, and the changes and keys past the room are counted.

    The daemon's own diff may hold 24 lines of up to 64 KiB and thousands of keys; the
    incident's trace must still load, naming as much as it can.
    """
    keys = tuple(f"model-{i:04d}-{'k' * 200}.pbtxt" for i in range(500))
    long = Change(f"{keys[0]}:1", "a" * 60_000, '"' * 60_000)
    # Quotes are escaped twice on the line (JSON, then the label): four characters each.
    # A lone surrogate is valid in JSON text, not in UTF-8: the line must still be written.
    odd = Change(f"{keys[1]}:1", "\ud800 é", "ü")
    quoted = [Change(f"{keys[i]}:1", "x", '"' * 1000) for i in range(2, 20)]
    cut = [Change(f"{k}:1", "x", "y") for k in keys[-4:]]
    big = replace(_edit(), keys=keys, changes=(long, odd, *quoted, *cut), untold=476)
    sample = config_map_sample(POD, big)
    path = tmp_path / "big.om.gz"
    path.write_bytes(render_trace_gz([sample]))
    [back] = load_trace(path)
    _, change = read_config_map_sample(back)
    digest = hashlib.sha256(b"a" * 60_000).hexdigest()[:12]
    assert change.changes[0].old == f"(60000 characters, sha256 {digest})"
    assert change.changes[1] == odd
    assert 2 < len(change.changes) < 2 + len(quoted)
    assert len(change.changes) + change.untold == len(big.changes) + big.untold
    assert 0 < len(change.keys) < len(keys)
    assert len(change.keys) + change.untold_keys == len(keys)
    assert change.headline().endswith(f"and {len(keys) - 3} more")
    assert change.as_dict()["untold_keys"] == change.untold_keys


def test_the_incident_trace_carries_the_config_map_change_it_named(tmp_path: Path) -> None:
    """The flight recorder writes the change into the incident's trace; replayed, it is named again.

    That is what a --from-incident test replays, so its incident follows the same change.
    """
    change = ConfigChange.of_config_map("ranker", replace(_edit(at=1030.0), namespace="ml"))
    store = SeriesStore()
    recorder = FlightRecorder(tmp_path, AuditStore(), store, pre_s=60.0)
    opened = incident(change)
    recorder.on_event(opened)
    labels = make_labels({"model": "ranker", "namespace": "ml", "pod": opened.subject.pod})
    store.add(Sample("nv_inference_request_success", labels, 1.0, 1041.0), 1041.0)
    recorder.observe([], 1041.0)
    path = recorder.on_event(replace(opened, event="resolved", at=1100.0))
    assert path is not None
    names = [s.name for s in load_trace(path)]
    assert names.count(CONFIG_MAP_INFO) == 1
    engine = Engine()
    for _ in drive(engine, load_trace(path), eval_interval_s=60.0):
        pass
    replayed = engine.change_before(opened.subject, 1040.0)
    assert replayed is not None and replayed.config_map == change.config_map
