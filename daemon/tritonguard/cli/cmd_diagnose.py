"""`tritonguard diagnose URL`: watch a live Triton for a while and explain its latency."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console
from rich.table import Table

from tritonguard.core.engine import Diagnosis, Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.unexplained import missing_sources
from tritonguard.settings import TargetSettings

if TYPE_CHECKING:
    from tritonguard.clients.triton_api import TritonClient


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `diagnose` subcommand."""
    p = sub.add_parser("diagnose", help="one-shot live diagnosis of a Triton server")
    p.add_argument("url", help="Triton metrics URL (http://host:8002/metrics) or host:port")
    p.add_argument(
        "--duration", default="60s", help="how long to watch (e.g. 60s, 2m); default 60s"
    )
    p.add_argument(
        "--interval", type=float, default=2.0, metavar="S", help="scrape every S seconds"
    )
    p.add_argument("--triton-url", help="HTTP API base (default: same host, port 8000)")
    p.add_argument(
        "--exporter",
        action="append",
        default=[],
        metavar="URL",
        help="extra /metrics endpoint (DCGM, cAdvisor, node-exporter); repeatable",
    )
    p.add_argument("--namespace", default="", help="namespace label for the target")
    p.add_argument("--pod", default="", help="pod label for the target")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(handler=run)


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '2m' or '1h'."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError:
        raise ValueError(f"bad duration {text!r}; use e.g. 60s, 2m") from None


def _metrics_url(url: str) -> str:
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _api_url(metrics_url: str) -> str:
    parts = urlsplit(metrics_url)
    host = parts.hostname or "127.0.0.1"
    return f"{parts.scheme}://{host}:8000"


def run(args: argparse.Namespace) -> int:
    """Watch, then print the breakdown, findings and fixes; exit 2 on bad arguments."""
    try:
        duration = parse_duration(args.duration)
        metrics = _metrics_url(args.url)
        targets = [
            TargetSettings(
                name="triton",
                metrics_url=metrics,
                triton_url=args.triton_url or _api_url(metrics),
                namespace=args.namespace,
                pod=args.pod,
            )
        ]
        for i, url in enumerate(args.exporter):
            targets.append(
                TargetSettings(
                    name=f"exporter{i}",
                    metrics_url=_metrics_url(url),
                    namespace=args.namespace,
                    pod=args.pod,
                    honor_labels=True,
                )
            )
    except ValueError as exc:
        print(f"tritonguard: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    # The HTTP clients (aiohttp) load only here, so the other subcommands start quickly.
    from tritonguard.clients.triton_api import TritonError  # noqa: PLC0415 - the HTTP clients load only for this command

    try:
        engine, events, scrapes_ok = asyncio.run(_watch(targets, duration, args.interval))
    except TritonError as exc:
        print(f"tritonguard: {exc}", file=sys.stderr)
        return 2
    if scrapes_ok == 0:
        print(
            f"tritonguard: {metrics}: no successful scrape in {duration:.0f} s; is Triton's "
            "metrics port reachable (--metrics-port, --allow-metrics)?",
            file=sys.stderr,
        )
        return 2
    if args.format == "json":
        report = [_diag_json(d) for d in engine.last_diagnoses.values()]
        print(json.dumps({"models": report, "events": [e.as_dict() for e in events]}, indent=2))
    else:
        _print_report(Console(highlight=False), engine, events)
    return 0


async def _watch(
    targets: list[TargetSettings], duration: float, interval: float
) -> tuple[Engine, list[IncidentEvent], int]:
    from tritonguard.clients.metrics_scraper import MetricsScraper  # noqa: PLC0415 - the HTTP clients load only for this command
    from tritonguard.clients.triton_api import TritonClient  # noqa: PLC0415 - the HTTP clients load only for this command
    from tritonguard.sources.scrape import ScrapeSource  # noqa: PLC0415 - the HTTP clients load only for this command

    engine = Engine()
    source = ScrapeSource(
        targets, MetricsScraper(timeout_s=min(5.0, interval * 2)), interval_s=interval
    )
    triton = targets[0]
    client = TritonClient(triton.triton_url or "", timeout_s=3.0) if triton.triton_url else None
    seen: set[str] = set()
    events: list[IncidentEvent] = []
    ok = 0
    deadline = time.monotonic() + duration
    try:
        while True:
            result = await source.poll()
            ok += sum(1 for s in result.statuses if s.ok and s.target == "triton")
            now = time.time()
            engine.ingest(result.samples, now)
            if client is not None:
                await _learn_configs(engine, client, seen, triton)
            events.extend(engine.evaluate(now))
            if engine.configs_wanted:
                # A shifting model's reading waits for its config, as in the daemon.
                await _answer_asks(engine, client)
                events.extend(engine.evaluate(now))
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(interval)
    finally:
        await source.close()
        if client is not None:
            await client.close()
    return engine, events, ok


async def _learn_configs(
    engine: Engine, client: TritonClient, seen: set[str], t: TargetSettings
) -> None:
    from tritonguard.clients.triton_api import TritonError  # noqa: PLC0415 - the HTTP clients load only for this command

    models = {s.model for s in (subj.subject for subj in engine.last_diagnoses.values())}
    models |= {
        v
        for s in engine.store.family("nv_inference_request_success")
        for k, v in s.labels
        if k == "model"
    }
    for model in sorted(models - seen):
        seen.add(model)
        try:
            config = await client.model_config(model)
        except TritonError:
            continue  # the config is a refinement; the diagnosis stands without it
        engine.note_model_config(Subject(t.namespace, model, t.identity[1]), config)


async def _answer_asks(engine: Engine, client: TritonClient | None) -> None:
    """Read the configs the engine asked for; tell it of each that did not come."""
    from tritonguard.clients.triton_api import TritonError  # noqa: PLC0415 - the HTTP clients load only for this command

    for subject in engine.configs_wanted:
        config = None
        if client is not None:
            with contextlib.suppress(TritonError):
                config = await client.model_config(subject.model)
        if config is None:
            engine.config_unanswered(subject)
        else:
            engine.note_model_config(subject, config)


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v / 1000:.1f}"


