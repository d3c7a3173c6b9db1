"""``slack.post``: post a short diagnosis of the incident to a Slack channel."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from daemon.actions.registry import ActionContext, ActionFailed, ActionParams, ActionResult, action


class SlackPostParams(ActionParams):
    """Text may use templates (``{{ model }}``, ``{{ evidence.queue_share }}``...)."""

    channel: str | None = Field(None, description="default: the daemon's configured channel")
    text: str | None = Field(None, description="default: the incident's summary and fix")


def diagnosis(ctx: ActionContext, text: str | None) -> tuple[str, list[dict[str, Any]]]:
    """Return (fallback text, Block Kit blocks) for the incident in ``ctx``."""
    ev = ctx.event
    s = ev.subject
    head = f"{ev.cause} on {s.namespace}/{s.model}" + (f" (pod {s.pod})" if s.pod else "")
    body = text or f"{ev.summary}\nFix: {ev.fix.text}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": head[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": body[:2900]}},
    ]
    if ev.fix.config_snippet:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"```{ev.fix.config_snippet[:2800]}```"},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"confidence {ev.confidence:.2f} · playbook {ctx.playbook}",
                }
            ],
        }
    )
    return f"{head}: {body}"[:3000], blocks


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
