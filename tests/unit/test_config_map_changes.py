"""ConfigMap data diffed between reads: what an incident names when a mounted ConfigMap changed."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable

from tritonguard.core.change_text import HIDDEN
from tritonguard.core.config_info import config_map_sample
from tritonguard.core.config_map_changes import (
    MAX_LEAVES,
    MAX_TEXT_CHARS,
    ConfigMapChange,
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


# Triton's config.pbtxt with a Hugging Face token passed as a model parameter: the secret
# is on the line after the key names it.
PBTXT_WITH_TOKEN = (
    'name: "llm"\n'
    "max_batch_size: 8\n"
    "parameters {\n"
    '  key: "hf_token"\n'
    "  value: {\n"
    '    string_value: "hf_OLDSECRETvalue0123"\n'
    "  }\n"
    "}\n"
)
PEM_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC{0}\n"
    "q2b7x1Yv3kLmN0pQrStUvWxYz{0}AbCdEfGhIjKlMnOpQrStUvWxYz0123\n"
    "-----END PRIVATE KEY-----\n"
)


def _everything_shown(change: ConfigMapChange) -> str:
    """Return all the text a change reaches: summary (the log line), JSON, trace sample."""
    sample = config_map_sample("triton-0", change)
    return "\n".join(
        [change.summary(), json.dumps(change.as_dict(onset=change.at_latest)), repr(sample)]
    )


def test_a_pbtxt_parameter_secret_on_the_line_after_its_key_is_never_shown() -> None:
    """A ``key: "hf_token"`` parameter's ``string_value`` line is told changed, never shown."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"config.pbtxt": PBTXT_WITH_TOKEN}), 100.0)
    new = PBTXT_WITH_TOKEN.replace("OLDSECRET", "NEWSECRET").replace("8", "16")
    change = reads.read(_read("2", {"config.pbtxt": new}), 130.0)
    assert change is not None
    shown = _everything_shown(change)
    for secret in ("OLDSECRET", "NEWSECRET", "hf_OLD", "hf_NEW", "value0123"):
        assert secret not in shown
    assert [(c.path, c.old, c.new) for c in change.changes] == [
        ("config.pbtxt:2", "max_batch_size: 8", "max_batch_size: 16"),
        ("config.pbtxt:6", HIDDEN, HIDDEN),
    ]


def test_a_pbtxt_secret_added_on_the_lines_after_its_key_is_never_shown() -> None:
    """A token parameter added whole shows its key line, and the value lines only as hidden."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"config.pbtxt": CONFIG}), 100.0)
    change = reads.read(_read("2", {"config.pbtxt": CONFIG + PBTXT_WITH_TOKEN}), 130.0)
    assert change is not None
    assert "OLDSECRET" not in _everything_shown(change)
    assert any(c.new == '  key: "hf_token"'.strip() for c in change.changes)


def test_a_yaml_secret_on_the_line_after_its_name_is_never_shown() -> None:
    """``hf_token:`` with its value on the next, deeper line hides that line."""
    reads = ConfigMapReads()
    old = "model: llm\nhf_token:\n  hf_OLDSECRETvalue\nreplicas: 1\n"
    reads.read(_read("1", {"settings.yaml": old}), 100.0)
    change = reads.read(_read("2", {"settings.yaml": old.replace("OLD", "NEW")}), 130.0)
    assert change is not None
    assert "SECRET" not in _everything_shown(change)
    assert [(c.path, c.old, c.new) for c in change.changes] == [("settings.yaml:3", HIDDEN, HIDDEN)]


def test_a_pem_private_key_is_shown_by_size_only_whatever_its_key_is_called() -> None:
    """A PEM block under ``tls.key``, or under a plain name, is told changed by size only."""
    for key in ("tls.key", "server-bundle", "client.p12"):
        reads = ConfigMapReads()
        reads.read(_read("1", {key: PEM_KEY.format("OLDKEYBYTES")}), 100.0)
        change = reads.read(_read("2", {key: PEM_KEY.format("NEWKEYBYTES")}), 130.0)
        assert change is not None, key
        shown = _everything_shown(change)
        for secret in ("KEYBYTES", "MIIEvQ", "q2b7x1", "AbCdEf"):
            assert secret not in shown, (key, secret)
        assert (
            change.changes[0].new == f"{HIDDEN} ({len(PEM_KEY.format('NEWKEYBYTES'))} characters)"
        )


def _cpu(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def _baseline(text: str) -> float:
    """Return the CPU a linear pass over ``text`` takes: each line hashed on its own."""
    lines = text.splitlines()
    return min(
        _cpu(lambda: [hashlib.sha256(ln.encode()).digest() for ln in lines]) for _ in range(3)
    )


def _timed_change(old: str, new: str) -> tuple[float, ConfigMapChange | None]:
    """Return the CPU the read of ``new`` after ``old`` took, and the change it told."""
    reads = ConfigMapReads()
    reads.read(_read("1", {"config.pbtxt": old}), 100.0)
    out: list[ConfigMapChange | None] = []
    spent = _cpu(lambda: out.append(reads.read(_read("2", {"config.pbtxt": new}), 130.0)))
    return spent, out[0]


def _blocks(count: int, delay_of: Callable[[int], int]) -> str:
    return "".join(
        f'parameters {{\n  key: "d{i}"\n  value: {{ string_value: "{delay_of(i)}" }}\n}}\n'
        for i in range(count)
    )


def test_a_large_text_of_repeated_lines_is_diffed_in_linear_time_and_still_told() -> None:
    """Big texts of repeated lines diff in time linear in their size, and name what changed.

    64 KB of short repeated lines with 300 edited, and an 800-block config.pbtxt with 115
    edited blocks: each within a few hundred line hashings' CPU (aligning them took 12 s to
    minutes, on the event loop), and the changed lines still counted and the first named.
    """
    repeated_old = "}\n  dims: [ -1 ]\n" * 3500
    repeated_new = repeated_old.replace("}\n  dims: [ -1 ]\n", "}\n  dims: [ 8 ]\n", 300)
    pbtxt_old = _blocks(800, lambda i: 500)
    pbtxt_new = _blocks(800, lambda i: 900 if i % 7 == 0 else 500)
    cases = ((repeated_old, repeated_new, 300, 2), (pbtxt_old, pbtxt_new, 115, 3))
    for old, new, changed, first in cases:
        assert len(new) <= MAX_TEXT_CHARS and len(new.splitlines()) >= 2000
        spent, change = _timed_change(old, new)
        assert spent < 300 * _baseline(new) + 0.05
        assert change is not None
        # Each edited line is told as removed and as added: no alignment pairs them.
        assert len(change.changes) + change.untold == 2 * changed
        assert change.changes[0].path == f"config.pbtxt:{first}"
