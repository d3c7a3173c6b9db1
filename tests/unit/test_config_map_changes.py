"""ConfigMap data diffed between reads: what an incident names when a mounted ConfigMap changed."""

from __future__ import annotations

import base64

from tritonguard.core.config_map_changes import (
    MAX_LEAVES,
    MAX_TEXT_CHARS,
    ConfigMapData,
    ConfigMapReads,
    ConfigMapTimeline,
)

CONFIG = (
    'name: "ranker"\n'
    "max_batch_size: 8\n"
    "dynamic_batching {\n"
    "  max_queue_delay_microseconds: 500\n"
    "}\n"
)


def _read(
    version: str, data: dict[str, str], binary: dict[str, str] | None = None
) -> ConfigMapData:
    return ConfigMapData("ml", "models-config", version, data, binary or {})


def test_the_first_read_is_remembered_and_a_changed_line_is_named_with_its_number() -> None:
    """A config.pbtxt edit reads as ``config.pbtxt:4: old line → new line``, timed by both reads."""
    reads = ConfigMapReads()
    assert reads.read(_read("10", {"config.pbtxt": CONFIG}), 100.0) is None
    new = CONFIG.replace("500", "150000")
    change = reads.read(_read("11", {"config.pbtxt": new}), 130.0)
    assert change is not None
    assert change.keys == ("config.pbtxt",)
    assert [(c.path, c.old, c.new) for c in change.changes] == [
        (
            "config.pbtxt:4",
            "max_queue_delay_microseconds: 500",
            "max_queue_delay_microseconds: 150000",
        )
    ]
    assert (change.at_earliest, change.at_latest) == (100.0, 130.0)
    assert (change.previous_version, change.resource_version) == ("10", "11")
    assert (
        change.timing(170.0) == "ConfigMap models-config key config.pbtxt changed 40 s before onset"
    )
    assert change.summary().startswith("ConfigMap models-config key config.pbtxt changed (")
    out = change.as_dict(onset=170.0)
    assert out["seen_before_onset_s"] == 40.0 and out["keys"] == ["config.pbtxt"]


def test_a_watch_in_sync_narrows_when_the_change_can_have_happened() -> None:
    """With the old data known to hold until the event, the change is not dated back to the read."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"k": "a"}), 100.0)
    change = reads.read(_read("2", {"k": "b"}), 500.0, unchanged_until=499.5)
    assert change is not None and (change.at_earliest, change.at_latest) == (499.5, 500.0)


def test_same_version_or_same_data_is_no_change() -> None:
    """A relist repeating the version, or a label edit that left the data, names nothing."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"k": "a"}), 0.0)
    assert reads.read(_read("1", {"k": "a"}), 10.0) is None
    assert reads.read(_read("2", {"k": "a"}), 20.0) is None
    change = reads.read(_read("3", {"k": "b"}), 30.0)
    assert change is not None and change.previous_version == "2"


