"""The incident's Slack messages as Block Kit, pure: the root, its replies, approval buttons.

The root says what happened, where the time goes, the evidence that decided it (heaviest
first, with units), the fix, what was done (or in dry-run what would be done), who must
approve, and links. Replies carry each step's result, verification, rollback and the
resolution. Everything here fits Block Kit's limits by construction, so a golden test of the
blocks is a test of what Slack shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tritonguard.core import humanize
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.config_patch import Change
from tritonguard.core.findings import Evidence, IncidentEvent
from tritonguard.core.severity import Severity
from tritonguard.core.slack_templates import SlackTemplates
from tritonguard.core.templating import TemplateError, incident_context

JsonObj = dict[str, Any]

MAX_BLOCKS = 50
MAX_TEXT = 3000
MAX_FIELD = 2000
MAX_FIELDS = 10
MAX_HEADER = 150
MAX_FALLBACK = 3000
# Leaves of a config change listed in the root message; the rest are counted.
CHANGE_LEAVES = 5

APPROVE_ACTION = "tritonguard.approve"
REJECT_ACTION = "tritonguard.reject"

# The numbers the queue/compute breakdown shows; the evidence fields repeat them only when
# the signature's verdict rests on one of them.
BREAKDOWN = frozenset(
    {
        "mean_latency_ms",
        "mean_queue_ms",
        "queue_share",
        "p99_ms",
        "baseline_mean_latency_ms",
        "baseline_p99_ms",
        "early_mean_latency_ms",
        "early_mean_queue_ms",
    }
)
SEVERITY_MARK: dict[str, str] = {"critical": "🔴", "high": "🟠", "warning": "🟡"}
STATUS_MARK: dict[str, str] = {
    "ran": "✅",
    "planned": "📝",
    "skipped": "⏭️",
    "failed": "❌",
    "rolled_back": "↩️",
    "deferred": "⏸️",
    "cancelled": "⛔",
    "resumed": "🔁",
}
ApprovalState = Literal["pending", "approved", "rejected", "expired"]


@dataclass(frozen=True, slots=True)
class Message:
    """One Slack message: the notification text and its blocks."""

    text: str
    blocks: list[JsonObj]

    def as_dict(self) -> JsonObj:
        """Return the JSON form (outbox, ``replay --format slack``)."""
        return {"text": self.text, "blocks": self.blocks}


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """A step waiting for (or past) a human's yes or no."""

    approval_id: str
    playbook: str
    action: str
    what: str
    approvers: tuple[str, ...]
    expires_at: float
    state: ApprovalState = "pending"
    decided_by: str = ""
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class ThreadView:
    """Everything the incident's thread shows at one moment."""

    incident: IncidentEvent
    severity: Severity
    records: tuple[ActionRecord, ...] = ()
    approvals: tuple[ApprovalView, ...] = ()
    resolution: IncidentEvent | None = None
    links: tuple[tuple[str, str], ...] = ()
    mentions: tuple[str, ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    templates: SlackTemplates = field(default_factory=SlackTemplates)

    @property
    def state(self) -> str:
        """``open`` or ``resolved``."""
        return "open" if self.resolution is None else "resolved"


# ---- small pieces -------------------------------------------------------------------------


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(text: str, limit: int) -> str:
    """Return ``text`` within ``limit`` characters; a cut ends with ``…`` and closes a code fence."""
    if len(text) <= limit:
        return text
    head = text[: limit - 5]
    if head.count("```") % 2:
        return head + "…\n```"
    return head + "…"


def mention(ref: str) -> str:
    """Return Slack's markup for a user (``U…``/``W…``), a user group (``S…``) or here/channel."""
    ref = ref.strip().removeprefix("@")
    if ref in ("here", "channel", "everyone"):
        return f"<!{ref}>"
    if ref.startswith("S"):
        return f"<!subteam^{ref}>"
    return f"<@{ref}>"


def stamp(t: float) -> str:
    """Return a time as people on call read it (UTC)."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S UTC")


def _section(text: str, block_id: str | None = None) -> JsonObj:
    block: JsonObj = {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, MAX_TEXT)}}
    if block_id:
        block["block_id"] = block_id
    return block


def _context(*texts: str) -> JsonObj:
    elements = [{"type": "mrkdwn", "text": cut(t, MAX_TEXT)} for t in texts if t][:10]
    return {"type": "context", "elements": elements or [{"type": "mrkdwn", "text": " "}]}


def _header(text: str) -> JsonObj:
    return {"type": "header", "text": {"type": "plain_text", "text": cut(text, MAX_HEADER)}}


def subject_line(event: IncidentEvent) -> str:
    """Return ``namespace/model`` with the pod, as the header names the subject."""
    s = event.subject
    where = f"{s.namespace}/{s.model}" if s.namespace else s.model
    g = event.group
    if g is not None and g.affected > 1:
        # A fleet group's thread tells of every pod: the header says how many.
        return f"{where} on {g.scope()}"
    return f"{where} on {s.pod}" if s.pod else where


def pods_section(event: IncidentEvent) -> JsonObj | None:
    """Return the block listing a fleet group's pods, or None for a one-pod incident."""
    g = event.group
    if g is None or g.affected <= 1:
        return None
    owner = f" of {escape(g.key.workload)}" if g.key.workload else ""
    if not g.open:
        text = f"*Pods*: all {g.affected} pods{owner} recovered."
    else:
        earlier = f", {g.affected} affected in all" if g.affected > g.count else ""
        text = f"*Pods* ({g.scope()}{owner}{earlier}): {escape(g.pods_text())}"
    return _section(cut(text, MAX_TEXT), "pods")


def _template_context(view: ThreadView, now: float) -> dict[str, Any]:
    ctx = incident_context(view.incident, now)
    end = view.resolution.at if view.resolution is not None else now
    ctx.update(
        severity=view.severity,
        fix=view.incident.fix.text,
        state=view.state,
        duration=humanize.seconds(max(0.0, end - view.incident.opened_at)),
    )
    return ctx


def _templated(view: ThreadView, part: str, default: str, now: float) -> str:
    try:
        rendered = view.templates.render(part, _template_context(view, now))
    except TemplateError as exc:
        # A template that cannot render this incident must not hide it: the default stands,
        # and the reason shows where the template's text would have been.
        return f"{default}\n_(template {part}: {escape(str(exc))})_"
    return default if rendered is None else rendered


# ---- numbers ------------------------------------------------------------------------------


def _ev(evidence: Mapping[str, Evidence], name: str) -> float | None:
    e = evidence.get(name)
    return None if e is None else e.value


def breakdown(evidence: Mapping[str, Evidence]) -> str | None:
    """Return where a request's time goes (queue against compute), or None without the numbers.

    That split comes first because it rules out half the causes: a request waiting before it
    executes points at scheduling and capacity, a slow execution at the work itself.
    """
    lat, queue = _ev(evidence, "mean_latency_ms"), _ev(evidence, "mean_queue_ms")
    who = "Request"
    if lat is None or queue is None:
        lat, queue = _ev(evidence, "early_mean_latency_ms"), _ev(evidence, "early_mean_queue_ms")
        who = "First requests"
    if lat is None or queue is None or lat <= 0:
        return None
    share = _ev(evidence, "queue_share") if who == "Request" else None
    share = min(1.0, max(0.0, queue / lat if share is None else share))
    compute = max(0.0, lat - queue)
    over = evidence.get("mean_latency_ms") or evidence.get("early_mean_latency_ms")
    window = f" {humanize.window(over)}" if over is not None and humanize.window(over) else ""
    lines = [
        f"*Where the time goes*{window}",
        f"{who} *{humanize.milliseconds(lat)}* = queue *{humanize.milliseconds(queue)}* "
        f"({humanize.percent(share)}) + compute *{humanize.milliseconds(compute)}* "
        f"({humanize.percent(1 - share)})",
    ]
    tail = []
    p99, base_p99 = _ev(evidence, "p99_ms"), _ev(evidence, "baseline_p99_ms")
    base = _ev(evidence, "baseline_mean_latency_ms")
    if p99 is not None:
        tail.append(f"p99 {humanize.milliseconds(p99)}")
    if base:
        tail.append(
            f"healthy mean {humanize.milliseconds(base)} (now {humanize.factor(lat / base)})"
        )
    elif base_p99 and p99 is not None:
        tail.append(f"healthy p99 {humanize.milliseconds(base_p99)}")
    steady = _ev(evidence, "steady_compute_per_exec_ms")
    if who == "First requests" and steady is not None:
        tail.append(f"steady execution {humanize.milliseconds(steady)}")
    if tail:
        lines.append(" · ".join(tail))
    lines.append(
        "→ mostly *queueing*: requests wait before they execute"
        if share >= 0.5
        else "→ mostly *compute*: the executions themselves are slow"
    )
    return "\n".join(lines)


def evidence_fields(evidence: Mapping[str, Evidence]) -> tuple[list[JsonObj], list[str]]:
    """Return up to ten Block Kit fields for the deciding evidence, heaviest first, and the rest.

    Numbers the breakdown already shows are left out unless the verdict rests on them.
    """
    shown = [
        (name, e)
        for name, e in humanize.ranked(evidence)
        if name not in BREAKDOWN or e.weight >= 1.0
    ]
    fields = []
    for name, e in shown[:MAX_FIELDS]:
        window = humanize.window(e)
        line = humanize.value(name, e, evidence) + (f" {window}" if window else "")
        text = f"*{humanize.label(name)}*\n{line}\n_{escape(e.what)}_"
        fields.append({"type": "mrkdwn", "text": cut(text, MAX_FIELD)})
    rest = [f"{humanize.label(n)} {humanize.value(n, e, evidence)}" for n, e in shown[MAX_FIELDS:]]
    return fields, rest


def feature_value(name: str, value: float | None) -> str:
    """Return a feature's value (as verify checks read them) with its unit."""
    if value is None:
        return "unknown"
    if name.endswith("_us"):
        return humanize.microseconds(value)
    if name.endswith(("_share", "_util", "_saturation", "_ratio", "_busy")):
        return humanize.percent(value)
    if name.endswith("_rate"):
        return f"{humanize.number(value)}/s"
    if name.endswith("_bps"):
        return humanize.bytes_per_second(value)
    return humanize.number(value)


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return humanize.number(float(value), 6) if abs(value) >= 1 else humanize.number(value)
    if value is None:
        return "unset"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _changes(detail: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    changes = [c for c in detail.get("changes") or [] if isinstance(c, Mapping)]
    if changes:
        # A block added whole (model_warmup[0] and its fields) reads as one addition.
        heads: dict[str, int] = {}
        for c in changes:
            if c.get("old") is None:
                head = str(c.get("path")).partition(".")[0]
                heads[head] = heads.get(head, 0) + 1
        added: dict[str, list[str]] = {}
        parts: list[str] = []
        for c in changes:
            path = str(c.get("path"))
            head, _, rest = path.partition(".")
            if c.get("old") is None and rest and heads.get(head, 0) >= 3:
                added.setdefault(head, []).append(f"{rest} {_plain(c.get('new'))}")
            else:
                parts.append(f"`{path}` {_plain(c.get('old'))} → {_plain(c.get('new'))}")
        for head, fields in added.items():
            more = f", +{len(fields) - 3} more" if len(fields) > 3 else ""
            parts.append(f"add `{head}` ({', '.join(fields[:3])}{more})")
        return ", ".join(parts)
    parts = [f"`{path}` → {_plain(val)}" for path, val in (params.get("set") or {}).items()]
    parts += [f"`{path}` +{_plain(val)}" for path, val in (params.get("add") or {}).items()]
    parts += [f"remove `{p}`" for p in params.get("remove") or []]
    note = detail.get("note")
    if note and not parts:
        parts.append(str(note))
    return ", ".join(parts)


def describe(rec: ActionRecord) -> str:
    """Return one line saying what a step did or would do, with its numbers."""
    d, p = rec.detail, rec.params
    action = rec.action
    if action == "*":
        return f"playbook `{rec.playbook}` skipped ({rec.guard}): {rec.reason}"
    what = ""
    if action in ("triton.update_config", "triton.add_warmup"):
        what = _changes(d, p)
    elif action == "triton.shed_load":
        what = _changes(d, {}) or (
            f"queue policy REJECT, max_queue_size {_plain(p.get('max_queue_size'))}, timeout "
            f"{humanize.microseconds(float(p.get('default_timeout_microseconds') or 0))}"
        )
    elif action == "kubernetes.scale":
        target = d.get("hpa") or d.get("workload") or p.get("name", "")
        if "min_replicas" in d:
            what = f"HPA {target} minReplicas {_plain(d.get('was'))} → {_plain(d['min_replicas'])}"
        elif "replicas" in d:
            was = f"{_plain(d['was'])} → " if "was" in d else "→ "
            what = f"{target} replicas {was}{_plain(d['replicas'])}"
        elif p.get("add") is not None:
            what = f"{target} +{_plain(p['add'])} replicas"
    elif action == "verify":
        raw_values = d.get("values")
        values: Mapping[str, Any] = raw_values if isinstance(raw_values, Mapping) else {}
        checks = d.get("checks") or p.get("checks") or []
        parts = []
        for c in checks:
            if not isinstance(c, Mapping):
                continue
            feat = str(c.get("feature"))
            bound = (
                f"below {feature_value(feat, _num(c.get('below')))}"
                if c.get("below") is not None
                else f"above {feature_value(feat, _num(c.get('above')))}"
            )
            now = f" (now {feature_value(feat, _num(values.get(feat)))})" if feat in values else ""
            parts.append(f"`{feat}` {bound}{now}")
        wait = d.get("wait_s", p.get("wait"))
        after = f" after {humanize.seconds(float(wait))}" if isinstance(wait, int | float) else ""
        what = ", ".join(parts) + after
    elif action == "triton.warmup":
        what = f"{_plain(p.get('requests', d.get('requests')))} warm-up requests"
    elif action in ("triton.load", "triton.unload"):
        what = f"model `{d.get('model') or p.get('model') or ''}`"
    elif action == "slack.post":
        what = "message in this thread"
    else:
        what = ", ".join(f"{k} {_plain(v)}" for k, v in p.items())
    line = f"`{action}`" + (f" — {what}" if what else "")
    if rec.phase in ("rollback", "restore", "escalate"):
        line = f"{rec.phase}: {line}"
    if rec.status in ("failed", "skipped", "cancelled", "deferred") and rec.reason:
        line += f" — {rec.status}: {rec.reason}"
    return line


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


# ---- the root -------------------------------------------------------------------------------


def _done_section(view: ThreadView) -> JsonObj:
    records = [r for r in view.records if r.action != "slack.post" or r.status == "failed"]
    dry = bool(records) and all(r.dry_run for r in records if r.action != "*")
    title = "*Dry-run — what would be done*" if dry else "*What was done*"
    lines = [f"{STATUS_MARK.get(r.status, '•')} {escape(describe(r))}" for r in records]
    for a in view.approvals:
        if a.state == "pending":
            who = ", ".join(mention(x) for x in a.approvers) or "anyone in the channel"
            lines.append(
                f"⏳ `{a.action}` — {a.what} — waits for approval by {who} until "
                f"{stamp(a.expires_at)}"
            )
    if not lines:
        # The root is posted by the first step, before any later step has run: until the
        # incident resolves, "no change" is only so far.
        if view.resolution is not None:
            lines.append("No automatic change: the fix above is for a human.")
        elif any(r.action == "slack.post" for r in view.records):
            lines.append("No automatic change so far; what the playbooks do is added here.")
        else:
            lines.append("Nothing yet.")
    body = "\n".join(lines)
    return _section(f"{title}\n{cut(body, MAX_TEXT - len(title) - 1)}", "done")


def approval_blocks(approval: ApprovalView) -> list[JsonObj]:
    """Return the buttons of a pending approval, or the decision once there is one."""
    if approval.state != "pending":
        by = f" by {mention(approval.decided_by)}" if approval.decided_by else ""
        when = f" at {stamp(approval.decided_at)}" if approval.decided_at is not None else ""
        mark = {"approved": "👍", "rejected": "🛑"}.get(approval.state, "⌛")
        return [_context(f"{mark} `{approval.action}` {approval.state}{by}{when}")]
    return [
        {
            "type": "actions",
            "block_id": f"approval:{approval.approval_id}"[:255],
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "style": "primary",
                    "action_id": APPROVE_ACTION,
                    "value": approval.approval_id,
                },
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "style": "danger",
                    "action_id": REJECT_ACTION,
                    "value": approval.approval_id,
                },
            ],
        }
    ]


