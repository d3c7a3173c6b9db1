"""Saved baselines: the line format, what a damaged file keeps, and how long a carried one counts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tritonguard.core.baseline_records import MAX_LINE_CHARS, decode_line, encode
from tritonguard.core.baselines import Baseline, BaselineHistory
from tritonguard.core.features import FeatureSet
from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.baseline_keeper import read_baselines, write_baselines

KEY = ("prod", "ranker-0", "ranker")
BASE = Baseline({"mean_latency_us": 1200.0, "queue_share": 0.1}, 120.0, 60, {"queue_share": 0.02})


def _line(**changes: object) -> str:
    obj = json.loads(next(encode([(KEY, 1000.0, BASE)])))
    obj.update(changes)
    return json.dumps(obj)


def test_a_saved_baseline_comes_back_as_carried_with_every_value() -> None:
    """Encode then decode gives the same subject, time, medians and spreads, marked carried."""
    [line] = list(encode([(KEY, 1000.0, BASE)]))
    key, saved_at, base = decode_line(line)
    assert (key, saved_at) == (KEY, 1000.0)
    assert base.values == BASE.values and base.spreads == BASE.spreads
    assert (base.span_s, base.snapshots, base.source) == (120.0, 60, "carried")


def test_a_value_json_cannot_hold_is_left_out_not_a_failed_save(tmp_path: Path) -> None:
    """A gauge exposed as +Inf can reach a median: saving drops it and keeps the rest."""
    odd = Baseline({"mean_latency_us": float("inf"), "queue_share": 0.1}, 120.0, 60, {})
    only_odd = Baseline({"mean_latency_us": float("nan")}, 120.0, 60, {})
    path = tmp_path / "b.jsonl.gz"
    write_baselines(path, [(KEY, 1000.0, odd), (("prod", "other", "m"), 1000.0, only_odd)])
    taken, problems = read_baselines(path, 1000.0, 600.0)
    assert problems == []
    assert [(k, b.values) for k, _, b in taken] == [(KEY, {"queue_share": 0.1})]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (_line(format=2), "format 2"),
        (_line(values={"mean_latency_us": "fast"}), "values.mean_latency_us is 'fast'"),
        (_line(values={"mean_latency_us": 1e400}), "not a finite number"),
        (_line(saved_at=None), "saved_at is None"),
        (_line(snapshots=0), "snapshots is 0"),
        (_line(pod=7), "pod is 7"),
        (_line(values={"from_a_newer_version": 1.0}), "no baseline feature this version knows"),
        ("x" * (MAX_LINE_CHARS + 1), "over"),
    ],
)
def test_a_bad_line_is_refused_with_its_reason(line: str, reason: str) -> None:
    """Each way a line can be wrong is refused by name; it never becomes a reference."""
    with pytest.raises(ValueError, match=reason):
        decode_line(line)


def test_refused_lines_are_numbered_and_the_others_still_count(tmp_path: Path) -> None:
    """A bad line among good ones is reported with its line number; the good ones are taken."""
    path = tmp_path / "b.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join([_line(), "{", "", _line(pod="ranker-1")]) + "\n")
    taken, problems = read_baselines(path, 1000.0, 600.0)
    assert [k for k, _, _ in taken] == [KEY, ("prod", "ranker-1", "ranker")]
    assert len(problems) == 1 and problems[0].startswith(f"{path}:2: not JSON")


def test_a_feature_this_version_does_not_know_is_dropped() -> None:
    """A file from another version keeps the features both know, and drops the rest."""
    line = _line(values={"queue_share": 0.2, "gone_feature": 3.0})
    _, _, base = decode_line(line)
    assert base.values == {"queue_share": 0.2}


def test_a_truncated_file_keeps_the_subjects_before_the_damage(tmp_path: Path) -> None:
    """A crash mid-copy cuts the gzip stream: the lines before it count, the read says where."""
    path = tmp_path / "b.jsonl.gz"
    rows = [(("prod", f"ranker-{i}", "ranker"), 1000.0, BASE) for i in range(2000)]
    write_baselines(path, rows)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    taken, problems = read_baselines(path, 1000.0, 600.0)
    assert 0 < len(taken) < 2000
    assert len(problems) == 1 and str(path) in problems[0] and "unreadable" in problems[0]


def test_an_over_long_line_is_skipped_without_losing_the_next(tmp_path: Path) -> None:
    """A line longer than any baseline is skipped by number; the line after it is read."""
    path = tmp_path / "b.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("y" * (3 * MAX_LINE_CHARS) + "\n")
        f.write(_line() + "\n")
    taken, problems = read_baselines(path, 1000.0, 600.0)
    assert [k for k, _, _ in taken] == [KEY]
    assert problems == [f"{path}:1: line over {MAX_LINE_CHARS} characters"]


def test_one_endless_line_is_read_no_further_than_the_file_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping an over-long line still counts it against the cap: the read stops there."""
    monkeypatch.setattr("tritonguard.runtime.baseline_keeper.MAX_FILE_BYTES", 10 * MAX_LINE_CHARS)
    path = tmp_path / "b.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("z" * (50 * MAX_LINE_CHARS) + "\n" + _line() + "\n")
    taken, problems = read_baselines(path, 1000.0, 600.0)
    assert taken == []
    assert [p.split(": ", 1)[1].split(" ")[0] for p in problems] == ["line", "over"]


