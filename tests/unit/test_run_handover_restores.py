"""Which handed-over undos restore on resolve: carried on the Lease, readable both ways."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tritonguard.core.run_handover import (
    HandedApproval,
    HandedIntent,
    HandedVerification,
    decode_approvals,
    decode_verifications,
    encode_verifications,
)

UNDOS = (
    ("kubernetes.scale", {"name": "triton", "replicas": 2}),
    ("kubernetes.scaledobject_min", {"name": "triton-so", "min_replica_count": 2}),
)
CHECK = HandedVerification(
    incident_id="inc-1",
    playbook="scale",
    cause="cpu_bottleneck",
    namespace="prod",
    model="resnet",
    pod="triton-0",
    opened_at=4000.0,
    checks=({"feature": "queue_share", "below": 0.5},),
    wait_s=60.0,
    started_at=4100.0,
    undos=UNDOS,
    on_resolve=frozenset({1}),
)
INTENT = HandedIntent(
    incident_id="inc-1",
    playbook="scale",
    cause="cpu_bottleneck",
    namespace="prod",
    model="resnet",
    pod="triton-0",
    opened_at=4000.0,
    action="triton.update_config",
    started_at=4200.0,
    undo=("triton.load", {"model": "resnet"}),
    undos=UNDOS,
    on_resolve=frozenset({0, 1}),
)
APPROVAL = HandedApproval(
    approval_id="apr-1",
    incident_id="inc-1",
    playbook="scale",
    cause="cpu_bottleneck",
    namespace="prod",
    model="resnet",
    pod="triton-0",
    opened_at=4000.0,
    step_index=2,
    action="kubernetes.scale",
    params={"add": 1},
    approvers=("S0ONCALL01",),
    requested_at=4300.0,
    expires_at=5200.0,
    undos=UNDOS,
    on_resolve=frozenset({1}),
)


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