def what_changed(ev: IncidentEvent) -> str:
    """Return the change the incident followed, leaf by leaf, and when it was seen.

    The model-config diff first, then the rollout the pod came from (revision, when, and its
    pod-template diff), then a ConfigMap the pod mounts (its keys and lines), when there were.
    """
    change = ev.change
    if change is None:
        return ""
    lines: list[str] = []
    if change.changes:
        lead = ev.opened_at - change.at_latest
        when = (
            f"read {humanize.seconds(lead)} before it opened" if lead > 0 else "read as it opened"
        )
        lines.append(f"*What changed* ({when}, against the {escape(change.against)})")
        lines += _leaves(change.changes)
    rollout = change.rollout
    if rollout is not None:
        lead = ev.opened_at - rollout.at
        when = f"{humanize.seconds(lead)} before it opened" if lead > 0 else "as it opened"
        against = (
            f"against revision {rollout.previous}"
            if rollout.previous is not None
            else "no earlier revision kept"
        )
        head = "*Rolled out*" if change.changes else "*What changed*: a rollout"
        lines.append(f"{head} {when}: {escape(rollout.headline())} ({against})")
        lines += _leaves(rollout.changes)
    mounted = change.config_map
    if mounted is not None:
        lead = ev.opened_at - mounted.at_latest
        when = f"{humanize.seconds(lead)} before it opened" if lead > 0 else "as it opened"
        head = "*Also changed*" if lines else "*What changed*"
        lines.append(
            f"{head} {when}: {escape(mounted.headline())} (resourceVersion "
            f"{escape(mounted.previous_version)} → {escape(mounted.resource_version)})"
        )
        lines += _leaves(mounted.changes, untold=mounted.untold)
    return cut("\n".join(lines), MAX_TEXT)