def test_baselines_older_than_the_lookback_are_not_taken(tmp_path: Path) -> None:
    """A file saved longer ago than baseline_lookback_s describes a forgotten period: unused."""
    path = tmp_path / "b.jsonl.gz"
    write_baselines(path, [(KEY, 1000.0, BASE)])
    assert read_baselines(path, 1000.0 + 601.0, 600.0) == ([], [])
    assert read_baselines(path, 1000.0 + 599.0, 600.0)[0] != []
    assert read_baselines(tmp_path / "missing.jsonl.gz", 1000.0, 600.0) == ([], [])


def test_a_carried_baseline_expires_and_keeps_the_time_it_was_saved() -> None:
    """Carried, a baseline is the reference until lookback after saving; re-saving keeps its age.

    A chain of restarts each saving what it carried must not make an old reference look new.
    """
    history = BaselineHistory(Thresholds(baseline_lookback_s=600.0))
    history.carry(KEY, 1000.0, BASE)
    got = history.carried(KEY, 1500.0)
    assert got is not None and got.source == "carried"
    assert [(k, at) for k, at, _ in history.export(1500.0, None)] == [(KEY, 1000.0)]
    assert history.carried(KEY, 1601.0) is None
    assert history.export(1601.0, None) == []
    assert history.approx_bytes == 0


def test_carried_baselines_stay_within_the_memory_bound() -> None:
    """Past the baselines' share of the budget a saved baseline is not taken: it is learnt again."""
    history = BaselineHistory(Thresholds(), max_bytes=3 * 4096)
    taken = [history.carry(("prod", f"p{i}", "m"), 1000.0, BASE) for i in range(5)]
    assert taken == [True, True, True, False, False]
    assert history.approx_bytes <= 3 * 4096


def test_a_carried_baseline_goes_once_the_subject_has_its_own_again() -> None:
    """Own history back, the saved reference is dropped and its memory returns to the budget."""
    history = BaselineHistory(Thresholds(baseline_min_span_s=10.0, baseline_gap_windows=0.0))
    history.carry(KEY, 1000.0, BASE)
    assert history.approx_bytes > 0
    features = FeatureSet(window_s=5.0, interval_s=5.0, fresh=True, mean_latency_us=1000.0)
    for i in range(5):
        history.remember(KEY, 1010.0 + 5 * i, features, healthy=True)
    own = history.baseline(KEY, 1030.0, 5.0, 5.0, 1005.0)
    assert own is not None and own.source == "own"
    assert history.carried(KEY, 1030.0) is None
    assert [at for _, at, _ in history.export(1030.0, 1005.0)] == [1030.0]
