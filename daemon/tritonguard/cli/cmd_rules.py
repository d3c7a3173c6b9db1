"""`tritonguard rules export`: the engine's features and causes as Prometheus rules."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tritonguard.core.playbook_model import parse_duration
from tritonguard.core.rules_export import prometheus_rule, render_yaml, rule_file, rule_group
from tritonguard.core.thresholds import Thresholds

EXIT_OK, EXIT_BAD_INPUT = 0, 2
# The daemon's own default (settings.scrape_interval_s): the interval Tritons are scraped at.
DEFAULT_SCRAPE_INTERVAL = "15s"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `rules` subcommand and its `export` action."""
    p = sub.add_parser(
        "rules", help="the engine as Prometheus recording and alerting rules (fleet-wide)"
    )
    actions = p.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    e = actions.add_parser(
        "export",
        help="print the rules: a PrometheusRule manifest, or a plain rule file",
        description=(
            "Compile every feature into a recording rule per (namespace, pod, model) and the "
            "nine causes into alerts labelled cause=<id>, with the engine's thresholds (a "
            "config's `thresholds:` overrides apply) and its hold as `for:`."
        ),
    )
    e.add_argument(
        "--format",
        choices=("prometheus-rule", "rule-file"),
        default="prometheus-rule",
        help="a monitoring.coreos.com/v1 PrometheusRule (default) or a Prometheus rule file",
    )
    e.add_argument(
        "--scrape-interval",
        default=DEFAULT_SCRAPE_INTERVAL,
        metavar="DURATION",
        help=(
            "how often Prometheus scrapes the Tritons (default 15s); the rules are evaluated "
            "as often, and their windows and holds follow from it as the engine's do"
        ),
    )
    e.add_argument("--config", metavar="FILE", help="tritonguard config whose thresholds to use")
    e.add_argument("--name", default="tritonguard", help="the PrometheusRule's name")
    e.add_argument("--namespace", help="the PrometheusRule's namespace")
    e.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label on the PrometheusRule (e.g. release=prometheus, for its ruleSelector)",
    )
    e.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    e.set_defaults(handler=run_export)


def _thresholds(path: str | None) -> Thresholds:
    if not path:
        return Thresholds()
    from tritonguard.settings import SettingsError, load_settings  # noqa: PLC0415 - only when overriding

    try:
        return load_settings(Path(path)).thresholds
    except SettingsError as exc:
        raise ValueError(str(exc)) from None


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--label {pair!r}: write KEY=VALUE, e.g. release=prometheus")
        out[key] = value
    return out


def run_export(args: argparse.Namespace) -> int:
    """Print (or write) the rules; exit 2 with a one-line reason on bad input."""
    try:
        interval = parse_duration(args.scrape_interval)
        if interval <= 0:
            raise ValueError(f"{args.scrape_interval!r} is not a scrape interval; write e.g. 15s")
        thresholds = _thresholds(args.config)
        labels = _labels(args.label)
    except ValueError as exc:
        print(f"tritonguard: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    groups = [rule_group(thresholds, interval)]
    document = (
        rule_file(groups)
        if args.format == "rule-file"
        else prometheus_rule(groups, name=args.name, namespace=args.namespace, labels=labels)
    )
    text = render_yaml(document)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(
                f"tritonguard: {args.output}: cannot write: {exc.strerror or exc}", file=sys.stderr
            )
            return EXIT_BAD_INPUT
    else:
        sys.stdout.write(text)
    return EXIT_OK
