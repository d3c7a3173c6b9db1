"""`tritonguard run`: the daemon (targets, discovered pods, Prometheus), or one cycle with --once."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from tritonguard.core.engine import Engine
from tritonguard.core.playbook_model import PlaybookError
from tritonguard.logs import configure_logging
from tritonguard.settings import Settings, SettingsError, load_settings, target_from_url

if TYPE_CHECKING:
    from tritonguard.runtime.playbook_service import PlaybookService

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `run` subcommand."""
    p = sub.add_parser(
        "run",
        help="run the daemon",
        description=(
            "Watch Triton servers, diagnose incidents, serve /healthz /readyz /metrics. "
            "Settings come from --config (YAML or TOML; or $TRITONGUARD_CONFIG), "
            "TRITONGUARD_* environment variables, then these flags."
        ),
    )
    p.add_argument("--config", metavar="FILE", help="YAML or TOML settings file")
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="URL",
        help="Triton /metrics URL to scrape (repeatable; adds to the config's targets)",
    )
    p.add_argument("--prometheus", metavar="URL", help="read metrics from this Prometheus")
    p.add_argument("--listen", metavar="HOST:PORT", help="HTTP address (default 0.0.0.0:9108)")
    p.add_argument(
        "--once",
        action="store_true",
        help="poll every source once, evaluate, print events as JSON lines, and exit "
        "(0 when every target answered, 1 otherwise)",
    )
    p.set_defaults(handler=run)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Load settings and apply the command-line overrides; raise SettingsError on bad input."""
    base = load_settings(args.config)
    overrides: dict[str, Any] = {}
    if args.target:
        extra = [target_from_url(url) for url in args.target]
        overrides["targets"] = [t.model_dump() for t in [*base.targets, *extra]]
    if args.prometheus:
        overrides["prometheus_url"] = args.prometheus
    if args.listen:
        overrides["listen"] = args.listen
    if not overrides:
        return base
    return load_settings(args.config, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM/SIGINT (or one cycle with --once)."""
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        print(f"tritonguard: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.once:
        configure_logging("console", settings.log_level)
        return asyncio.run(_once(settings))
    configure_logging("json", settings.log_level)
    return asyncio.run(_serve(settings))


def start_playbooks(settings: Settings, engine: Engine) -> PlaybookService | str:
    """Build the playbook stage, or return a one-line reason it cannot start."""
    # The runtime (aiohttp, Kubernetes and Slack SDKs) loads only when the daemon runs, so the
    # other subcommands start quickly.
    from tritonguard.runtime.playbook_service import build_service  # noqa: PLC0415 - as above

    try:
        return build_service(settings, engine)
    except PlaybookError as exc:
        more = len(exc.problems) - 1
        tail = f" (and {more} more; run tritonguard validate on the playbooks)" if more else ""
        return f"{exc.problems[0]}{tail}"
    except OSError as exc:
        return f"{settings.audit_db_path}: {exc}; check audit_db_path"


async def _serve(settings: Settings) -> int:
    from tritonguard.runtime.daemon_app import DaemonApp  # noqa: PLC0415 - only the daemon needs it

    engine = Engine(settings.engine_config())
    service = start_playbooks(settings, engine)
    if isinstance(service, str):
        print(f"tritonguard: {service}", file=sys.stderr)
        return EXIT_BAD_INPUT
    app = DaemonApp(settings, engine=engine, playbooks=service, on_targets=service.use_targets)
    service.on_change = app.refresh_model_configs
    await app.run()
    return EXIT_OK


async def _once(settings: Settings) -> int:
    from tritonguard.runtime.daemon_app import DaemonApp  # noqa: PLC0415 - only the daemon needs it

    app = DaemonApp(settings)
    if not app.sources:
        print(
            "tritonguard: nothing to watch; give --target, --prometheus or a config",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    events, statuses = await app.run_once()
    for event in events:
        print(json.dumps(event.as_dict(), sort_keys=True))
    for status in statuses:
        state = "ok" if status.ok else f"error: {status.error}"
        print(
            f"{status.source}/{status.target}: {status.samples} samples, {state}", file=sys.stderr
        )
    return EXIT_OK if statuses and all(s.ok for s in statuses) else EXIT_FAIL
