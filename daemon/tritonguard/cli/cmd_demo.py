"""`tritonguard demo`: local Tritons, the daemon watching them, faults injected in turn, live."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from tritonguard.core.findings import CAUSES
from tritonguard.lab.demo_faults import DEFAULT_FAULTS, QUICK_FAULTS
from tritonguard.logs import configure_logging

if TYPE_CHECKING:
    from rich.console import Console

    from tritonguard.lab.demo import DemoPlan

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `demo` subcommand."""
    p = sub.add_parser(
        "demo",
        help="inject faults into local Tritons and watch the daemon diagnose and fix them",
        description=(
            "Start a real local Triton per fault (the lab), run the daemon against them, inject "
            f"faults in turn (default: {', '.join(DEFAULT_FAULTS)}; --all: all nine) and show "
            "live each incident's Slack thread as it would appear, the shipped playbooks "
            "fixing the demo's own servers, the verification, and latency before and after. "
            "Exit 0 when every fault was diagnosed, 1 otherwise."
        ),
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="CAUSE",
        choices=CAUSES,
        help="inject only this cause (repeatable); one of: " + ", ".join(CAUSES),
    )
    which.add_argument("--all", action="store_true", help="inject all nine causes in turn")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"shorter run: {', '.join(QUICK_FAULTS)} with shorter phases",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="let the playbooks plan only; by default they act, since the servers are the demo's",
    )
    # Acting became the default; the old switch still works and changes nothing.
    mode.add_argument("--act", action="store_true", help="act on the lab servers (the default)")
    p.set_defaults(handler=run)


def demo_plan(args: argparse.Namespace) -> DemoPlan:
    """Return the plan the parsed options ask for (raises DemoError)."""
    from tritonguard.lab.demo import plan_demo  # noqa: PLC0415 - the lab loads only for the demo

    return plan_demo(args.only, quick=args.quick, act=not args.dry_run, every=args.all)


def run(args: argparse.Namespace) -> int:
    """Run the demo; Ctrl-C stops every server and process it started."""
    # The lab (load generator, Triton launcher, rich live views) loads only for the demo, so
    # `replay`, `validate` and `test` in a playbook author's CI start quickly.
    from rich.console import Console  # noqa: PLC0415 - the lab loads only for the demo

    try:
        from tritonguard.lab.demo import DemoError  # noqa: PLC0415 - as above
        from tritonguard.lab.triton_server import (  # noqa: PLC0415 - as above
            TritonServerError,
            pytriton_root,
        )
    except ModuleNotFoundError as exc:
        # The daemon image installs the wheel without the `lab` extra.
        print(
            f"tritonguard demo: the fault lab needs {(exc.name or '').split('.')[0]!r}, which is not installed; "
            "install the lab extra: pip install 'tritonguard[lab]'",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT

    console = Console()
    try:
        plan = demo_plan(args)
        pytriton_root()
    except (DemoError, TritonServerError) as exc:
        print(f"tritonguard demo: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # The demo shows the daemon's conclusions itself; only its problems go to the log.
    configure_logging("console", "error")
    try:
        return asyncio.run(_demo(plan, console))
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("interrupted: every server and process the demo started is stopped")
        return EXIT_INTERRUPTED
    except TritonServerError as exc:
        print(f"tritonguard demo: {exc}", file=sys.stderr)
        return EXIT_FAIL


async def _demo(plan: DemoPlan, console: Console) -> int:
    from tritonguard.lab.demo import run_demo  # noqa: PLC0415 - the lab loads only for the demo

    # SIGTERM (a CI job cancelled, `timeout`) stops the demo as cleanly as Ctrl-C does.
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await run_demo(plan, console)
