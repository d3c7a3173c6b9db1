"""Which handed-over undos restore on resolve: carried on the Lease, readable both ways."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.handed_rows import UNDOS, handed_approval, handed_intent, handed_verification
from tritonguard.core.run_handover import (
    decode_approvals,
    decode_verifications,
    encode_verifications,
)

CHECK = handed_verification(undos=UNDOS, on_resolve=frozenset({1}))
INTENT = handed_intent(undos=UNDOS, on_resolve=frozenset({0, 1}))
APPROVAL = handed_approval(undos=UNDOS, on_resolve=frozenset({1}))


def test_each_kind_carries_which_undos_restore_on_resolve() -> None:
    """Verifications, changes in flight and approvals come back with their on_resolve set."""
    text, left_out = encode_verifications([CHECK, INTENT, APPROVAL])
    assert left_out == 0
    assert decode_verifications(text) == [CHECK, INTENT]
    assert decode_approvals(text) == [APPROVAL]


def test_an_annotation_from_before_the_flag_reads_as_no_restore_on_resolve() -> None:
    """A row without ``on_resolve`` (an older leader's) still decodes: nothing restores on resolve.

    The pairs keep their two-element shape, so an older follower reads a newer leader's rows
    too; a row with no restore on resolve writes no ``on_resolve`` at all.
    """
    plain = dataclasses.replace(CHECK, on_resolve=frozenset())
    text, _ = encode_verifications([plain])
    [row] = json.loads(text)["verifications"]
    assert "on_resolve" not in row
    assert all(len(pair) == 2 for pair in row["undos"])
    assert decode_verifications(text) == [plain]


def test_an_on_resolve_index_past_the_undos_is_refused() -> None:
    """An index naming no undo is a malformed row, refused with the reason, never guessed."""
    text, _ = encode_verifications([CHECK])
    doc = json.loads(text)
    doc["verifications"][0]["on_resolve"] = [5]
    with pytest.raises(ValueError, match=r"verification 0 is malformed .*on_resolve \[5\]"):
        decode_verifications(json.dumps(doc))


def test_the_raise_a_run_relied_on_travels_with_its_verification_and_intent() -> None:
    """``leaning_on`` comes back on both kinds; a row without it (an older leader's) has none."""
    leaning = [dataclasses.replace(item, leaning_on="inc-raise") for item in (CHECK, INTENT)]
    text, _ = encode_verifications(leaning)
    assert decode_verifications(text) == leaning
    plain, _ = encode_verifications([CHECK, INTENT])
    doc = json.loads(plain)
    assert "leaning_on" not in doc["verifications"][0]
    assert "leaning_on" not in doc["intents"][0]
    assert [h.leaning_on for h in decode_verifications(plain)] == ["", ""]


def test_the_raise_a_run_relied_on_travels_with_its_approval() -> None:
    """An approval comes back with ``leaning_on``; without it the row has no such key."""
    leaning = dataclasses.replace(APPROVAL, leaning_on="inc-raise")
    text, _ = encode_verifications([leaning])
    assert decode_approvals(text) == [leaning]
    plain, _ = encode_verifications([APPROVAL])
    assert "leaning_on" not in json.loads(plain)["approvals"][0]
