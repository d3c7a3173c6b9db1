"""`tritonguard thresholds`: every engine threshold, its default and why it has that value."""

from __future__ import annotations

import argparse
import json
import sys

from tritonguard.core.thresholds import Thresholds

EXIT_OK = 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `thresholds` subcommand."""
    p = sub.add_parser(
        "thresholds", help="list the engine's thresholds (override them under `thresholds:`)"
    )
    p.add_argument("--format", choices=("markdown", "yaml"), default="markdown")
    p.set_defaults(handler=run)


def markdown() -> str:
    """Return the thresholds as a Markdown table (docs/detection.md embeds it)."""
    rows = ["| threshold | default | why |", "|---|---|---|"]
    for name, field in Thresholds.model_fields.items():
        why = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {json.dumps(field.default)} | {why} |")
    return "\n".join(rows) + "\n"


def yaml_overrides() -> str:
    """Return a commented config fragment with every threshold at its default."""
    out = ["thresholds:"]
    for name, field in Thresholds.model_fields.items():
        out.append(f"  # {field.description}")
        out.append(f"  {name}: {json.dumps(field.default)}")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print the table or the config fragment."""
    sys.stdout.write(markdown() if args.format == "markdown" else yaml_overrides())
    return EXIT_OK