def _leaves(changes: Sequence[Change], *, untold: int = 0) -> list[str]:
    def shown(value: Any) -> str:
        # A container's args or command is a list of words, shown as the shell would.
        return escape(_plain(" ".join(map(str, value)) if isinstance(value, list) else value))

    lines = [
        f"• `{escape(c.path)}`: {shown(c.old)} → {shown(c.new)}" for c in changes[:CHANGE_LEAVES]
    ]
    more = len(changes) - min(CHANGE_LEAVES, len(changes)) + untold
    if more > 0:
        lines.append(f"• and {more} more")
    return lines


def root_message(view: ThreadView, now: float | None = None) -> Message:
    """Return the incident's root message as it should read now."""
    ev = view.incident
    at = ev.at if now is None else now
    mark = "✅" if view.resolution is not None else SEVERITY_MARK.get(view.severity, "•")
    state = "RESOLVED · " if view.resolution is not None else ""
    default_header = f"{mark} {state}{view.severity.upper()} · {ev.cause} · {subject_line(ev)}"
    header = _templated(view, "header", default_header, at)
    summary = _templated(view, "summary", escape(ev.summary), at)
    blocks: list[JsonObj] = [_header(header)]
    if view.resolution is not None:
        took = humanize.seconds(max(0.0, view.resolution.at - ev.opened_at))
        how = "recovered" if view.resolution.recovered else "closed without recovery evidence"
        blocks.append(_section(f"*Resolved after {took}* ({how}).", "resolved"))
    blocks.append(_section(summary, "summary"))
    pods = pods_section(ev)
    if pods is not None:
        blocks.append(pods)
    split = breakdown(ev.evidence)
    if split:
        blocks.append(_section(split, "breakdown"))
    if ev.change is not None:
        blocks.append(_section(what_changed(ev), "change"))
    fields, rest = evidence_fields(ev.evidence)
    if fields:
        blocks.append({"type": "section", "block_id": "evidence", "fields": fields})
    if rest:
        blocks.append(_context("Also: " + " · ".join(rest)))
    if ev.fix.text:
        blocks.append(_section(f"*Fix*\n{escape(ev.fix.text)}", "fix"))
    code = "\n".join(x for x in (ev.fix.config_snippet, ev.fix.flags) if x)
    if code:
        blocks.append(_section(f"```\n{cut(code, MAX_TEXT - 10)}\n```", "fix_code"))
    for playbook, note in view.notes[:3]:
        blocks.append(_context(f"_{escape(playbook)}_: {escape(note)}"))
    blocks.append(_done_section(view))
    for approval in view.approvals:
        if approval.state == "pending":
            blocks.extend(approval_blocks(approval))
    facts = [
        f"confidence {ev.confidence:.2f}",
        f"opened {stamp(ev.opened_at)}",
        f"incident `{ev.incident_id}`",
    ]
    if ev.secondary:
        facts.append("also matched: " + ", ".join(ev.secondary))
    link_text = " · ".join(f"<{url}|{name}>" for name, url in view.links)
    blocks.append(_context(" · ".join(facts), link_text))
    if view.mentions:
        blocks.append(_context("cc " + " ".join(mention(m) for m in view.mentions)))
    fallback = f"{mark} {view.severity} {ev.cause} on {subject_line(ev)}: {ev.summary}"
    return Message(cut(fallback, MAX_FALLBACK), blocks[:MAX_BLOCKS])


