"""One Slack thread per incident, pure: which messages to post, update and upload, in order.

The planner sees every incident transition and every audit record. The first ``slack.post``
of an incident that ran opens the thread with its root (one planned under the notification
dry-run posts nothing; remediation planned under its dry-run shows as a plan); from then on
each step's result, verification, rollback, a playbook's further ``slack.post`` texts,
approvals and the resolution are replies, and the root is updated in place to the incident
as it stands. It returns :class:`Outgoing` items, each with a
key unique to that message, which the delivery (the outbox) uses to post each one once.

A thread opened by an earlier run of the daemon (a restart) is *adopted*
(:meth:`ThreadPlanner.adopt`): the planner goes on in it with the root that run last sent.
That root was built from the incident as it was seen then, with its evidence; the audit
trail's row of the incident has none. So an adopted root is never rebuilt: its updates are
that root with each decided approval's buttons (block ``approval:<id>``) replaced by the
decision, and everything else goes into the thread as replies.

The pod incidents of one fleet group (``core.fleet_groups``) share one thread: the first of
them whose ``slack.post`` runs opens it, and it *hosts* the group. The others' openings and
resolutions update its root (the pods it lists), their changes are replies in it, their own
notifications and the steps skipped as covered by the group add nothing, and the thread
resolves with the group's last pod. Updates one evaluation causes are sent as one.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import GROUP_GUARDS, FleetGroup
from tritonguard.core.incident_links import LinkSettings, links
from tritonguard.core.severity import Severity, SeverityRules, severity
from tritonguard.core.slack_message import (
    ApprovalView,
    Message,
    ThreadView,
    approval_blocks,
    approval_decision_reply,
    approval_request_reply,
    chart_comment,
    mention,
    note_reply,
    record_reply,
    resolution_reply,
    root_message,
)
from tritonguard.core.slack_routing import SlackRoute, route
from tritonguard.core.slack_templates import SlackTemplates

# "update_reply" rewrites an earlier reply in place (the approval request, once decided): its
# ``metadata["target"]`` is that reply's key.
Kind = Literal["post_root", "update_root", "reply", "update_reply", "upload"]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One Slack call to make for a thread; ``key`` makes it idempotent."""

    key: str
    thread: str
    kind: Kind
    channel: str
    message: Message | None = None
    # For an upload: where the file is, its name and title.
    file: dict[str, str] | None = None
    # What a root carries so another replica (or a restart) can find the thread again.
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form (the outbox row, ``replay --format slack``)."""
        return {
            "key": self.key,
            "thread": self.thread,
            "kind": self.kind,
            "channel": self.channel,
            "message": None if self.message is None else self.message.as_dict(),
            "file": self.file,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outgoing:
        """Read the JSON form back."""
        m = data.get("message")
        return cls(
            key=str(data["key"]),
            thread=str(data["thread"]),
            kind=data["kind"],
            channel=str(data["channel"]),
            message=None if m is None else Message(str(m["text"]), list(m["blocks"])),
            file=data.get("file"),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True, slots=True)
class ThreadSettings:
    """What shapes the threads: default channel, routes, mentions, links, templates."""

    channel: str = "#tritonguard"
    routes: tuple[SlackRoute, ...] = ()
    mentions: tuple[str, ...] = ()
    links: LinkSettings = field(default_factory=LinkSettings)
    templates: SlackTemplates = field(default_factory=SlackTemplates)
    severity: SeverityRules = field(default_factory=SeverityRules)


def thread_identity(event: IncidentEvent) -> dict[str, Any]:
    """Return what identifies an incident's thread across replicas and restarts.

    Incident ids are made where the incident opened, so another replica's differ; the cause
    and subject do not, and at most one incident per subject is open at a time.
    """
    s = event.subject
    return {
        "cause": event.cause,
        "subject": s.key(),
        "opened_at": round(event.opened_at, 3),
    }


@dataclass(slots=True)
class _Thread:
    incident: IncidentEvent
    severity: Severity
    started: bool = False
    channel: str = ""
    mentions: tuple[str, ...] = ()
    records: list[ActionRecord] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    approvals: dict[str, ApprovalView] = field(default_factory=dict)
    resolution: IncidentEvent | None = None
    seq: int = 0
    chart_posted: bool = False
    # The key of each approval's request reply (its buttons go once it is decided).
    requests: dict[str, str] = field(default_factory=dict)
    # The root an earlier run posted, for a thread adopted after a restart.
    adopted_root: Message | None = None


# Incidents kept after resolution, posted or not, for what a run records later (its verify
# verdict, a rollback, a restore on resolve): runs are bounded by the playbook budget and a
# verification's wait, far fewer than this at once.
MAX_ENDED = 256

# Resolved groups' pods remembered for a restore filed after the resolution: far more than
# the pods of the groups whose last runs end at once.
MAX_TOLD = 4096

ChartMaker = Callable[[IncidentEvent, list[ActionRecord], str], dict[str, str] | None]


class ThreadPlanner:
    """Turns incident transitions and audit records into the Slack calls of each thread.

    ``chart`` (optional) charts the incident when the thread opens and when it resolves; it
    returns the file to upload (``path``, ``filename``, ``title``) or None. It is called on
    the caller's thread (the daemon's event loop) and must return at once: the file may still
    be being drawn elsewhere, and whoever delivers the upload waits for it.
    """

    def __init__(self, settings: ThreadSettings | None = None, chart: ChartMaker | None = None):
        self.settings = settings or ThreadSettings()
        self.chart = chart
        self._threads: dict[str, _Thread] = {}
        # Incidents that resolved before anything was posted: a run that ends after the
        # resolution (a verification's wait) still opens their thread, with what the
        # incident said and that it resolved, not a stand-in that stays "open" for ever.
        self._ended: OrderedDict[str, _Thread] = OrderedDict()
        # Fleet groups: each open group as it stands, which incident's thread hosts it, and
        # the group of each open pod incident.
        self._groups: dict[str, FleetGroup] = {}
        self._host: dict[str, str] = {}
        self._group_of: dict[str, str] = {}
        # Pods' incidents of groups that resolved, and the incident whose thread told them:
        # a restore filed under one (the last pod's) still goes into that thread.
        self._told_by: OrderedDict[str, str] = OrderedDict()

    def threads(self) -> list[str]:
        """Incident ids with a thread open (started or not yet)."""
        return list(self._threads)

    def started(self, incident_id: str) -> bool:
        """Whether this planner posts into the incident's thread (it opened or adopted it).

        A resolved incident's thread counts while it is kept: what its runs record later
        goes on in it without adopting it again from the outbox.
        """
        th = self._threads.get(incident_id) or self._ended.get(incident_id)
        return th is not None and th.started

    def adopt(
        self,
        incident: IncidentEvent,
        *,
        channel: str,
        seq: int,
        root: Message | None,
        requests: dict[str, str] | None = None,
    ) -> None:
        """Go on in a thread an earlier run opened (the outbox knows it; this process did not).

        ``seq`` is the highest message number already queued for it: keys go on past it (the
        outbox ignores a key it has). ``root`` is the newest root that run queued, kept as it
        is but for decided approvals' buttons; ``requests`` the keys of its approval requests.
        """
        th = self._threads.get(incident.incident_id)
        if th is None:
            th = self._threads[incident.incident_id] = _Thread(
                incident, severity(incident, self.settings.severity)
            )
        th.started, th.channel = True, channel
        th.seq = max(th.seq, seq)
        th.adopted_root = root
        th.requests.update(requests or {})

    def view(self, incident_id: str) -> ThreadView | None:
        """Return what the incident's thread shows now, or None if there is none."""
        th = self._threads.get(incident_id)
        return None if th is None else self._view(th)

    def _view(self, th: _Thread) -> ThreadView:
        s = self.settings
        until = th.resolution.at if th.resolution is not None else None
        group = th.incident.group
        incident = th.incident
        if group is not None:
            # The group as it stands now, whichever of its pods' transitions came last.
            incident = replace(incident, group=self._groups.get(group.id, group))
        return ThreadView(
            incident=incident,
            severity=th.severity,
            records=tuple(th.records),
            approvals=tuple(th.approvals.values()),
            resolution=th.resolution,
            links=tuple(links(th.incident, s.links, until)),
            mentions=th.mentions,
            notes=tuple(th.notes),
            templates=s.templates,
        )

    def _key(self, th: _Thread, kind: str) -> str:
        th.seq += 1
        return f"{th.incident.incident_id}:{th.seq:04d}:{kind}"

    # ---- inputs -------------------------------------------------------------------------------
    def on_events(self, events: Iterable[IncidentEvent]) -> list[Outgoing]:
        """Take one evaluation's transitions; each root changed is updated once, last."""
        out = [item for event in events for item in self.on_event(event)]
        last = {item.thread: item.key for item in out if item.kind == "update_root"}
        return [i for i in out if i.kind != "update_root" or last[i.thread] == i.key]

    def on_event(self, event: IncidentEvent) -> list[Outgoing]:
        """Take an incident transition; return the calls it causes."""
        g = event.group
        if g is not None:
            self._groups[g.id] = g
            self._group_of[event.incident_id] = g.id
            host = self._threads.get(self._host.get(g.id, ""))
            if host is not None and (
                host.incident.incident_id != event.incident_id or _goes_on(event, g)
            ):
                return self._group_event(host, event, g)
        th = self._threads.get(event.incident_id)
        if event.event == "resolved":
            if th is None:
                return []
            th.resolution = event
            out: list[Outgoing] = []
            if th.started:
                out.append(self._reply(th, resolution_reply(self._view(th))))
                out.extend(self._chart(th, "resolved"))
                out.append(self._update(th))
            # Kept, started or not: what its playbooks record after the resolution (a verify
            # step's verdict, a rollback, a restore on resolve) still goes into its thread.
            self._ended[event.incident_id] = th
            while len(self._ended) > MAX_ENDED:
                self._ended.popitem(last=False)
            del self._threads[event.incident_id]
            self._forget_group(event)
            return out
        sev = severity(event, self.settings.severity)
        if th is None:
            self._threads[event.incident_id] = _Thread(event, sev)
            return []
        th.incident, th.severity = event, sev
        return [self._update(th)] if th.started else []

    def on_record(self, rec: ActionRecord, incident: IncidentEvent | None = None) -> list[Outgoing]:
        """Take one audit record of the incident's playbooks; return the calls it causes.

        ``incident`` stands in when the record's incident was not seen opening (a resumed
        verification after a restart); without either the record is ignored.
        """
        host = self._hosting(rec.incident_id)
        if host is not None:
            return self._member_record(host, rec)
        th = self._threads.get(rec.incident_id) or self._ended.get(rec.incident_id)
        if th is None:
            if incident is None:
                return []
            th = self._threads[rec.incident_id] = _Thread(
                incident, severity(incident, self.settings.severity)
            )
        if rec.action == "slack.post" and rec.status == "planned":
            # Notifications in dry-run (dry_run.notify) tell nobody: the audit trail has them.
            th.records.append(rec)
            return []
        if rec.action == "slack.post" and rec.status == "ran":
            text = str(rec.detail.get("note") or rec.params.get("text") or "").strip()
            th.records.append(rec)
            if not th.started:
                return self._start(th, rec, text)
            return [self._reply(th, note_reply(rec.playbook, text or th.incident.summary, rec.at))]
        th.records.append(rec)
        if not th.started:
            return []
        return [self._reply(th, record_reply(rec)), self._update(th)]

    def on_approval(self, incident_id: str, approval: ApprovalView) -> list[Outgoing]:
        """Take an approval asked for or decided; return the calls it causes.

        Another pod's approval in a fleet group is asked for in the group's thread.
        """
        th = self._hosting(incident_id) or self._threads.get(incident_id)
        if th is None:
            return []
        known = approval.approval_id in th.approvals
        th.approvals[approval.approval_id] = approval
        if not th.started:
            return []
        if approval.state == "pending" and not known:
            request = self._reply(th, approval_request_reply(approval))
            th.requests[approval.approval_id] = request.key
            return [request, self._update(th)]
        if approval.state == "pending":
            return []
        out = [self._reply(th, approval_decision_reply(approval))]
        target = th.requests.pop(approval.approval_id, None)
        if target is not None:
            # The request keeps its text; its buttons give way to the decision.
            out.append(self._rewrite(th, target, approval_request_reply(approval)))
        return [*out, self._update(th)]

    # ---- fleet groups ---------------------------------------------------------------------------
    def host_of(self, incident_id: str) -> str | None:
        """Return the incident whose thread tells this one's fleet group, if another's."""
        host_id = self._host.get(self._group_of.get(incident_id, "")) or self._told_by.get(
            incident_id
        )
        return host_id if host_id is not None and host_id != incident_id else None

    def _hosting(self, incident_id: str) -> _Thread | None:
        """Return the started thread of another incident that tells this one's group."""
        host_id = self.host_of(incident_id)
        host = self._threads.get(host_id) if host_id is not None else None
        return host if host is not None and host.started else None

    def _group_event(self, host: _Thread, event: IncidentEvent, g: FleetGroup) -> list[Outgoing]:
        """Update the host's root as a pod of its group opens, changes or resolves."""
        own = self._threads.get(event.incident_id)
        if event.event == "resolved" and own is not None and own is not host and not own.started:
            del self._threads[event.incident_id]
        if event.incident_id == host.incident.incident_id:
            if event.event == "resolved":
                # The host's own pod recovered while others have not: the thread goes on.
                host.incident = replace(host.incident, group=g)
            else:
                host.incident = event
                host.severity = severity(event, self.settings.severity)
            return [self._update(host)]
        if event.event == "updated":
            return []  # another pod's reading changed; the root tells the host's and the pods
        if event.event != "resolved" or _goes_on(event, g):
            return [self._update(host)]
        host.resolution = event
        out = [self._reply(host, resolution_reply(self._view(host)))]
        out.extend(self._chart(host, "resolved"))
        out.append(self._update(host))
        del self._threads[host.incident.incident_id]
        self._forget_group(event)
        return out

    def _member_record(self, host: _Thread, rec: ActionRecord) -> list[Outgoing]:
        """Reply in the host's thread with a member's record when it changed something.

        Its notifications are the host's thread itself, and a step skipped because the group
        or another incident already covers it says nothing the root does not.
        """
        if rec.action == "slack.post" or (rec.status == "skipped" and rec.guard in GROUP_GUARDS):
            return []
        host.records.append(rec)
        return [self._reply(host, record_reply(rec)), self._update(host)]

    def _forget_group(self, event: IncidentEvent) -> None:
        """Forget a group once its last pod resolved; its members' records route no more."""
        g = event.group
        if g is None or _goes_on(event, g):
            return
        self._groups.pop(g.id, None)
        host_id = self._host.pop(g.id, None)
        for incident_id in [i for i, gid in self._group_of.items() if gid == g.id]:
            del self._group_of[incident_id]
            if host_id is not None and incident_id != host_id:
                self._told_by[incident_id] = host_id
        while len(self._told_by) > MAX_TOLD:
            self._told_by.popitem(last=False)

    # ---- the calls ------------------------------------------------------------------------------
    def _start(self, th: _Thread, rec: ActionRecord, text: str) -> list[Outgoing]:
        s = self.settings
        group = th.incident.group
        if group is not None and group.id in self._groups:
            self._host[group.id] = th.incident.incident_id
        channel = rec.params.get("channel") if isinstance(rec.params.get("channel"), str) else None
        r = route(
            list(s.routes),
            th.incident.subject,
            th.severity,
            default_channel=s.channel,
            default_mentions=s.mentions,
            channel=channel,
        )
        th.channel, th.mentions, th.started = r.channel, r.mentions, True
        note = text.replace(th.incident.summary, "").strip()
        if note:
            th.notes.append((rec.playbook, note))
        meta = {"incident_id": th.incident.incident_id, **thread_identity(th.incident)}
        root = Outgoing(
            self._key(th, "root"),
            th.incident.incident_id,
            "post_root",
            th.channel,
            root_message(self._view(th), rec.at),
            metadata=meta,
        )
        out = [root]
        for a in th.approvals.values():
            if a.state == "pending":
                request = self._reply(th, approval_request_reply(a))
                th.requests[a.approval_id] = request.key
                out.append(request)
        out.extend(self._chart(th, "opened"))
        return out

    def _update(self, th: _Thread) -> Outgoing:
        at = th.resolution.at if th.resolution is not None else th.incident.at
        meta = {
            "incident_id": th.incident.incident_id,
            **thread_identity(th.incident),
            "state": "resolved" if th.resolution is not None else "open",
        }
        if th.adopted_root is not None:
            th.adopted_root = decided_root(th.adopted_root, th.approvals.values())
            message = th.adopted_root
        else:
            message = root_message(self._view(th), at)
        return Outgoing(
            self._key(th, "update"),
            th.incident.incident_id,
            "update_root",
            th.channel,
            message,
            metadata=meta,
        )

    def _rewrite(self, th: _Thread, target: str, message: Message) -> Outgoing:
        return Outgoing(
            self._key(th, "rewrite"),
            th.incident.incident_id,
            "update_reply",
            th.channel,
            message,
            metadata={"incident_id": th.incident.incident_id, "target": target},
        )

    def _reply(self, th: _Thread, message: Message) -> Outgoing:
        return Outgoing(
            self._key(th, "reply"),
            th.incident.incident_id,
            "reply",
            th.channel,
            message,
            metadata={"incident_id": th.incident.incident_id},
        )

    def _chart(self, th: _Thread, when: str) -> list[Outgoing]:
        """Return the chart's upload, queued behind what came before it in the thread."""
        if self.chart is None:
            return []
        made = self.chart(th.incident, list(th.records), when)
        if made is None:
            return []
        view = self._view(th)
        comment = chart_comment(view) + (" — how it ended" if when == "resolved" else "")
        return [
            Outgoing(
                self._key(th, "chart"),
                th.incident.incident_id,
                "upload",
                th.channel,
                Message(comment, []),
                file=made,
                metadata={"incident_id": th.incident.incident_id},
            )
        ]


