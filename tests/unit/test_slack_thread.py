"""The thread planner and routing, pure: which Slack calls each incident change makes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import ValidationError

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.slack_message import ApprovalView
from tritonguard.core.slack_routing import RouteMatch, SlackRoute, route
from tritonguard.core.slack_thread import ThreadPlanner, ThreadSettings
from tritonguard.settings import SettingsError, load_settings


def incident(event: str = "opened", at: float = 100.0, iid: str = "inc-1") -> IncidentEvent:
    """Return an incident of batching_delay on search/ranker."""
    return IncidentEvent(
        event=event,  # type: ignore[arg-type]
        incident_id=iid,
        cause="batching_delay",
        subject=Subject("search", "ranker", "ranker-0"),
        at=at,
        confidence=0.8,
        summary="Requests wait in the batcher.",
        evidence={},
        fix=Fix("Lower the delay."),
        opened_at=100.0,
    )


def rec(action: str, status: str = "ran", **kw: object) -> ActionRecord:
    """Return a record of the incident's playbook."""
    base: dict[str, object] = dict(
        at=110.0,
        incident_id="inc-1",
        event="opened",
        playbook="pb",
        subject="search/ranker-0/ranker",
        action=action,
        params={},
        dry_run=False,
        status=status,
    )
    base.update(kw)
    return ActionRecord(**base)  # type: ignore[arg-type]


def test_no_thread_until_a_playbook_posts_then_root_then_replies() -> None:
    """An incident alone posts nothing; the first slack.post opens the thread; steps reply."""
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    assert planner.on_event(incident()) == []
    assert planner.on_record(rec("triton.update_config")) == []
    opened = planner.on_record(rec("slack.post", params={"text": "Lowering the delay."}))
    assert [o.kind for o in opened] == ["post_root"]
    root = opened[0].message
    assert root is not None and "`triton.update_config`" in str(root.blocks)
    assert "Lowering the delay." in str(root.blocks)
    assert [o.kind for o in planner.on_record(rec("verify"))] == ["reply", "update_root"]
    assert [o.kind for o in planner.on_record(rec("slack.post"))] == ["reply"]
    done = planner.on_event(incident("resolved", at=400.0))
    assert [o.kind for o in done] == ["reply", "update_root"]
    assert done[-1].metadata["state"] == "resolved"
    assert planner.threads() == []


def test_keys_are_unique_and_stable_per_message() -> None:
    """Every call has its own key; the same story planned twice yields the same keys."""

    def keys() -> list[str]:
        p = ThreadPlanner()
        p.on_event(incident())
        out = p.on_record(rec("slack.post")) + p.on_record(rec("verify"))
        out += p.on_event(incident("resolved", at=300.0))
        return [o.key for o in out]

    first = keys()
    assert len(set(first)) == len(first)
    assert first == keys()


def test_a_notification_that_ran_shows_planned_remediation() -> None:
    """A slack.post that ran opens the thread, and planned remediation shows as a dry-run plan."""
    planner = ThreadPlanner()
    planner.on_event(incident())
    planner.on_record(rec("triton.update_config", "planned", dry_run=True))
    [root] = planner.on_record(rec("slack.post", "ran"))
    assert root.message is not None and "Dry-run — what would be done" in str(root.message.blocks)


def test_a_planned_notification_posts_nothing() -> None:
    """Under the notification dry-run a planned slack.post neither opens nor replies to a thread."""
    planner = ThreadPlanner()
    planner.on_event(incident())
    assert planner.on_record(rec("slack.post", "planned", dry_run=True)) == []
    assert planner.on_record(rec("triton.update_config", "planned", dry_run=True)) == []
    assert [o.kind for o in planner.on_record(rec("slack.post"))] == ["post_root"]
    assert planner.on_record(rec("slack.post", "planned", dry_run=True)) == []


def test_routes_first_match_wins_and_the_playbook_channel_overrides() -> None:
    """Namespace and severity pick the channel; a playbook's own channel wins over routes."""
    routes = [
        SlackRoute(match=RouteMatch(severity=["critical"]), channel="#pager", mention=["S0PAGE"]),
        SlackRoute(match=RouteMatch(namespace="search|ads"), channel="#search", mention=["U0ME"]),
    ]
    s = Subject("search", "ranker")
    assert route(routes, s, "critical", default_channel="#d").channel == "#pager"
    r = route(routes, s, "warning", default_channel="#d")
    assert (r.channel, r.mentions) == ("#search", ("U0ME",))
    assert route(routes, Subject("x", "m"), "high", default_channel="#d").channel == "#d"
    assert route(routes, s, "warning", default_channel="#d", channel="#own").channel == "#own"