# ---- replies --------------------------------------------------------------------------------


def record_reply(rec: ActionRecord) -> Message:
    """Return the thread reply for one step's result (ran, planned, failed, rolled back...)."""
    mark = STATUS_MARK.get(rec.status, "•")
    verb = {
        "ran": "done",
        "planned": "would run (dry-run)",
        "skipped": "skipped",
        "failed": "failed",
        "rolled_back": "rolled back",
        "deferred": "deferred",
        "cancelled": "cancelled",
        "resumed": "resumed",
    }.get(rec.status, rec.status)
    if rec.action == "verify" and rec.status in ("ran", "failed"):
        verb = "verified" if rec.status == "ran" else "verification failed"
    line = f"{mark} *{verb}*: {escape(describe(rec))}"
    context = f"playbook `{rec.playbook}` · {stamp(rec.at)}"
    return Message(
        cut(f"{verb}: {describe(rec)}", MAX_FALLBACK), [_section(line), _context(context)]
    )


def note_reply(playbook: str, text: str, at: float) -> Message:
    """Return a playbook's own message (a ``slack.post`` after the first) as a thread reply."""
    return Message(
        cut(text, MAX_FALLBACK),
        [_section(escape(text)), _context(f"playbook `{playbook}` · {stamp(at)}")],
    )


