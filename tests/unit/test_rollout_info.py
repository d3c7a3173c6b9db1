"""Rollouts inside a trace: tritonguard_rollout_info, read back into the daemon's timeline by replay."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.promql_checks import run_promtool
from tritonguard.cli.main import main
from tritonguard.core.change_text import HIDDEN
from tritonguard.core.config_info import (
    ROLLOUT_INFO,
    config_map_sample,
    config_sample,
    read_rollout_sample,
    rollout_sample,
)
from tritonguard.core.config_map_changes import ConfigMapChange
from tritonguard.core.config_patch import Change
from tritonguard.core.findings import Subject
from tritonguard.core.rollout_changes import RolloutChange
from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.trace_writer import render_trace_gz
from tritonguard.sources.replay import TraceError, load_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2" / "tuning"
SCENARIO = "too_many_instances_tiny_t"
LABELS = json.loads((TRACES / f"{SCENARIO}.labels.json").read_text())
ONSET = float(LABELS["onset"])


def _rollout(at: float = ONSET - 5.0) -> RolloutChange:
    """Return StatefulSet click-model's revision 2, which changed the image and an env value."""
    return RolloutChange(
        namespace="ads",
        kind="StatefulSet",
        workload="click-model",
        revision=2,
        revision_name="click-model-7d9f",
        at=at,
        seen_at=at + 2.0,
        changes=(
            Change("containers[triton].image", "triton:24.08", "triton:24.09"),
            Change(
                "containers[triton].args", ["tritonserver"], ["tritonserver", "--log-verbose=1"]
            ),
        ),
        previous=1,
        previous_name="click-model-5c4b",
    )


def _trace(tmp_path: Path, *extra: Sample, configs: bool = False) -> Path:
    """Write the recorded deploy's metrics with ``extra`` info samples (and its config reads)."""
    samples = list(load_trace(TRACES / f"{SCENARIO}.om.gz"))
    if configs:
        for read in LABELS["configs"]:
            subject = Subject(read["namespace"], read["model"], read["pod"])
            samples.append(config_sample(subject, read["config"], read["at"]))
    samples += extra
    path = tmp_path / "deploy.om.gz"
    path.write_bytes(render_trace_gz(samples))
    return path


