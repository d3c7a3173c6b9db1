"""The demo: real Tritons, the daemon watching them, faults injected in turn, shown live.

Every fault runs on its own local Triton from the lab, all baselines together, the onsets one
after another. One daemon (the same ``DaemonApp`` and playbook stage ``tritonguard run``
uses) scrapes every Triton, the lab exporters, the ingress counters and node-exporter. The
terminal shows each incident's Slack thread as the daemon posts it (no token: through the
console transport), the shipped playbooks acting on the lab's own servers (or, in dry-run,
planning), the verification's verdict, and latency before the fault, at the diagnosis and
after the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tritonguard.core.findings import CAUSES, IncidentEvent
from tritonguard.lab.demo_faults import DEFAULT_FAULTS, QUICK_FAULTS
from tritonguard.lab.demo_report import (
    action_line,
    before_after,
    fix_verdict,
    latency_text,
    should_cut,
)
from tritonguard.lab.demo_slack import TerminalSlack
from tritonguard.lab.live_lab import LabWatch, LiveScenario, Outcome, judge, latency_view, retimed
from tritonguard.lab.node_exporter import NodeExporter
from tritonguard.lab.scenarios import SCENARIOS

__all__ = ["DemoError", "DemoPlan", "action_line", "plan_demo", "run_demo"]


class DemoError(ValueError):
    """Bad demo options (one line, for the CLI)."""


# Acting: held_for (up to 60 s), the change, the verification's wait (up to 90 s) and a
# margin; the fault is cut as soon as the playbook has settled (``should_cut``).
ACT_FAULT_S = 240.0


@dataclass(frozen=True)
class DemoPlan:
    """Which faults, and the timing: shared baseline, onset spacing, longest fault phase."""

    faults: tuple[str, ...]
    baseline_s: float = 60.0
    stagger_s: float = 40.0
    fault_s: float = 70.0
    act: bool = True

    def total_s(self) -> float:
        """Upper bound of the run time after start-up."""
        return self.baseline_s + self.stagger_s * (len(self.faults) - 1) + self.fault_s


def plan_demo(
    only: Sequence[str] = (), *, quick: bool = False, act: bool = True, every: bool = False
) -> DemoPlan:
    """Return the demo plan for the options; raise DemoError naming the valid causes.

    ``every``: all nine causes. Acting keeps each fault on long enough for its playbook to
    change the server and verify the change.
    """
    unknown = [c for c in only if c not in CAUSES]
    if unknown:
        raise DemoError(f"unknown cause {unknown[0]!r}; choose from: {', '.join(CAUSES)}")
    if every and only:
        raise DemoError("--all and --only exclude each other: --all already runs every cause")
    if every:
        faults: tuple[str, ...] = CAUSES
    else:
        faults = tuple(dict.fromkeys(only)) or (QUICK_FAULTS if quick else DEFAULT_FAULTS)
    if quick:
        return DemoPlan(
            faults, baseline_s=52.0, stagger_s=30.0, fault_s=ACT_FAULT_S if act else 50.0, act=act
        )
    return DemoPlan(faults, fault_s=ACT_FAULT_S if act else 70.0, act=act)


@dataclass
class FaultView:
    """What the demo knows about one injected fault."""

    live: LiveScenario
    outcome: Outcome
    status: str = "baseline"
    before: dict[str, float | None] = field(default_factory=dict)
    at_diagnosis: dict[str, float | None] = field(default_factory=dict)
    after: dict[str, float | None] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)
    diagnosed_at: float | None = None
    finished: bool = False

    @property
    def detection(self) -> IncidentEvent | None:
        """The incident that diagnosed this fault, if any."""
        found = self.outcome.detections.get("scrape")
        return None if found is None else found.event


def _value(v: float | None) -> str:
    if v is None:
        return "unknown"
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"


def diagnosis_panel(view: FaultView, event: IncidentEvent) -> Panel:
    """Return a panel with the diagnosis: cause, confidence, summary, evidence and the fix.

    Shown only for an incident whose playbook opened no Slack thread (the root carries all
    of it otherwise).
    """
    onset = view.live.onset_at or event.at
    lines: list[RenderableType] = [
        Text(event.summary),
        Text(""),
        Text("evidence", style="bold"),
    ]
    for name, ev in list(event.evidence.items())[:8]:
        lines.append(
            Text(
                f"  {name} = {_value(ev.value)} {ev.unit}  ({ev.what}; {ev.window_s:.0f} s window)"
            )
        )
    lines += [Text(""), Text("fix", style="bold"), Text("  " + event.fix.text)]
    if event.fix.config_snippet:
        lines.append(Text("\n".join("    " + x for x in event.fix.config_snippet.splitlines())))
    if event.fix.flags:
        lines.append(Text("    " + event.fix.flags))
    title = (
        f"{event.cause} on {event.subject.namespace}/{event.subject.model} — confidence "
        f"{event.confidence:.2f}, {event.at - onset:.0f} s after the fault began"
    )
    return Panel(Group(*lines), title=title, title_align="left", border_style="red")


def status_table(views: Sequence[FaultView], started: float) -> Table:
    """Return the live status of every fault as a table."""
    table = Table(title=f"tritonguard demo — {time.time() - started:.0f} s", expand=False)
    for col in ("fault", "model", "state", "diagnosis", "before", "at diagnosis", "after"):
        table.add_column(col)
    for v in views:
        d = v.detection
        found = v.outcome.detections.get("scrape")
        diag = (
            "–"
            if d is None or found is None
            else f"{d.cause} ({d.confidence:.2f}, +{found.delay_s:.0f} s)"
        )
        table.add_row(
            v.live.name,
            f"{v.live.scenario.namespace}/{v.live.scenario.model}",
            v.status,
            diag,
            latency_text(v.before),
            latency_text(v.at_diagnosis),
            latency_text(v.after),
        )
    return table


class Demo:
    """Runs a plan and renders it; ``run()`` returns 0 when every fault was diagnosed."""

    def __init__(self, plan: DemoPlan, console: Console) -> None:
        self.plan = plan
        self.console = console
        self.views: list[FaultView] = []
        self.watch: LabWatch | None = None
        self.slack = TerminalSlack(self.say)
        self.started = time.time()
        # Kept after the run: the charts the threads point to, and the audit trail.
        self.state_dir = Path(tempfile.mkdtemp(prefix="tritonguard-demo-"))

    def say(self, message: RenderableType) -> None:
        """Print above the live table (or as a plain line without a terminal)."""
        self.console.print(message)

    def _latency(self, view: FaultView) -> dict[str, float | None]:
        if self.watch is None or self.watch.app is None:
            return {}
        return latency_view(self.watch.app.engine, view.live.subject, time.time())

    async def on_events(self, way: str, events: list[IncidentEvent]) -> None:
        """Judge each transition against the faults and say when one is diagnosed."""
        for view in self.views:
            had = view.detection is not None
            view.outcome.onset_at = view.live.onset_at
            seen = len(view.outcome.other.get(way, []))
            judge(view.outcome, way, events)
            for other in view.outcome.other.get(way, [])[seen:]:
                self.say(
                    f"[yellow]{other.event} {other.cause} on {other.subject.model}[/] "
                    f"(not the injected fault): {other.summary}"
                )
            event = view.detection
            if event is not None and not had:
                view.status = "diagnosed"
                view.diagnosed_at = time.time()
                view.at_diagnosis = self._latency(view)
                onset = view.live.onset_at or event.at
                self.say(
                    f"[bold]{time.time() - self.started:5.0f} s[/]  [bold red]diagnosed[/] "
                    f"{event.cause} on {event.subject.namespace}/{event.subject.model} "
                    f"(confidence {event.confidence:.2f}, {event.at - onset:.0f} s after the "
                    "onset); its playbook posts the thread when its when.held_for is over"
                )

    def _refresh(self) -> None:
        now = time.time()
        for view in self.views:
            live = view.live
            if view.status == "baseline" and live.onset_at is not None:
                view.status = "fault injected"
                view.before = self._latency(view)
                self.say(
                    f"[bold]{now - self.started:5.0f} s[/]  fault injected: {live.name} on "
                    f"{live.scenario.namespace}/{live.scenario.model} — {live.scenario.notes}"
                )
            event = view.detection
            if event is not None and self.watch is not None:
                records = self.watch.actions(event.incident_id)
                for record in records[len(view.actions) :]:
                    # The thread shows every step's result; a skip happens before it opens.
                    if record.get("status") == "skipped":
                        self.say(action_line(record))
                view.actions = records
                if records and not view.finished:
                    view.status = fix_verdict(records, busy=self._busy(view))
            self._maybe_cut(view, now)

    def _busy(self, view: FaultView) -> bool:
        service = self.watch.service if self.watch is not None else None
        return service is not None and view.live.subject.key() in service.stage.busy()

    def _maybe_cut(self, view: FaultView, now: float) -> None:
        if view.live.ended_at is not None or view.live.onset_at is None:
            return
        if should_cut(
            view.actions,
            busy=self._busy(view),
            now=now,
            onset_at=view.live.onset_at,
            diagnosed_at=view.diagnosed_at,
        ):
            # Measured while the load still runs: after the fix, or the fault as it stands.
            view.after = self._latency(view)
            view.live.cut()

    def _finish(self, view: FaultView) -> None:
        if view.finished:
            return
        view.finished = True
        if not view.after:
            view.after = self._latency(view)
        event = view.detection
        if event is not None and event.incident_id not in self.slack.threads:
            self.say(diagnosis_panel(view, event))
        verdict = fix_verdict(view.actions) if event is not None else "NOT diagnosed"
        view.status = verdict if event is not None else "missed"
        self.say(
            f"[bold]{time.time() - self.started:5.0f} s[/]  "
            + before_after(view.live.name, view.before, view.at_diagnosis, view.after, view.actions)
        )

    async def run(self) -> int:
        """Start everything, inject the faults in turn, stop everything; 0 if all diagnosed."""
        plan = self.plan
        node = NodeExporter() if NodeExporter.available() else None
        lives = [
            LiveScenario(
                retimed(SCENARIOS[name], plan.baseline_s + i * plan.stagger_s, plan.fault_s)
            )
            for i, name in enumerate(plan.faults)
        ]
        self.views = [
            FaultView(live, Outcome(live.name, live.scenario.cause, *_where(live)))
            for live in lives
        ]
        mode = (
            "the shipped playbooks act on the demo's own servers"
            if plan.act
            else "playbooks plan only (--dry-run)"
        )
        self.say(
            f"[bold]tritonguard demo[/]: {len(lives)} fault(s) ({', '.join(plan.faults)}), "
            f"{mode}; at most {plan.total_s() / 60:.0f} min. No Slack token: each thread is "
            "shown here as Slack would show it. Ctrl-C stops everything."
        )
        drives: list[asyncio.Task[None]] = []
        try:
            if node is not None:
                await asyncio.to_thread(node.start)
            for live in lives:
                self.say(f"starting a Triton for {live.name} ({live.scenario.model}) ...")
                await live.start()
            self.watch = LabWatch(
                "scrape",
                lives,
                node=node,
                hook=self.on_events,
                playbooks=True,
                act=plan.act,
                slack=self.slack,
                keep_in=self.state_dir,
            )
            await self.watch.start()
            self.started = time.time()
            self.say(
                f"daemon watching {len(lives)} Triton(s); {plan.baseline_s:.0f} s of healthy "
                "traffic first, so it learns each model's own baseline"
            )
            drives = [asyncio.create_task(live.drive()) for live in lives]
            await self._loop(drives)
        finally:
            for task in drives:
                task.cancel()
            await asyncio.gather(*drives, return_exceptions=True)
            if self.watch is not None:
                await self.watch.stop()
            for live in lives:
                await live.stop()
            if node is not None:
                node.stop()
        self.say(status_table(self.views, self.started))
        self.say(
            f"The daemon's audit trail and incident charts are kept in {self.state_dir} "
            f"(tritonguard incidents --audit-db {self.state_dir / 'audit.sqlite3'})"
        )
        return 0 if all(v.detection is not None for v in self.views) else 1

    async def _loop(self, drives: list[asyncio.Task[None]]) -> None:
        live_ctx: contextlib.AbstractContextManager[Any]
        if self.console.is_terminal:
            live_ctx = Live(
                status_table(self.views, self.started),
                console=self.console,
                refresh_per_second=2,
                transient=True,
            )
        else:
            live_ctx = contextlib.nullcontext()
        with live_ctx as live:
            while not all(task.done() for task in drives):
                self._refresh()
                for view, task in zip(self.views, drives, strict=True):
                    if task.done():
                        self._finish(view)
                if live is not None:
                    live.update(status_table(self.views, self.started))
                await asyncio.wait(drives, timeout=1.0)
            self._refresh()
            for view in self.views:
                self._finish(view)


def _where(live: LiveScenario) -> tuple[str, str]:
    return live.scenario.namespace, live.scenario.model


async def run_demo(plan: DemoPlan, console: Console | None = None) -> int:
    """Run the demo; return 0 when every injected fault was diagnosed, 1 otherwise."""
    return await Demo(plan, console or Console()).run()