def _print_report(console: Console, engine: Engine, events: list[IncidentEvent]) -> None:
    table = Table(title="Where request time goes (current window)")
    for col in (
        "model",
        "req/s",
        "mean ms",
        "p99 ms",
        "queue ms",
        "queue %",
        "input ms",
        "infer ms",
        "output ms",
        "batch",
        "busy inst.",
    ):
        table.add_column(col, justify="right" if col != "model" else "left")
    diags = sorted(engine.last_diagnoses.values(), key=lambda d: d.subject.key())
    for d in diags:
        f = d.features
        table.add_row(
            d.subject.model,
            "—" if f.request_rate is None else f"{f.request_rate:.1f}",
            _ms(f.mean_latency_us),
            _ms(f.p99_us),
            _ms(f.mean_queue_us),
            "—" if f.queue_share is None else f"{f.queue_share:.0%}",
            _ms(f.compute_input_us),
            _ms(f.compute_infer_us),
            _ms(f.compute_output_us),
            "—" if f.avg_batch is None else f"{f.avg_batch:.1f}",
            "—" if f.busy_instances is None else f"{f.busy_instances:.2f}",
        )
    console.print(table)
    if not diags:
        console.print("No model served requests while watching; send traffic and diagnose again.")
    for d in diags:
        if d.symptom_reasons:
            console.print(
                f"[bold]{d.subject.model}[/bold]: latency is up — {', '.join(d.symptom_reasons)}"
            )
        if d.baseline is None:
            console.print(
                f"[dim]{d.subject.model}: no healthy baseline yet; findings rely on SLOs and "
                "absolute signs (watch longer for a baseline).[/dim]"
            )
        for finding in sorted(d.findings, key=lambda x: -x.confidence):
            console.print(
                f"  [bold red]{finding.cause}[/bold red] (confidence {finding.confidence:.2f}): "
                f"{finding.summary}"
            )
            console.print(f"    fix: {finding.fix.text}")
            if finding.fix.config_snippet:
                console.print("    " + finding.fix.config_snippet.replace("\n", "\n    "))
            if finding.fix.flags:
                console.print(f"    flags: {finding.fix.flags}")
        if not d.findings and not d.symptom_reasons:
            console.print(f"{d.subject.model}: healthy — no cause signature holds.")
        elif not d.findings or d.unexplained is not None:
            # Latency is up and nothing is named: say what could not be seen, not nothing.
            # Findings under the opening confidence may be listed above: none holds as a cause.
            console.print(
                "  no cause signature holds"
                + (
                    f" (latency up for {d.unexplained.evaluations} evaluations)"
                    if d.unexplained is not None
                    else ""
                )
                + "; the engine abstains rather than guess."
            )
            for source, shows in missing_sources(d.features):
                console.print(f"    not read: {source} — {shows}")
    for ev in events:
        console.print(f"[dim]incident {ev.event}: {ev.cause} on {ev.subject.model}[/dim]")


def _diag_json(d: Diagnosis) -> dict[str, object]:
    return {
        "namespace": d.subject.namespace,
        "pod": d.subject.pod,
        "model": d.subject.model,
        "features": d.features.as_dict(),
        "symptom": list(d.symptom_reasons),
        "findings": [
            {
                "cause": f.cause,
                "confidence": f.confidence,
                "summary": f.summary,
                "fix": f.fix.as_dict(),
                "evidence": {k: v.as_dict() for k, v in f.evidence.items()},
            }
            for f in d.findings
        ],
        "unexplained": None
        if d.unexplained is None
        else {"since": d.unexplained.since, "evaluations": d.unexplained.evaluations},
        "missing_sources": [
            {"source": source, "shows": shows} for source, shows in missing_sources(d.features)
        ],
    }