def resolution_reply(view: ThreadView) -> Message:
    """Return the thread reply that says the incident is over, and how it ended."""
    res = view.resolution
    if res is None:
        raise ValueError("resolution_reply needs a resolved incident")
    took = humanize.seconds(max(0.0, res.at - view.incident.opened_at))
    g = view.incident.group
    if g is not None and g.affected > 1:
        took += f" on all {g.affected} pods (the last, {escape(res.subject.pod)})"
    default = (
        f"✅ *Resolved* after {took}: {escape(res.summary)}"
        if res.recovered
        else f"⚪ *Closed* after {took} without recovery evidence: {escape(res.summary)}"
    )
    text = _templated(view, "resolved", default, res.at)
    return Message(cut(text, MAX_FALLBACK), [_section(text), _context(stamp(res.at))])


def approval_request_reply(approval: ApprovalView) -> Message:
    """Return the thread reply that asks for an approval (the buttons are on the root too)."""
    who = ", ".join(mention(x) for x in approval.approvers) or "anyone in the channel"
    text = (
        f"⏳ *Approval needed* for `{approval.action}` ({escape(approval.playbook)}): "
        f"{escape(approval.what)}\nWho may decide: {who} · expires {stamp(approval.expires_at)}"
    )
    return Message(cut(text, MAX_FALLBACK), [_section(text), *approval_blocks(approval)])


def approval_decision_reply(approval: ApprovalView) -> Message:
    """Return the thread reply recording who decided an approval, or that it expired."""
    by = f" by {mention(approval.decided_by)}" if approval.decided_by else ""
    verdict = {
        "approved": f"👍 *Approved*{by}: `{approval.action}` runs now",
        "rejected": f"🛑 *Rejected*{by}: `{approval.action}` is dropped",
        "expired": f"⌛ *Expired*: nobody decided on `{approval.action}` in time; it is dropped",
    }.get(approval.state, approval.state)
    return Message(cut(verdict, MAX_FALLBACK), [_section(verdict)])


def chart_comment(view: ThreadView) -> str:
    """Return the comment posted with the incident's chart."""
    return f"Latency split and deciding signal for {subject_line(view.incident)}"


def all_blocks(messages: Sequence[Message]) -> list[JsonObj]:
    """Return every block of several messages (terminal rendering of a whole thread)."""
    return [b for m in messages for b in m.blocks]
