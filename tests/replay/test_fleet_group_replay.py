"""Replay of a fleet with one fault on most pods: one story per model, listing its pods.

The fleet generator writes four replicas of one deployment serving two models, with the same
fault injected on three of the four pods from the same scrape on; the trace goes through
``tritonguard replay`` as a user would run it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.fleet_gen import Fleet, FleetSpec
from tritonguard.cli.main import main

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
FAULTY = ["dep-0000-0", "dep-0000-1", "dep-0000-2"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Write 200 s of the fleet at 5 s scrapes, the fault from scrape 24 on three pods."""
    spec = FleetSpec(
        pods=4,
        models=2,
        replicas=4,
        interval_s=5.0,
        exporters=False,
        fault="too_few_instances",
        fault_pods=3,
        fault_at=24,
    )
    path = tmp_path_factory.mktemp("fleet") / "fleet.om.gz"
    path.write_bytes(gzip.compress(Fleet(spec).trace(40).encode()))
    return path


def _replay(trace: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert main(["replay", str(trace), "--playbooks", str(PLAYBOOKS), *extra]) == 0
    return capsys.readouterr().out


def test_json_lines_name_one_group_per_model_listing_the_faulty_pods(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each pod's transition is still a line of its own, and names its model's group."""
    lines = [json.loads(x) for x in _replay(trace, capsys, "--format", "json").splitlines()]
    opened = [x for x in lines if x["event"] == "opened"]
    assert sorted((x["model"], x["pod"]) for x in opened) == sorted(
        (m, p) for m in ("dep-0000-m00", "dep-0000-m01") for p in FAULTY
    )
    groups: dict[str, set[str]] = {}
    for x in opened:
        groups.setdefault(x["group"]["id"], set()).add(x["model"])
    assert sorted(groups.values(), key=sorted) == [{"dep-0000-m00"}, {"dep-0000-m01"}]
    last = {x["group"]["id"]: x["group"] for x in opened}
    for g in last.values():
        assert (g["pods"], g["count"], g["of"]) == (FAULTY, 3, 4)
    # Each model is reloaded once for its group: the others wait out the model's cooldown.
    planned = [
        (x["model"], x["pod"])
        for x in lines
        for a in x["actions"]
        if a["action"] == "triton.update_config" and a["status"] == "planned"
    ]
    assert sorted(planned) == [("dep-0000-m00", "dep-0000-0"), ("dep-0000-m01", "dep-0000-0")]


def test_text_tells_one_story_per_model(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text names each model's opening once, with its three pods of four."""
    out = _replay(trace, capsys)
    assert out.count("OPENED") == 2, out
    assert out.count("pods (3 of 4 pods, group grp-") == 2, out
    assert out.count(", ".join(FAULTY)) == 2, out
    assert "action [dep-0000-1]" not in out and "action [dep-0000-2]" not in out


def test_slack_preview_opens_one_thread_per_model(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Slack calls the daemon would make: one root per model, naming its pods."""
    calls = [json.loads(x) for x in _replay(trace, capsys, "--format", "slack").splitlines()]
    roots = [c for c in calls if c["method"] == "chat.postMessage" and c["thread_ts"] is None]
    assert len({c["thread"] for c in calls}) == 2
    assert len(roots) == 2
    for root in roots:
        assert "on 3 of 4 pods" in root["text"]
        assert ", ".join(FAULTY) in json.dumps(root["blocks"], ensure_ascii=False)