def test_mentions_must_be_ids_slack_can_notify() -> None:
    """A handle by name cannot be mentioned by a bot: config says so when it loads."""
    with pytest.raises(ValidationError, match="user-group ID"):
        SlackRoute(mention=["@ml-oncall"])
    SlackRoute(mention=["S0ONCALL01", "U0ALICE001", "here"])


def test_message_templates_are_validated_when_settings_load(tmp_path: Path) -> None:
    """A template naming what a message does not have fails at load with the file and line."""
    config = tmp_path / "config.yaml"
    config.write_text("slack:\n  templates:\n    header: '{{ password }}'\n")
    with pytest.raises(SettingsError, match=r"config.yaml:3: slack.templates.header.*unknown name"):
        load_settings(config)


def waiting(state: str = "pending") -> ApprovalView:
    """Return the approval of a scale, in ``state``."""
    return ApprovalView(
        approval_id="apr-1",
        playbook="pb",
        action="kubernetes.scale",
        what="ranker +1 replicas",
        approvers=("S0ONCALL01",),
        expires_at=700.0,
        state=state,  # type: ignore[arg-type]  # tests pass each state as a plain str
        decided_by="" if state == "pending" else "U0ALICE001",
        decided_at=None if state == "pending" else 130.0,
    )


def test_a_decided_request_is_rewritten_without_its_buttons() -> None:
    """Deciding an approval replies, rewrites the request reply in place, and updates the root."""
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    planner.on_event(incident())
    planner.on_record(rec("slack.post"))
    [request, _] = planner.on_approval("inc-1", waiting())
    out = planner.on_approval("inc-1", waiting("approved"))
    assert [o.kind for o in out] == ["reply", "update_reply", "update_root"]
    rewrite = out[1]
    assert rewrite.metadata["target"] == request.key
    assert rewrite.message is not None and "Approval needed" in rewrite.message.text
    assert "actions" not in str(rewrite.message.blocks)
    assert "approved by <@U0ALICE001>" in str(rewrite.message.blocks)


def test_an_adopted_thread_keeps_its_root_and_numbers_on() -> None:
    """A thread adopted after a restart goes on past the last key and keeps the earlier root.

    The root's own content stays (the audit trail's incident has no evidence to rebuild it
    from); only the decided approval's buttons give way to the decision.
    """
    first = ThreadPlanner(ThreadSettings(channel="#c"))
    first.on_event(incident())
    [root] = first.on_record(rec("slack.post"))
    [request, update] = first.on_approval("inc-1", waiting())
    assert update.message is not None and "approval:apr-1" in str(update.message.blocks)

    again = ThreadPlanner(ThreadSettings(channel="#c"))
    bare = dataclasses.replace(incident(), summary="from the audit row")
    assert not again.started("inc-1")
    again.adopt(bare, channel="#c", seq=3, root=update.message, requests={"apr-1": request.key})
    assert again.started("inc-1")
    out = again.on_approval("inc-1", waiting("approved"))
    assert [o.key for o in out] == ["inc-1:0004:reply", "inc-1:0005:rewrite", "inc-1:0006:update"]
    new_root = out[2].message
    assert new_root is not None and root.message is not None
    assert "approval:apr-1" not in str(new_root.blocks)
    assert "approved by <@U0ALICE001>" in str(new_root.blocks)
    assert "from the audit row" not in str(new_root.blocks)
    [done] = [b for b in new_root.blocks if b.get("block_id") == "done"]
    assert "waits for approval" not in done["text"]["text"]
    assert "— approved by <@U0ALICE001>" in done["text"]["text"]
    assert new_root.blocks[0] == root.message.blocks[0]


def test_a_run_ending_after_the_resolution_opens_a_resolved_thread_with_the_diagnosis() -> None:
    """The run's records arrive after the incident resolved (its verification waited).

    The thread opens with what the incident said, marked resolved: not a stand-in rebuilt
    from the audit row, and not an "open" root no later event would ever close.
    """
    planner = ThreadPlanner(ThreadSettings(channel="#c"))
    planner.on_event(incident())
    assert planner.on_event(incident("resolved", at=400.0)) == []
    opened = planner.on_record(rec("slack.post", at=410.0))
    assert [o.kind for o in opened] == ["post_root"]
    root = opened[0].message
    assert root is not None
    assert "RESOLVED" in root.blocks[0]["text"]["text"]
    assert "Requests wait in the batcher." in str(root.blocks)
    assert planner.threads() == []
