"""What changed before an incident: config diffs, which change an incident follows, the revert."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.synthetic import START, Phase, samples_of, triton_model
from tritonguard.actions.registry import ActionContext, ActionFailed
from tritonguard.actions.triton_revert_config import RevertConfigParams, revert_config, revert_patch
from tritonguard.cli.main import main
from tritonguard.core.config_changes import ChangeTimeline, ConfigChange, config_diff
from tritonguard.core.config_info import config_sample
from tritonguard.core.config_map_changes import ConfigMapChange
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.replay import drive
from tritonguard.core.rollout_changes import RolloutChange
from tritonguard.core.trace_writer import render_trace_gz
from tritonguard.sources.replay import load_trace

KEY = ("prod", "ranker-0", "ranker")
BEFORE: dict[str, Any] = {
    "name": "ranker",
    "max_batch_size": 8,
    "dynamic_batching": {"max_queue_delay_microseconds": "500", "preferred_batch_size": [4]},
    "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
}


def deployed(**dynamic: Any) -> dict[str, Any]:
    """Return BEFORE with dynamic_batching fields changed, as a deploy would."""
    after = copy.deepcopy(BEFORE)
    after["dynamic_batching"].update(dynamic)
    return after


def test_a_change_reads_as_path_old_arrow_new() -> None:
    """The diff names each leaf with its old and new value, the way on-call reads it."""
    timeline = ChangeTimeline()
    assert timeline.read(KEY, BEFORE, 100.0) is None  # a first read is no change
    change = timeline.read(KEY, deployed(max_queue_delay_microseconds="150000"), 160.0)
    assert change is not None
    assert change.summary() == "dynamic_batching.max_queue_delay_microseconds: 500 → 150000"
    assert (change.at_earliest, change.at_latest) == (100.0, 160.0)
    assert timeline.read(KEY, deployed(max_queue_delay_microseconds="150000"), 220.0) is None


def test_a_long_change_is_summarised_by_its_first_leaves() -> None:
    """Beyond three leaves the summary counts the rest instead of listing them."""
    after = deployed(max_queue_delay_microseconds="9", preferred_batch_size=[1, 2, 3])
    diff = config_diff(BEFORE, after)
    assert len(diff) == 4
    timeline = ChangeTimeline()
    timeline.read(KEY, BEFORE, 0.0)
    change = timeline.read(KEY, after, 1.0)
    assert change is not None and change.summary().endswith("; and 1 more")


@pytest.mark.parametrize(
    ("onset", "follows"),
    [
        (150.0, True),  # read between the two reads that show the change
        (100.0, True),  # onset at the earlier read: the change may precede it
        (99.0, False),  # the change cannot have happened before an onset before both reads
        (160.0 + 600.0, True),  # as old as the baseline looks back
        (160.0 + 601.0, False),  # older: already part of what the baseline calls normal
    ],
)
def test_an_incident_follows_a_change_that_may_precede_its_onset(
    onset: float, follows: bool
) -> None:
    """Preceding means possibly before the onset and no older than the baseline lookback."""
    timeline = ChangeTimeline()
    timeline.read(KEY, BEFORE, 100.0)
    timeline.read(KEY, deployed(max_queue_delay_microseconds="150000"), 160.0)
    assert (timeline.preceding(KEY, onset, 600.0) is not None) is follows


def test_the_revert_loads_back_the_touched_sections_only() -> None:
    """Reverting sets the sections the change touched as they were; others stay as they are now."""
    timeline = ChangeTimeline()
    timeline.read(KEY, BEFORE, 0.0)
    after = deployed(max_queue_delay_microseconds="150000")
    change = timeline.read(KEY, after, 1.0)
    assert change is not None
    live = copy.deepcopy(after)
    live["instance_group"][0]["count"] = 2  # another section, changed by someone since
    patch = revert_patch(change, live)
    assert dict(patch.set) == {"dynamic_batching": BEFORE["dynamic_batching"]}
    assert patch.remove == ()


def test_the_revert_refuses_when_the_touched_section_moved_on() -> None:
    """A leaf of the touched section edited since the deploy would be undone too: refused."""
    timeline = ChangeTimeline()
    timeline.read(KEY, BEFORE, 0.0)
    change = timeline.read(KEY, deployed(max_queue_delay_microseconds="150000"), 1.0)
    assert change is not None
    live = deployed(max_queue_delay_microseconds="150000", preferred_batch_size=[8])
    with pytest.raises(ActionFailed, match="changed again since"):
        revert_patch(change, live)


def test_the_incident_of_a_recorded_deploy_names_its_change_in_the_contract_json() -> None:
    """Replaying a recorded deploy with its config reads, the incident says what changed.

    too_many_instances_tiny_t raised instance_group.count from 1 to 4 at onset; the lab read
    the config before and just after. The opened incident names that change and how long
    before its opening it was read, in the JSON the CLI and /api/incidents print.
    """
    traces = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2" / "tuning"
    labels = json.loads((traces / "too_many_instances_tiny_t.labels.json").read_text())
    reads = sorted(labels["configs"], key=lambda c: c["at"])
    engine = Engine()
    opened = []
    for t, events in drive(engine, load_trace(traces / "too_many_instances_tiny_t.om.gz")):
        while reads and reads[0]["at"] <= t:
            read = reads.pop(0)
            subject = Subject(read["namespace"], read["model"], read["pod"])
            engine.note_model_config(subject, read["config"], at=read["at"])
        opened += [e for e in events if e.event == "opened"]
    [incident] = opened
    assert incident.cause == "too_many_instances"
    out = incident.as_dict()
    assert out["change"]["summary"] == "instance_group[0].count: 1 → 4"
    assert 0 < out["change"]["seen_before_onset_s"] < 15


def _trace_with_config_reads(tmp_path: Path, *, broken: bool = False) -> tuple[Path, float]:
    """Write too_many_instances_tiny_t with the lab's config reads recorded in the trace."""
    traces = Path(__file__).resolve().parents[1] / "fixtures" / "traces_v2" / "tuning"
    labels = json.loads((traces / "too_many_instances_tiny_t.labels.json").read_text())
    samples = list(load_trace(traces / "too_many_instances_tiny_t.om.gz"))
    for read in labels["configs"]:
        subject = Subject(read["namespace"], read["model"], read["pod"])
        samples.append(config_sample(subject, read["config"], read["at"]))
    if broken:
        bad = config_sample(Subject("ads", "click-model", "click-model-0"), {}, labels["onset"])
        labels_ = tuple((k, "{not json" if k == "config" else v) for k, v in bad.labels)
        samples.append(replace(bad, labels=labels_))
    path = tmp_path / "deploy.om.gz"
    path.write_bytes(render_trace_gz(samples))
    return path, float(labels["onset"])


