"""``slack.post``: post a short diagnosis of the incident to a Slack channel."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)
from tritonguard.core.severity import severity
from tritonguard.core.slack_message import ThreadView, root_message


class SlackPostParams(ActionParams):
    """Text may use templates (``{{ model }}``, ``{{ evidence.queue_share }}``...)."""

    channel: str | None = Field(None, description="default: the daemon's configured channel")
    text: str | None = Field(None, description="default: the incident's summary and fix")


def diagnosis(ctx: ActionContext, text: str | None) -> tuple[str, list[dict[str, Any]]]:
    """Return (fallback text, Block Kit blocks) for the incident in ``ctx``.

    The incident's message (``core.slack_message``): header with severity, cause and subject,
    where the time goes, the deciding evidence with units, the fix and the playbook's text.
    """
    ev = ctx.event
    notes = ((ctx.playbook, text),) if text else ()
    message = root_message(ThreadView(ev, severity(ev), notes=notes))
    return (f"{text}\n{message.text}" if text else message.text), message.blocks


async def _plan(ctx: ActionContext, params: SlackPostParams) -> dict[str, Any]:
    text, _ = diagnosis(ctx, params.text)
    return {"channel": params.channel or ctx.slack_channel, "text": text}


@action("slack.post", SlackPostParams, kind="notify", plan=_plan)
async def slack_post(ctx: ActionContext, params: SlackPostParams) -> ActionResult:
    """Post the diagnosis (cause, subject, summary, fix) to Slack."""
    if ctx.slack is None:
        raise ActionFailed("no Slack notifier configured")
    channel = params.channel or ctx.slack_channel
    text, blocks = diagnosis(ctx, params.text)
    try:
        await ctx.slack.post(channel, text, blocks)
    except Exception as exc:  # the Slack client raises its own typed error; keep one line
        raise ActionFailed(f"slack: {exc}") from None
    return ActionResult(detail={"channel": channel})