def _opened(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    assert main(["replay", str(path), "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    [opened] = [x for x in lines if x.get("event") == "opened"]
    assert isinstance(opened, dict)
    return opened


def test_a_rollout_sample_reads_back_as_the_rollout_written() -> None:
    """Written and read again, the rollout and its pod are what they were."""
    sample = rollout_sample("click-model-0", _rollout())
    assert sample.name == ROLLOUT_INFO and sample.timestamp == ONSET - 3.0
    assert read_rollout_sample(sample) == ("click-model-0", _rollout())


def test_a_trace_with_a_rollout_replays_to_an_incident_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The incident after the rollout names the revision, its diff and its lead on the onset."""
    path = _trace(tmp_path, rollout_sample("click-model-0", _rollout()))
    opened = _opened(capsys, path)
    assert opened["cause"] == "too_many_instances"
    change = opened["change"]
    assert isinstance(change, dict)
    assert change["kind"] == "rollout"
    assert change["summary"].startswith("rollout of StatefulSet click-model revision 2 (")
    assert change["rollout"]["previous"] == 1
    assert change["rollout"]["changes"][0] == {
        "path": "containers[triton].image",
        "old": "triton:24.08",
        "new": "triton:24.09",
    }
    assert change["rollout"]["before_onset_s"] > 0
    assert main(["replay", str(path)]) == 0
    text = capsys.readouterr().out
    assert "what changed: rollout of StatefulSet click-model revision 2" in text


def test_config_reads_and_the_rollout_both_reach_the_incident(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beside config reads nothing is lost: the config diff leads, the rollout rides with it."""
    path = _trace(tmp_path, rollout_sample("click-model-0", _rollout()), configs=True)
    change = _opened(capsys, path)["change"]
    assert isinstance(change, dict)
    assert change["summary"] == "instance_group[0].count: 1 → 4"
    assert change["rollout"]["revision"] == 2


def test_a_rollout_after_the_onset_is_not_what_the_incident_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A revision that began after the incident opened is not named by it."""
    late = _rollout(at=float(LABELS["end"]) - 1.0)
    opened = _opened(capsys, _trace(tmp_path, rollout_sample("click-model-0", late)))
    assert opened.get("change") is None


def _line_of(path: Path, needle: str) -> int:
    text = gzip.decompress(path.read_bytes()).decode()
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize(
    ("label", "value", "reason"),
    [
        ("changes", "[not json", "the changes label is not JSON"),
        ("revision", "seven", "label revision='seven' is not a revision number"),
        ("workload_kind", "DaemonSet", "workload_kind='DaemonSet'; Deployment or StatefulSet"),
        ("changes", '[["image", 3, "x"]]', "a changed value must be a string"),
    ],
)
def test_a_malformed_rollout_sample_is_refused_naming_its_line_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str, value: str, reason: str
) -> None:
    """Replay exits 2 before replaying anything, with file:line and what is wrong."""
    good = rollout_sample("click-model-0", _rollout())
    bad = replace(good, labels=tuple((k, value if k == label else v) for k, v in good.labels))
    path = _trace(tmp_path, bad)
    assert main(["replay", str(path), "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = _line_of(path, ROLLOUT_INFO + "{")
    assert f"{path}:{line}: {ROLLOUT_INFO} at {good.timestamp}: {reason}" in captured.err
    with pytest.raises(TraceError, match=f":{line}: "):
        load_trace(path)


def test_secrets_in_a_hand_written_rollout_sample_are_hidden_on_reading() -> None:
    """A trace written by hand may hold a secret env value or token flag: replay hides them."""
    changes = [
        ["containers[triton].env.API_KEY", "old-key", "new-key"],
        ["containers[triton].args", ["tritonserver"], ["tritonserver", "--token", "s3cret"]],
    ]
    labels = make_labels(
        {
            "namespace": "ads",
            "pod": "click-model-0",
            "workload_kind": "Deployment",
            "workload": "click-model",
            "revision": "3",
            "revision_name": "click-model-abc",
            "rollout_at": "100.0",
            "changes": json.dumps(changes),
        }
    )
    _, rollout = read_rollout_sample(Sample(ROLLOUT_INFO, labels, 1.0, 101.0))
    shown = repr(rollout.as_dict())
    assert "new-key" not in shown and "s3cret" not in shown
    assert rollout.changes[0].new == HIDDEN
    assert rollout.changes[1].new == ["tritonserver", "--token", HIDDEN]
    assert rollout.previous is None and rollout.previous_name is None


def test_the_change_series_are_info_families_promtool_backfills(tmp_path: Path) -> None:
    """Written as OpenMetrics info families, the three change series load into Prometheus.

    A rollout, a config read and a ConfigMap change (quotes in its lines escaped twice).
    """
    subject = Subject("ads", "click-model", "click-model-0")
    edit = ConfigMapChange(
        "ads",
        "models-config",
        ONSET - 12.0,
        ONSET - 10.0,
        "4812",
        "4790",
        ("config.pbtxt",),
        (Change("config.pbtxt:4", 'name: "a"', 'name: "b"'),),
    )
    samples = [
        rollout_sample("click-model-0", _rollout()),
        config_sample(subject, {"max_batch_size": 8}, ONSET),
        config_map_sample("click-model-0", edit),
    ]
    text = gzip.decompress(render_trace_gz(samples)).decode()
    assert "# TYPE tritonguard_rollout info\n" in text
    assert "# TYPE tritonguard_model_config info\n" in text
    assert "# TYPE tritonguard_config_map info\n" in text
    trace = tmp_path / "changes.om"
    trace.write_text(text)
    done = run_promtool(
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        str(trace),
        str(tmp_path / "blocks"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert load_trace(trace) == sorted(samples, key=lambda s: s.name)