def test_replay_of_a_trace_with_config_reads_names_the_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Config reads recorded in a trace reach the engine through replay: the incident names them.

    The reads travel as the info series tritonguard_model_config_info, written by the same
    trace writer as the metrics; the replay's JSON lines carry the change as /api/incidents does.
    """
    path, _ = _trace_with_config_reads(tmp_path)
    assert main(["replay", str(path), "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    [opened] = [x for x in lines if x.get("event") == "opened"]
    assert opened["cause"] == "too_many_instances"
    assert opened["change"]["summary"] == "instance_group[0].count: 1 → 4"


def test_a_config_read_that_is_not_json_stops_the_replay_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace whose config label is not JSON is refused naming the series, the time and why."""
    path, onset = _trace_with_config_reads(tmp_path, broken=True)
    assert main(["replay", str(path), "--format", "json"]) != 0
    err = capsys.readouterr().err
    assert f"tritonguard_model_config_info at {onset}" in err
    assert "not JSON" in err


def test_a_new_pod_of_a_rollout_is_compared_with_the_config_its_peers_serve() -> None:
    """A rolling update's new pod has no history: its first read is diffed against its peers'.

    Two old pods serve the old config, the new one the new: the change names the peer whose
    config most pods serve, and counts from that pod's read.
    """
    timeline = ChangeTimeline()
    timeline.read(("prod", "ranker-a", "ranker"), BEFORE, 100.0)
    timeline.read(("prod", "ranker-b", "ranker"), BEFORE, 110.0)
    new = ("prod", "ranker-c", "ranker")
    change = timeline.read(
        new, deployed(max_queue_delay_microseconds="150000"), 200.0, newborn=True
    )
    assert change is not None
    assert change.summary() == "dynamic_batching.max_queue_delay_microseconds: 500 → 150000"
    assert change.against.startswith("pod ranker-b")
    assert (change.at_earliest, change.at_latest) == (110.0, 200.0)
    assert timeline.preceding(new, 205.0, 600.0) == change


def test_pods_there_before_the_daemon_started_are_not_compared_with_peers() -> None:
    """A canary that differed on purpose before the daemon started is not a change."""
    timeline = ChangeTimeline()
    timeline.read(("prod", "ranker-a", "ranker"), BEFORE, 100.0)
    timeline.read(("prod", "ranker-b", "ranker"), BEFORE, 100.0)
    canary = deployed(max_queue_delay_microseconds="150000")
    assert timeline.read(("prod", "ranker-canary", "ranker"), canary, 101.0) is None
    # A new pod serving what most peers serve is no change either.
    assert timeline.read(("prod", "ranker-d", "ranker"), BEFORE, 300.0, newborn=True) is None


