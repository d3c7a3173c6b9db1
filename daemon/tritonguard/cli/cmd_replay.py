"""`tritonguard replay TRACE`: run the engine over a recorded trace, as fast as the CPU allows."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from tritonguard.core.chart_data import DEFAULT_CHART_MINUTES
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.fleet_groups import GROUP_GUARDS, FleetGroup, tells_group
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import Playbook
from tritonguard.core.replay import check_eval_interval, drive
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv, PlaybookExecutor
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS, load_playbook_files
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.sources.replay import TraceError
from tritonguard.sources.trace_stream import STREAM_MAX_SAMPLES, SpilledTrace, open_trace

if TYPE_CHECKING:
    from tritonguard.settings import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `replay` subcommand."""
    p = sub.add_parser(
        "replay", help="diagnose a recorded trace (JSON Lines or a readable timeline)"
    )
    p.add_argument("trace", help="OpenMetrics trace with timestamps (.om or .om.gz)")
    p.add_argument(
        "--playbooks",
        metavar="DIR",
        help="plan these playbooks' actions (dry-run); --format slack: default the shipped ones",
    )
    p.add_argument(
        "--format",
        choices=("json", "text", "slack"),
        default="text",
        help=(
            "text: a timeline; json: one incident transition a line; slack: one Slack call a "
            "line as the daemon would make it (method, channel, thread, text, blocks, files), "
            "notifications posted and every other step planned, without Slack or a token"
        ),
    )
    p.add_argument(
        "--eval-interval",
        type=float,
        default=1.0,
        metavar="S",
        help=(
            "evaluate at each scrape, at most every S seconds of trace time (default 1, as the "
            "daemon evaluates when a scrape arrives)"
        ),
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="daemon config (YAML/TOML): its engine thresholds, and for --format slack its routes",
    )
    p.add_argument(
        "--charts",
        metavar="DIR",
        help="--format slack: draw the threads' charts (PNG) here (default: a new temporary "
        "directory; none with slack.charts off in --config)",
    )
    p.add_argument(
        "--max-samples",
        type=int,
        default=STREAM_MAX_SAMPLES,
        metavar="N",
        help=(
            f"refuse a trace of more samples (default {STREAM_MAX_SAMPLES:,}: its spill takes "
            "20 bytes a sample of temporary disk, 5 GB; a day of 50 Triton pods of 20 models "
            "with their exporters is about 435 million)"
        ),
    )
    p.add_argument("--stats", action="store_true", help="print replay speed to stderr")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Replay a trace; exit 2 with a one-line reason on unreadable input.

    The trace streams from temporary time buckets (``trace_stream``), so its length costs
    disk, not memory; every problem with it is found before the first event is printed.
    """
    if args.max_samples < 1:
        print(
            f"tritonguard: --max-samples {args.max_samples}: must be a positive number of samples",
            file=sys.stderr,
        )
        return 2
    try:
        check_eval_interval(args.eval_interval)
    except ValueError:
        print(
            f"tritonguard: --eval-interval {args.eval_interval}: must be a positive number of "
            "seconds of trace time (e.g. 5)",
            file=sys.stderr,
        )
        return 2
    try:
        settings = _settings(args.config)
        config = EngineConfig(thresholds=settings.thresholds) if settings else EngineConfig()
        if args.format == "slack" and (settings is None or settings.slack.charts):
            # Its charts read as far back as the daemon's do.
            minutes = settings.slack.chart_minutes if settings else DEFAULT_CHART_MINUTES
            config = replace(config, history_s=minutes * 60.0)
        books = load_playbook_files([Path(args.playbooks)]) if args.playbooks else None
        if args.format == "slack" and books is None:
            # As the daemon does when no playbooks are configured.
            books = load_playbook_files([SHIPPED_PLAYBOOKS])
        trace = open_trace(args.trace, max_samples=args.max_samples)
    except (TraceError, ValueError) as exc:
        print(f"tritonguard: {exc}", file=sys.stderr)
        return 2
    with trace:
        if args.format == "slack":
            return asyncio.run(_replay_slack(args, trace, Engine(config), books or [], settings))
        return asyncio.run(_replay(args, trace, Engine(config), books))


def dry_run_stage(engine: Engine, books: list[Playbook], clock: list[float]) -> PlaybookStage:
    """Return the playbook stage as replay and ``tritonguard test`` run it: dry-run, in memory.

    ``clock`` holds the trace time; the stage reads it whenever it dates something.
    """
    env = ExecutorEnv(features=engine, clock=lambda: clock[0])
    return PlaybookStage(
        books,
        PlaybookExecutor(AuditStore(), env),
        settings=GuardSettings(dry_run=True),
        open_incidents=engine.announced_incidents,
    )


async def _replay(
    args: argparse.Namespace, trace: SpilledTrace, engine: Engine, books: list[Playbook] | None
) -> int:
    out = sys.stdout
    console = Console(file=out, highlight=False, soft_wrap=True)
    started = time.perf_counter()
    first_t = last_t = None
    count = 0
    clock = [0.0]
    stage = dry_run_stage(engine, books, clock) if books is not None else None
    try:
        for t, step in drive(engine, trace, eval_interval_s=args.eval_interval):
            first_t = t if first_t is None else first_t
            last_t = t
            clock[0] = t
            events = await _with_actions(engine, stage, step, t) if stage is not None else step
            count += len(events)
            if args.format == "json":
                for ev in events:
                    out.write(json.dumps(ev.as_dict(), sort_keys=True) + "\n")
            else:
                _print_batch(console, events, first_t)
    except ValueError as exc:
        print(f"tritonguard: {args.trace}: {exc}", file=sys.stderr)
        return 2
    finally:
        if stage is not None:
            stage.store.close()
    wall = time.perf_counter() - started
    if args.format == "text" and count == 0:
        console.print("No incidents: every model stayed within its baseline and SLOs.")
    if args.stats and first_t is not None and last_t is not None:
        span = last_t - first_t
        print(
            f"replayed {span:.0f} s of trace ({trace.samples} samples) in {wall:.2f} s: "
            f"{span / wall if wall > 0 else float('inf'):.0f} trace-seconds per wall-second",
            file=sys.stderr,
        )
    return 0


async def _with_actions(
    engine: Engine, stage: PlaybookStage, events: list[IncidentEvent], now: float
) -> list[IncidentEvent]:
    """Attach what the playbooks planned to each transition.

    Playbooks that became due between transitions (``held_for``) show as an 'updated' line of
    their open incident.
    """
    by_incident = await stage.run_step(events, now)
    for ev in events:
        ev.actions = [r.as_dict() for r in by_incident.pop(ev.incident_id, [])]
    due = []
    for inc in engine.open_incidents():
        records = by_incident.get(inc.incident_id)
        if records:
            inc.at = now
            inc.actions = [r.as_dict() for r in records]
            due.append(inc)
    return events + due


async def _replay_slack(
    args: argparse.Namespace,
    trace: SpilledTrace,
    engine: Engine,
    books: list[Playbook],
    settings: Settings | None,
) -> int:
    """Print each Slack call the daemon would make, one JSON object a line, as they happen."""
    from tritonguard.runtime.slack_preview import SlackPreview  # noqa: PLC0415 - slack format only
    from tritonguard.runtime.slack_threads import thread_settings  # noqa: PLC0415 - as above

    charts: Path | None = None
    if settings is None or settings.slack.charts:
        charts = Path(args.charts or tempfile.mkdtemp(prefix="tritonguard-replay-charts-"))
    preview = SlackPreview(
        engine,
        books,
        thread_settings(settings) if settings else None,
        charts_dir=charts,
        chart_minutes=settings.slack.chart_minutes if settings else DEFAULT_CHART_MINUTES,
    )
    out = sys.stdout
    try:
        for t, step in drive(engine, trace, eval_interval_s=args.eval_interval):
            for call in await preview.step(step, t):
                out.write(json.dumps(call, sort_keys=True, ensure_ascii=False) + "\n")
    except ValueError as exc:
        print(f"tritonguard: {args.trace}: {exc}", file=sys.stderr)
        return 2
    finally:
        preview.close()
    return 0


def _settings(path: str | None) -> Settings | None:
    if not path:
        return None
    from tritonguard.settings import SettingsError, load_settings  # noqa: PLC0415 - only when overriding

    try:
        return load_settings(Path(path))
    except SettingsError as exc:
        raise ValueError(str(exc)) from None


def _print_batch(console: Console, events: list[IncidentEvent], t0: float) -> None:
    """Print one evaluation's transitions, each fleet group as one story.

    The transitions that open and close a group are printed in full with its pods; the
    other pods joining or leaving it make one line per group, with what was done on them.
    """
    latest = {ev.group.id: ev.group for ev in events if ev.group is not None}
    members: dict[str, list[IncidentEvent]] = {}
    told: set[str] = set()
    for ev in events:
        g = ev.group
        if g is None or g.affected <= 1 or tells_group(ev):
            _print_text(console, ev, t0, latest.get(g.id) if g is not None else None)
            told.update([g.id] if g is not None else [])
        else:
            members.setdefault(g.id, []).append(ev)
    for gid, evs in members.items():
        _print_members(console, evs, latest[gid], t0, listed=gid in told)


def _print_members(
    console: Console, evs: list[IncidentEvent], g: FleetGroup, t0: float, *, listed: bool
) -> None:
    """Print pods joining or leaving a group (unless its story just listed them), and actions."""
    at = max(ev.at for ev in evs)
    stamp = datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")
    joined = [ev.subject.pod for ev in evs if ev.event == "opened" and not listed]
    left = [ev.subject.pod for ev in evs if ev.event == "resolved" and not listed]
    actions = [
        (ev.subject.pod, a)
        for ev in evs
        for a in ev.actions
        if not (a.get("status") == "skipped" and a.get("guard") in GROUP_GUARDS)
    ]
    parts = []
    if joined:
        parts.append(f"joined: {', '.join(joined)}")
    if left:
        parts.append(f"recovered: {', '.join(left)}")
    if not parts and not actions:
        return
    k = g.key
    console.print(
        f"[dim]{stamp} (+{at - t0:>5.0f}s)[/dim] [yellow]{'GROUP':8}[/yellow] "
        f"[bold]{k.cause}[/bold] model={k.model} {k.namespace} "
        f"{'; '.join(parts) or 'playbooks acted'} — now {g.scope()}"
    )
    for pod, a in actions:
        console.print(
            f"    action [{pod}]: {a.get('action')} {a.get('status')} {a.get('reason', '')}",
            markup=False,
        )


def _print_text(
    console: Console, ev: IncidentEvent, t0: float, group: FleetGroup | None = None
) -> None:
    stamp = datetime.fromtimestamp(ev.at, UTC).strftime("%H:%M:%S")
    offset = ev.at - t0
    colour = {"opened": "bold red", "updated": "yellow", "resolved": "green"}[ev.event]
    where = f"{ev.subject.namespace}/{ev.subject.pod}" if ev.subject.pod else ev.subject.namespace
    console.print(
        f"[dim]{stamp} (+{offset:>5.0f}s)[/dim] [{colour}]{ev.event.upper():8}[/{colour}] "
        f"[bold]{ev.cause}[/bold] model={ev.subject.model} {where} confidence={ev.confidence:.2f}"
    )
    console.print(f"    {ev.summary}")
    if group is not None and group.affected > 1:
        pods = group.pods_text() if group.open else f"all {group.affected} recovered"
        console.print(f"    pods ({group.scope()}, group {group.id}): {pods}", markup=False)
    if ev.change is not None and ev.event != "resolved":
        # rich markup off: config paths hold brackets (instance_group[0].count).
        console.print(f"    what changed: {ev.change.summary()}", markup=False)
    if ev.event == "opened":
        key = [
            f"{k}={v.value:.3g}{v.unit if v.unit in ('ms', 's') else ''}"
            for k, v in list(ev.evidence.items())[:8]
            if v.value is not None
        ]
        console.print(f"    [dim]evidence: {', '.join(key)}[/dim]")
        console.print(f"    fix: {ev.fix.text}")
        if ev.secondary:
            console.print(f"    also matching: {', '.join(ev.secondary)}")
    for a in ev.actions:
        console.print(f"    action: {a.get('action')} {a.get('status')} {a.get('reason', '')}")
