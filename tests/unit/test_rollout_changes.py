"""Rollouts: a workload revision's pod-template diff, and how incidents name it with the config."""

from __future__ import annotations

from typing import Any

from tritonguard.core.cluster_events import note_for_incident
from tritonguard.core.config_changes import ConfigChange
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.rollout_changes import (
    Revision,
    RolloutChange,
    RolloutTimeline,
    rollout_of,
    template_diff,
)


def template(image: str, env: dict[str, Any], args: list[str] | None = None) -> dict[str, Any]:
    """Return a pod template with one container ``triton``."""
    c: dict[str, Any] = {
        "name": "triton",
        "image": image,
        "env": [
            {"name": k, "value": v} if isinstance(v, str) else {"name": k, "valueFrom": v}
            for k, v in env.items()
        ],
    }
    if args is not None:
        c["args"] = args
    return {"metadata": {"labels": {"app": "triton"}}, "spec": {"containers": [c]}}


def revision(number: int, tmpl: dict[str, Any], at: float | None = 1000.0) -> Revision:
    """Return revision ``number`` of Deployment ``triton-a``."""
    return Revision("Deployment", "triton-a", f"triton-a-{number}", number, at, tmpl)


def test_the_diff_names_image_args_and_env_per_container_and_never_a_secret_value() -> None:
    """Image, args and env differ leaf by leaf; a Secret-sourced env shows where it comes from."""
    before = template("triton:24.08", {"LOG": "0", "KEY": "x"}, ["--model-control-mode=poll"])
    after = template(
        "triton:24.09",
        {"LOG": "1", "KEY": {"secretKeyRef": {"name": "tok", "key": "t"}}},
        ["--model-control-mode=explicit"],
    )
    changes = {c.path: (c.old, c.new) for c in template_diff(before, after)}
    assert changes == {
        "containers[triton].image": ("triton:24.08", "triton:24.09"),
        "containers[triton].args": (
            ["--model-control-mode=poll"],
            ["--model-control-mode=explicit"],
        ),
        "containers[triton].env.KEY": ("x", "(secretKeyRef tok key t)"),
        "containers[triton].env.LOG": ("0", "1"),
    }
    assert template_diff(before, before) == []


def test_a_rollout_is_diffed_against_the_highest_earlier_revision() -> None:
    """Revision 7 is compared with 6, not 5, and begins when its ReplicaSet was made."""
    revisions = [
        revision(5, template("t:5", {})),
        revision(6, template("t:6", {})),
        revision(7, template("t:7", {}), at=1500.0),
    ]
    rollout = rollout_of("ml", revisions[2], revisions, seen_at=1520.0)
    assert (rollout.revision, rollout.previous, rollout.at) == (7, 6, 1500.0)
    assert rollout.diff_text() == "containers[triton].image: t:6 → t:7"
    first = rollout_of("ml", revisions[0], revisions[:1], seen_at=900.0)
    assert first.previous is None and first.at == 900.0  # made "later" than seen: seen wins
    assert first.diff_text() == "no earlier revision kept to compare with"


def test_the_timeline_names_a_pods_rollout_only_within_the_lookback_before_onset() -> None:
    """A rollout after the onset, or older than the lookback, is not what the incident followed."""
    timeline = RolloutTimeline(max_pods=2)
    r = RolloutChange("ml", "Deployment", "triton-a", 7, "triton-a-7", at=1000.0, seen_at=1001.0)
    assert timeline.note("ml", "p1", r) and not timeline.note("ml", "p1", r)
    assert timeline.preceding("ml", "p1", 1040.0, 600.0) == r
    assert timeline.preceding("ml", "p1", 990.0, 600.0) is None
    assert timeline.preceding("ml", "p1", 1700.0, 600.0) is None
    timeline.note("ml", "p2", r)
    timeline.note("ml", "p3", r)
    assert len(timeline) == 2 and timeline.preceding("ml", "p1", 1040.0, 600.0) is None


def incident(change: ConfigChange | None, opened_at: float = 1040.0) -> IncidentEvent:
    """Return an opened batching_delay incident on pod ``triton-a-7-x`` with ``change``."""
    return IncidentEvent(
        event="opened",
        incident_id="inc-1",
        cause="batching_delay",
        subject=Subject("ml", "ranker", "triton-a-7-x"),
        at=opened_at,
        confidence=0.9,
        summary="requests wait out the batcher's delay",
        evidence={},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=opened_at,
        change=change,
    )


ROLLOUT = rollout_of(
    "ml",
    revision(7, template("triton:24.09", {}), at=1000.0),
    [revision(6, template("triton:24.08", {})), revision(7, template("triton:24.09", {}))],
    seen_at=1002.0,
)