def _goes_on(event: IncidentEvent, group: FleetGroup) -> bool:
    """Whether the group stays open after this transition: other pods' incidents are open."""
    return any(i != event.incident_id for i in group.incidents) or event.event != "resolved"


def decided_root(root: Message, approvals: Iterable[ApprovalView]) -> Message:
    """Return ``root`` with each decided approval's buttons replaced by its decision.

    Its line under "What was done" (``waits for approval by …``) says the decision too.
    """
    ended = [a for a in approvals if a.state != "pending"]
    decided = {f"approval:{a.approval_id}"[:255]: a for a in ended}
    blocks: list[dict[str, Any]] = []
    for block in root.blocks:
        a = decided.get(str(block.get("block_id", "")))
        if a is not None:
            blocks.extend(approval_blocks(a))
        elif block.get("block_id") == "done" and isinstance(block.get("text"), dict):
            text = str(block["text"].get("text", ""))
            blocks.append({**block, "text": {**block["text"], "text": _decided_lines(text, ended)}})
        else:
            blocks.append(block)
    return Message(root.text, blocks)


def _decided_lines(text: str, ended: list[ApprovalView]) -> str:
    lines = text.split("\n")
    for a in ended:
        waits = f"⏳ `{a.action}` — {a.what} — waits for approval"
        by = f" by {mention(a.decided_by)}" if a.decided_by else ""
        mark = {"approved": "👍", "rejected": "🛑"}.get(a.state, "⌛")
        lines = [
            f"{mark} `{a.action}` — {a.what} — {a.state}{by}" if x.startswith(waits) else x
            for x in lines
        ]
    return "\n".join(lines)


def key_seq(key: str) -> int:
    """Return the message number of a key (``<incident>:<seq>:<kind>``), 0 if it has none."""
    parts = key.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


def request_of(message: Message) -> str | None:
    """Return the approval id whose buttons a message carries, or None."""
    for block in message.blocks:
        block_id = str(block.get("block_id", ""))
        if block.get("type") == "actions" and block_id.startswith("approval:"):
            return block_id.removeprefix("approval:")
    return None


def short_key(key: str) -> str:
    """Return a short, stable digest of a message key (Slack metadata values stay small)."""
    return hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:16]


def with_channel(item: Outgoing, channel: str) -> Outgoing:
    """Return the item addressed to ``channel`` (the ID Slack answered with)."""
    return replace(item, channel=channel)
