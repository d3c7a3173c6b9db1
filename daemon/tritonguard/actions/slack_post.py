"""``slack.post``: put the incident in its Slack thread, with the playbook's own words.

The first ``slack.post`` of an incident opens its thread (the root message with the whole
diagnosis); later ones are replies. The action itself sends nothing: it renders the text into
the audit record, and the daemon's thread planner (``core.slack_thread``) hands the message to
the persisted outbox, which delivers it once, retrying through Slack outages. So a post never
fails or holds up a remediation, and in dry-run, where nothing on a server changes, the
thread still tells on-call what would be done.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import ActionContext, ActionParams, ActionResult, action


class SlackPostParams(ActionParams):
    """Text may use templates (``{{ model }}``, ``{{ evidence.queue_share }}``...)."""

    channel: str | None = Field(
        None, description="default: the channel the routes (or slack.channel) give the incident"
    )
    text: str | None = Field(
        None, description="the playbook's words; the root always carries the whole diagnosis"
    )


def _detail(ctx: ActionContext, params: SlackPostParams) -> dict[str, Any]:
    detail: dict[str, Any] = {"note": params.text or "", "thread": ctx.event.incident_id}
    if params.channel:
        detail["channel"] = params.channel
    return detail


async def _plan(ctx: ActionContext, params: SlackPostParams) -> dict[str, Any]:
    return _detail(ctx, params)


@action("slack.post", SlackPostParams, kind="notify", plan=_plan)
async def slack_post(ctx: ActionContext, params: SlackPostParams) -> ActionResult:
    """Post into the incident's Slack thread (the diagnosis, the fix, the playbook's text)."""
    return ActionResult(detail=_detail(ctx, params))
