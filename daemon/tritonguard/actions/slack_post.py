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
from tritonguard.core.findings import Evidence


class SlackPostParams(ActionParams):
    """Text may use templates (``{{ model }}``, ``{{ evidence.queue_share }}``...)."""

    channel: str | None = Field(None, description="default: the daemon's configured channel")
    text: str | None = Field(None, description="default: the incident's summary and fix")


# Slack allows 10 fields per section; the first evidence items are the ones the summary uses.
MAX_EVIDENCE_FIELDS = 8


def _escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _number(e: Evidence) -> str:
    if e.value is None:
        return "unknown"
    if e.unit == "ratio":
        return f"{e.value:.2f}"
    if e.unit == "bool":
        return "yes" if e.value else "no"
    return f"{e.value:,.1f} {e.unit}" if abs(e.value) < 1e6 else f"{e.value:.3g} {e.unit}"


def evidence_fields(evidence: dict[str, Evidence]) -> list[dict[str, str]]:
    """Return Block Kit fields for the numbers behind a diagnosis, each with its window."""
    fields = []
    for name, e in list(evidence.items())[:MAX_EVIDENCE_FIELDS]:
        window = f" over {e.window_s:.0f} s" if e.window_s else ""
        text = f"*{name}*\n{_number(e)}{window}\n_{_escape(e.what)}_"
        fields.append({"type": "mrkdwn", "text": text[:1900]})
    return fields


def diagnosis(ctx: ActionContext, text: str | None) -> tuple[str, list[dict[str, Any]]]:
    """Return (fallback text, Block Kit blocks) for the incident in ``ctx``.

    Why (the summary), the numbers that prove it with their windows, what to change (the fix
    and its snippet), and what else matched, so on-call can act without opening a dashboard.
    """
    ev = ctx.event
    s = ev.subject
    head = f"{ev.cause} on {s.namespace}/{s.model}" + (f" (pod {s.pod})" if s.pod else "")
    body = text or f"{ev.summary}\nFix: {ev.fix.text}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": head[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _escape(body)[:2900]}},
    ]
    fields = evidence_fields(ev.evidence)
    if fields:
        blocks.append({"type": "section", "fields": fields})
    if ev.fix.config_snippet:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"```{ev.fix.config_snippet[:2800]}```"},
            }
        )
    context = (
        f"confidence {ev.confidence:.2f} · incident {ev.incident_id} · playbook {ctx.playbook}"
    )
    if ev.secondary:
        context += f" · also matched: {', '.join(ev.secondary)}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context[:2900]}]})
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
