"""The run history a leading replica publishes for the next leader: encoding and validation."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from tests.handed_rows import handed_approval
from tritonguard.core.guards import RunRecord
from tritonguard.core.run_handover import (
    MAX_RUNS,
    MAX_VERIFICATIONS_BYTES,
    WINDOW_S,
    HandedApproval,
    decode_approvals,
    decode_runs,
    decode_verifications,
    encode_runs,
    encode_verifications,
)

NOW = 100_000.0


def run(at: float, *, dry: bool = False, playbook: str = "p") -> RunRecord:
    """Return a run on one subject at ``at``."""
    return RunRecord(playbook, "prod/triton-0/resnet", "prod/resnet", at, dry, True)


def test_real_runs_of_the_last_day_round_trip() -> None:
    """Real runs come back as they were; dry-run plans and runs older than a day are left out."""
    runs = [run(NOW - 10), run(NOW - 5, dry=True), run(NOW - WINDOW_S - 1), run(NOW - 3600.25)]
    assert decode_runs(encode_runs(runs, NOW)) == [run(NOW - 3600.25), run(NOW - 10)]


def test_only_the_newest_runs_are_kept_so_the_annotation_stays_small() -> None:
    """Past MAX_RUNS the oldest go first; the text stays far below Kubernetes' 256 KiB limit."""
    runs = [run(NOW - i, playbook=f"playbook-with-a-long-name-{i}") for i in range(MAX_RUNS * 2)]
    text = encode_runs(runs, NOW)
    back = decode_runs(text)
    assert len(back) == MAX_RUNS
    assert min(r.at for r in back) == NOW - (MAX_RUNS - 1)
    assert len(text.encode()) < 64 * 1024


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"v": 2, "runs": []}), "v=1"),
        (json.dumps({"v": 1, "runs": {}}), "'runs' must be a list"),
        (json.dumps({"v": 1, "runs": [["p", "s", "m", "yesterday", 0]]}), "run 0 must be"),
        (json.dumps({"v": 1, "runs": [["p", "s", "m", 1.0, 0], ["p"]]}), "run 1 must be"),
    ],
)
def test_a_malformed_annotation_is_refused_with_the_reason(text: str, says: str) -> None:
    """Another replica's history is never guessed at: a bad annotation raises, naming what."""
    with pytest.raises(ValueError, match=says):
        decode_runs(text)


def approval(thread: dict[str, Any] | None = None, at: float = NOW) -> HandedApproval:
    """Return a scale waiting for approval, with the undo of the step before it."""
    return handed_approval(
        approval_id="apr-0123456789abcdef",
        opened_at=at - 60,
        step_index=1,
        params={"name": "triton", "add": 1},
        requested_at=at,
        expires_at=at + 900,
        undos=(("kubernetes.scale", {"name": "triton", "replicas": 2}),),
        thread=thread,
    )


def test_approvals_round_trip_with_their_thread() -> None:
    """A waiting approval comes back whole beside the verifications, its thread included."""
    thread = {"channel": "C0ALERTS01", "root_ts": "1.000001", "seq": 4, "root": {"text": "t"}}
    text, left_out = encode_verifications([approval(thread)])
    assert left_out == 0
    assert decode_approvals(text) == [approval(thread)]
    assert decode_verifications(text) == []


def test_an_approval_whose_thread_does_not_fit_goes_without_it() -> None:
    """Past the byte cap an approval's thread is dropped first: the approval is still handed."""
    big = {"channel": "C0ALERTS01", "root": {"text": "x" * MAX_VERIFICATIONS_BYTES}}
    text, left_out = encode_verifications([approval(big)])
    assert left_out == 0
    assert decode_approvals(text) == [approval(None)]


def test_runs_that_changed_nothing_are_named_beside_the_rows() -> None:
    """A covered run comes back covered; an older reader sees five-field rows, all changes."""
    covered = dataclasses.replace(run(NOW - 5), covered_by="inc-raise")
    text = encode_runs([run(NOW - 10), covered], NOW)
    assert decode_runs(text) == [run(NOW - 10), covered]
    doc = json.loads(text)
    assert doc["covered"] == [[1, "inc-raise"]]
    assert all(len(row) == 5 for row in doc["runs"])
    assert "covered" not in json.loads(encode_runs([run(NOW - 10)], NOW))


def test_the_hours_changes_survive_a_fleet_groups_covered_runs() -> None:
    """Past MAX_RUNS, runs that changed something are kept before covered ones.

    An hour's budget of changes, then a large fleet group's covered runs (which use no
    budget, so nothing limits how many there are): the next leader still sees every change,
    so it cannot make the hour's changes again.
    """
    changes = [run(NOW - 3000 + i) for i in range(20)]
    covered = [
        dataclasses.replace(run(NOW - 1800 + i), covered_by="inc-raise")
        for i in range(MAX_RUNS + 30)
    ]
    back = decode_runs(encode_runs([*changes, *covered], NOW))
    assert len(back) == MAX_RUNS
    assert [r for r in back if not r.covered_by] == changes
    assert [r.at for r in back] == sorted(r.at for r in back)
    assert min(r.at for r in back if r.covered_by) == NOW - 1800 + 30 + 20


@pytest.mark.parametrize(
    "covered",
    [{}, [[3, "inc-raise"]], [[0, ""]], [["0", "inc-raise"]], [[0]]],
)
def test_a_malformed_covered_list_is_refused(covered: object) -> None:
    """A covered mark naming no run, or no incident, is refused: never guessed at."""
    doc = {"v": 1, "runs": [["p", "s", "m", 1.0, 0]], "covered": covered}
    with pytest.raises(ValueError, match="covered"):
        decode_runs(json.dumps(doc))