def test_the_engine_names_the_rollout_with_the_config_diff_and_alone_without_one() -> None:
    """An incident on a rollout's pod names the rollout beside the config change, or by itself."""
    engine = Engine()
    subject = Subject("ml", "ranker", "triton-a-7-x")
    assert engine.note_rollout("ml", "triton-a-7-x", ROLLOUT)
    alone = engine.change_before(subject, 1040.0)
    assert alone is not None and alone.rollout == ROLLOUT and alone.changes == ()
    assert alone.summary() == (
        "rollout of Deployment triton-a revision 7 "
        "(containers[triton].image: triton:24.08 → triton:24.09)"
    )
    assert alone.as_dict(onset=1040.0)["kind"] == "rollout"
    delay = {"dynamic_batching": {"max_queue_delay_microseconds": 500}}
    engine.note_model_config(subject, delay, at=990.0)
    raised = {"dynamic_batching": {"max_queue_delay_microseconds": 150000}}
    engine.note_model_config(subject, raised, at=1010.0)
    both = engine.change_before(subject, 1040.0)
    assert both is not None and both.rollout == ROLLOUT
    out = both.as_dict(onset=1040.0)
    assert out["kind"] == "model_config"
    assert out["summary"] == "dynamic_batching.max_queue_delay_microseconds: 500 → 150000"
    assert out["rollout"]["revision"] == 7 and out["rollout"]["before_onset_s"] == 40.0
    assert engine.change_before(Subject("ml", "ranker", "other-pod"), 1040.0) is None


def raised_delay_incident() -> IncidentEvent:
    """Return an incident on the rollout's pod after its config's delay went 500 → 150000."""
    engine = Engine()
    subject = Subject("ml", "ranker", "triton-a-7-x")
    engine.note_rollout("ml", "triton-a-7-x", ROLLOUT)
    engine.note_model_config(
        subject, {"dynamic_batching": {"max_queue_delay_microseconds": 500}}, at=990.0
    )
    engine.note_model_config(
        subject, {"dynamic_batching": {"max_queue_delay_microseconds": 150000}}, at=1010.0
    )
    return incident(engine.change_before(subject, 1040.0))


def test_the_event_says_what_rolled_out_when_and_the_config_diff() -> None:
    """The Kubernetes Event names the config diff, the revision, its lead time and its diff."""
    note = note_for_incident(raised_delay_incident())
    assert note is not None
    assert (
        "After: dynamic_batching.max_queue_delay_microseconds: 500 → 150000, rolled out 40 s "
        "before onset by Deployment triton-a revision 7. Rollout: containers[triton].image: "
        "triton:24.08 → triton:24.09." in note.note
    )
    alone_note = note_for_incident(incident(ConfigChange.of_rollout("ranker", ROLLOUT)))
    assert alone_note is not None
    assert "After: rolled out 40 s before onset by Deployment triton-a revision 7" in (
        alone_note.note
    )


def test_a_rollouts_new_pod_is_compared_with_its_peers_config_at_its_first_read() -> None:
    """Discovery saying a pod is a new revision's makes its first read a diff against peers.

    Its counters need not show a birth (a Triton that served before the first scrape): the
    rollout does. A pod of a first revision (nothing to roll from) is not compared.
    """
    engine = Engine()
    old = {"dynamic_batching": {"max_queue_delay_microseconds": 500}}
    engine.note_model_config(Subject("ml", "ranker", "triton-b-0"), old, at=1000.0)
    engine.note_rollout("ml", "triton-a-7-x", ROLLOUT)
    raised = {"dynamic_batching": {"max_queue_delay_microseconds": 150000}}
    change = engine.note_model_config(Subject("ml", "ranker", "triton-a-7-x"), raised, at=1010.0)
    assert change is not None and change.against.startswith("pod triton-b-0")
    first = rollout_of("ml", revision(1, template("t:1", {})), [], seen_at=1000.0)
    engine.note_rollout("ml", "triton-c-1-x", first)
    assert engine.note_model_config(Subject("ml", "ranker", "triton-c-1-x"), raised, 1010.0) is None


def test_secrets_in_args_and_env_are_shown_as_changed_never_as_themselves() -> None:
    """A rollout diff goes to logs, Slack and Events: tokens in args and env stay hidden.

    Triton's restricted-API key rides in an argument, a bearer token in a flag's next word,
    an API key in a literal env value; a URL's userinfo is stripped. The change still shows.
    """
    before = template(
        "triton:24.08",
        {"API_KEY": "old-key", "OMP_NUM_THREADS": "4"},
        ["--http-restricted-api=model-repository:triton-access-token=old", "--token", "t1"],
    )
    after = template(
        "triton:24.08",
        {"API_KEY": "new-key", "OMP_NUM_THREADS": "1"},
        [
            "--http-restricted-api=model-repository:triton-access-token=new",
            "--token",
            "t2",
            "--repo=http://user:pw@store/models",
        ],
    )
    changes = {c.path: (c.old, c.new) for c in template_diff(before, after)}
    shown = repr(changes)
    for secret in ("old-key", "new-key", "=old", "=new", "t1", "t2", "user:pw"):
        assert secret not in shown, secret
    assert changes["containers[triton].env.OMP_NUM_THREADS"] == ("4", "1")
    assert "containers[triton].env.API_KEY" in changes
    assert changes["containers[triton].args"][1] == [
        "--http-restricted-api=model-repository:triton-access-token=***",
        "--token",
        "***",
        "--repo=http://store/models",
    ]
