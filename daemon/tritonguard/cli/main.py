"""The `tritonguard` command: parses arguments and dispatches to one subcommand module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tritonguard import __version__
from tritonguard.cli import (
    cmd_demo,
    cmd_diagnose,
    cmd_incidents,
    cmd_playbooks,
    cmd_replay,
    cmd_rules,
    cmd_run,
    cmd_thresholds,
)

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="tritonguard",
        description="Diagnose Triton tail-latency explosions; run guarded playbooks.",
    )
    parser.add_argument("--version", action="version", version=f"tritonguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cmd_replay.register(sub)
    cmd_diagnose.register(sub)
    cmd_run.register(sub)
    cmd_playbooks.register(sub)
    cmd_incidents.register(sub)
    cmd_thresholds.register(sub)
    cmd_rules.register(sub)
    cmd_demo.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