def test_an_open_incident_is_announced_again_once_the_new_config_is_read() -> None:
    """Read anew, the config changes what the incident says: the next evaluation announces it.

    A deploy raised max_queue_delay from 0.5 ms to 100 ms; the incident opened on the old read
    (its summary names 0.5 ms). The read taken as it opened shows the change, and the next
    evaluation updates the incident with the new value, however soon after the last update.
    """
    series = triton_model(
        [Phase(24, rps=5, queue_ms=0.5), Phase(30, rps=5, queue_ms=80, batch=1.6)], interval=5.0
    )
    engine = Engine()
    subject = Subject("prod", "resnet", "triton-0")

    def config(delay_us: str) -> dict[str, Any]:
        return {
            "max_batch_size": 8,
            "dynamic_batching": {"max_queue_delay_microseconds": delay_us},
            "instance_group": [{"count": 1, "kind": "KIND_GPU"}],
        }

    engine.note_model_config(subject, config("500"), at=START)
    opened: IncidentEvent | None = None
    after: list[IncidentEvent] = []
    for t, events in drive(engine, samples_of(series, interval=5.0), eval_interval_s=5.0):
        if opened is None:
            opened = next((e for e in events if e.event == "opened"), None)
            if opened is not None:
                assert "max_queue_delay 500 µs" in opened.summary
                engine.note_model_config(subject, config("100000"), at=t)
        else:
            after += events
    assert opened is not None and opened.cause == "batching_delay"
    first = after[0]
    assert first.event == "updated" and first.at - opened.at <= 5.0
    assert "max_queue_delay 100 ms" in first.summary and first.change is not None


async def test_revert_config_refuses_a_change_that_is_only_a_rollout() -> None:
    """A rollout that changed no model config has nothing for revert_config to put back.

    It fails with the reason and what would undo a rollout, rather than record a no-op run.
    """
    rollout = RolloutChange("prod", "Deployment", "ranker", 7, "ranker-7f9", 100.0, 100.0)
    incident = IncidentEvent(
        event="opened",
        incident_id="inc-1",
        cause="batching_delay",
        subject=Subject("prod", "ranker", "ranker-7f9-x"),
        at=130.0,
        confidence=0.9,
        summary="queue",
        evidence={},
        fix=Fix("lower the delay"),
        opened_at=130.0,
        change=ConfigChange.of_rollout("ranker", rollout),
    )
    ctx = ActionContext(subject=incident.subject, event=incident, playbook="p", bounds={})
    with pytest.raises(ActionFailed, match="kubectl rollout undo"):
        await revert_config(ctx, RevertConfigParams())


async def test_revert_config_refuses_a_change_that_is_only_a_mounted_config_map() -> None:
    """A ConfigMap edit Triton has not served as a model config is not revert_config's to undo.

    The refusal names the ConfigMap and the kubectl command that puts it back, not a rollout.
    """
    mounted = ConfigMapChange(
        "prod", "models-config", 100.0, 110.0, "42", "41", ("config.pbtxt",), ()
    )
    incident = IncidentEvent(
        event="opened",
        incident_id="inc-2",
        cause="batching_delay",
        subject=Subject("prod", "ranker", "ranker-7f9-x"),
        at=130.0,
        confidence=0.9,
        summary="queue",
        evidence={},
        fix=Fix("lower the delay"),
        opened_at=130.0,
        change=ConfigChange.of_config_map("ranker", mounted),
    )
    ctx = ActionContext(subject=incident.subject, event=incident, playbook="p", bounds={})
    with pytest.raises(ActionFailed) as refused:
        await revert_config(ctx, RevertConfigParams())
    assert "kubectl -n prod edit configmap models-config" in str(refused.value)
    assert "rollout undo" not in str(refused.value)


def test_a_read_asked_before_the_last_one_is_not_taken_for_newer() -> None:
    """Two reads race (periodic and at an opening): the one asked first never flips the state."""
    timeline = ChangeTimeline()
    new = deployed(max_queue_delay_microseconds="150000")
    timeline.read(KEY, BEFORE, 100.0)
    assert timeline.read(KEY, new, 200.0) is not None
    assert timeline.read(KEY, BEFORE, 150.0) is None  # slow answer to a question asked at 150
    assert timeline.read(KEY, new, 210.0) is None  # so there was no flip back and forth


def test_replay_text_names_what_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text replay prints the change an incident followed under its summary."""
    path, _ = _trace_with_config_reads(tmp_path)
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "what changed: instance_group[0].count: 1 → 4" in out