def test_keys_added_and_removed_are_changes_with_an_absent_side() -> None:
    """A new key reads ``(none) → value``; a removed one ``value → (none)``."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"old": "x"}), 0.0)
    change = reads.read(_read("2", {"new": "y"}), 1.0)
    assert change is not None
    assert {c.path: (c.old, c.new) for c in change.changes} == {
        "new": (None, "y"),
        "old": ("x", None),
    }
    assert "new: (none) → y" in change.diff_text()


def test_secret_looking_keys_and_lines_are_shown_as_changed_never_as_themselves() -> None:
    """An ``auth_token`` key and a ``password:`` line change visibly; their values never show."""
    reads = ConfigMapReads()
    reads.read(
        _read("1", {"auth_token": "s3cr3t-one", "app.yaml": "user: a\npassword: hunter2\n"}), 0
    )
    change = reads.read(
        _read("2", {"auth_token": "s3cr3t-two!", "app.yaml": "user: a\npassword: hunter3\n"}), 1
    )
    assert change is not None
    text = repr(change.as_dict())
    for secret in ("s3cr3t", "hunter2", "hunter3"):
        assert secret not in text
    shown = {c.path: (c.old, c.new) for c in change.changes}
    assert shown["auth_token"] == ("*** (10 characters)", "*** (11 characters)")
    assert shown["app.yaml:2"] == ("password: ***", "password: ***")


def test_large_and_binary_values_are_summarised_by_size_and_digest_never_dumped() -> None:
    """A value over the text bound and a binaryData key show as size and digest only."""
    reads = ConfigMapReads()
    big = "w\n" * (MAX_TEXT_CHARS // 2 + 1)
    blob = base64.b64encode(b"\x00\x01weights").decode()
    reads.read(_read("1", {"vocab.txt": big}, {"model.plan": blob}), 0.0)
    other = base64.b64encode(b"\x00\x02weights").decode()
    change = reads.read(_read("2", {"vocab.txt": big + "z"}, {"model.plan": other}), 1.0)
    assert change is not None
    shown = {c.path: (c.old, c.new) for c in change.changes}
    assert set(shown) == {"model.plan", "vocab.txt"}
    old_plan, new_plan = shown["model.plan"]
    assert old_plan is not None and old_plan.startswith("(binary, 9 bytes, sha256 ")
    assert old_plan != new_plan
    old_vocab, new_vocab = shown["vocab.txt"]
    assert old_vocab is not None and new_vocab is not None
    assert old_vocab.startswith(f"({len(big)} characters, sha256 ") and "w\nw" not in new_vocab


def test_many_changed_lines_are_kept_up_to_a_bound_and_the_rest_counted() -> None:
    """A rewritten file keeps its first changed lines; the summary counts every one."""
    reads = ConfigMapReads()
    before = "".join(f"line {i}\n" for i in range(100))
    reads.read(_read("1", {"labels.txt": before}), 0.0)
    change = reads.read(_read("2", {"labels.txt": before.replace("line", "row")}), 1.0)
    assert change is not None
    assert len(change.changes) == MAX_LEAVES and change.untold == 100 - MAX_LEAVES
    assert change.diff_text().endswith("; and 97 more")


def test_a_pods_incident_follows_the_newest_change_within_the_lookback() -> None:
    """The timeline gives the newest change before onset, none older than the lookback."""
    reads, timeline = ConfigMapReads(), ConfigMapTimeline()
    reads.read(_read("1", {"k": "a"}), 0.0)
    first = reads.read(_read("2", {"k": "b"}), 100.0)
    second = reads.read(_read("3", {"k": "c"}), 200.0, unchanged_until=199.0)
    assert first is not None and second is not None
    assert timeline.note("ml", "triton-0", first) and timeline.note("ml", "triton-0", second)
    assert not timeline.note("ml", "triton-0", second)
    assert timeline.preceding("ml", "triton-0", 210.0, 600.0) == second
    assert timeline.preceding("ml", "triton-0", 150.0, 600.0) == first
    assert timeline.preceding("ml", "triton-0", 2000.0, 600.0) is None
    assert timeline.preceding("ml", "triton-1", 210.0, 600.0) is None


def test_the_reads_held_are_bounded_by_count_and_size_the_oldest_going_first() -> None:
    """Past either bound the oldest ConfigMap's read goes; its next read is only remembered."""
    reads = ConfigMapReads(max_maps=2, max_chars=10_000)
    for i in range(3):
        reads.read(ConfigMapData("ml", f"cm-{i}", "1", {"k": "v"}), float(i))
    assert len(reads) == 2 and not reads.known("ml", "cm-0") and reads.known("ml", "cm-2")
    reads.read(ConfigMapData("ml", "big", "1", {"k": "x" * 9_000}), 5.0)
    assert [reads.known("ml", n) for n in ("cm-1", "cm-2", "big")] == [False, True, True]
    reads.read(ConfigMapData("ml", "bigger", "1", {"k": "y" * 9_500}), 6.0)
    assert [reads.known("ml", n) for n in ("cm-2", "big", "bigger")] == [False, False, True]
    assert reads.read(ConfigMapData("ml", "big", "2", {"k": "z"}), 7.0) is None
