"""`tritonguard demo`: its options, the thread drawn in the terminal, the fix's closing line.

The live run (real Tritons) is not part of the suite; these pin its pieces without servers.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tritonguard.cli.cmd_demo import demo_plan
from tritonguard.cli.main import build_parser
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.engine import Engine
from tritonguard.core.findings import CAUSES, IncidentEvent
from tritonguard.core.replay import drive
from tritonguard.lab.demo_faults import DEFAULT_FAULTS, QUICK_FAULTS
from tritonguard.lab.demo_report import (
    PLAYBOOK_WAIT_S,
    VERIFY_GRACE_S,
    before_after,
    fix_verdict,
    should_cut,
)
from tritonguard.lab.demo_slack import TerminalSlack, root_changes
from tritonguard.runtime.playbook_files import SHIPPED_PLAYBOOKS, load_playbook_files
from tritonguard.runtime.slack_preview import SlackPreview
from tritonguard.sources.trace_stream import open_trace

RECORDED = Path(__file__).parent.parent / "fixtures" / "traces"


def test_demo_without_the_lab_extra_says_what_to_install() -> None:
    """Without tritonclient (the image installs no `lab` extra), one line and exit 2, no traceback."""
    probe = (
        "import sys; sys.modules['tritonclient'] = None; "
        "from tritonguard.cli.main import main; sys.exit(main(['demo', '--quick']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "tritonguard demo: the fault lab needs 'tritonclient', which is not installed; "
        "install the lab extra: pip install 'tritonguard[lab]'"
    ]


def _demo_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["demo", *argv])


def test_the_demo_acts_by_default_and_dry_run_plans_only() -> None:
    """Acting is the default, long enough to verify; --dry-run plans; --act is the default spelt out."""
    acting = demo_plan(_demo_args())
    assert acting.act and acting.faults == DEFAULT_FAULTS
    assert acting.fault_s >= 60 + 90  # held_for and the longest verify wait fit in the phase
    assert demo_plan(_demo_args("--act")) == acting
    planning = demo_plan(_demo_args("--dry-run", "--quick"))
    assert not planning.act and planning.faults == QUICK_FAULTS


def test_all_runs_every_cause_and_excludes_only(capsys: pytest.CaptureFixture[str]) -> None:
    """--all injects the nine causes; with --only, or --act with --dry-run, argparse says no."""
    assert demo_plan(_demo_args("--all")).faults == CAUSES
    assert demo_plan(_demo_args("--only", "retry_storm")).faults == ("retry_storm",)
    for argv in (["--all", "--only", "retry_storm"], ["--act", "--dry-run"]):
        with pytest.raises(SystemExit) as exc:
            _demo_args(*argv)
        assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_thread_from_the_planner_is_drawn_in_the_terminal(tmp_path: Path) -> None:
    """A recorded incident's thread, through the daemon's planner and outbox, reads as in Slack.

    The root comes first with the diagnosis, the chart follows with its comment and the PNG's
    path, each step's result follows as a reply, and the root's update in place shows only
    the lines that changed.
    """
    console = Console(record=True, width=200, color_system=None)
    slack = TerminalSlack(console.print)
    engine = Engine()
    png = tmp_path / "chart.png"

    def chart(event: IncidentEvent, records: list[ActionRecord], when: str) -> dict[str, str]:
        return {"path": str(png), "filename": png.name, "title": f"{event.cause} {when}"}

    preview = SlackPreview(
        engine, load_playbook_files([SHIPPED_PLAYBOOKS]), transport=slack, chart=chart
    )

    async def replay() -> None:
        trace = RECORDED / "batching_delay.om.gz"
        with open_trace(str(trace)) as samples:
            for t, events in drive(engine, samples):
                await preview.step(events, t)

    try:
        asyncio.run(replay())
    finally:
        preview.close()
    out = console.export_text()
    root = out.index("Slack #tritonguard · new thread")
    reply = out.index("in thread", root)
    assert "batching_delay · search/ranker" in out[root:reply]
    assert "Where the time goes" in out[root:reply] and "Fix" in out[root:reply]
    assert "would run (dry-run)" in out[reply:]
    assert "Latency split and deciding signal for" in out and f"[chart: {png}]" in out
    assert "root updated" in out and "(changed lines)" in out
    assert len(slack.threads) == 1


def test_a_root_update_shows_only_what_changed() -> None:
    """Unchanged and blank lines of the root are left out; new and changed ones are shown."""
    before = ["header", "", "What was done: nothing yet", "links"]
    after = ["header", "", "What was done: max_queue_delay 150000 → 500", "links", ""]
    assert root_changes(before, after) == ["What was done: max_queue_delay 150000 → 500"]


def _record(action: str, status: str, at: float, **extra: object) -> dict[str, object]:
    rec = ActionRecord(
        at=at,
        incident_id="inc-1",
        event="opened",
        playbook="batching-delay-lower-queue-delay",
        subject="search/ranker-0/ranker",
        action=action,
        params={},
        dry_run=bool(extra.pop("dry_run", False)),
        status=status,  # type: ignore[arg-type]  # the statuses under test, as strings
        reason=str(extra.pop("reason", "")),
    )
    return {k: v for k, v in rec.as_dict().items() if k != "phase"}


def test_a_fault_is_held_until_its_fix_is_verified_and_no_longer() -> None:
    """The fault stays on while the playbook waits or verifies; each wait is bounded."""
    acted = [_record("slack.post", "ran", 100.0), _record("triton.update_config", "ran", 100.5)]
    verified = [*acted, _record("verify", "ran", 161.0)]
    cut = functools.partial(should_cut, onset_at=50.0, diagnosed_at=70.0)
    assert not cut([], busy=False, now=120.0)  # held_for not over yet
    assert cut([], busy=False, now=70.0 + PLAYBOOK_WAIT_S)  # no playbook will act
    assert not cut(acted, busy=True, now=150.0)  # verify is waiting
    assert cut(acted, busy=True, now=100.0 + VERIFY_GRACE_S)  # but not for ever
    assert not cut(verified, busy=False, now=162.0)
    assert cut(verified, busy=False, now=166.0)
    # A live change without a verify step: the latency windows need time to see it.
    assert not cut(acted, busy=False, now=110.0)
    assert cut(acted, busy=False, now=131.0)
    assert not should_cut([], busy=False, now=100.0, onset_at=50.0, diagnosed_at=None)
    assert should_cut([], busy=False, now=130.0, onset_at=50.0, diagnosed_at=None)


def test_the_closing_line_gives_the_verdict_and_latency_before_and_after() -> None:
    """A verified fix reads with latency before the fault, at diagnosis and after the fix."""
    before = {"mean_latency_us": 9_000.0, "p99_us": 20_000.0, "queue_share": 0.1}
    during = {"mean_latency_us": 122_000.0, "p99_us": 161_000.0, "queue_share": 0.92}
    after = {"mean_latency_us": 10_000.0, "p99_us": 22_000.0, "queue_share": 0.12}
    records = [
        _record("slack.post", "ran", 100.0),
        _record("triton.update_config", "ran", 100.5),
        _record("verify", "ran", 161.0),
    ]
    assert before_after("batching_delay", before, during, after, records) == (
        "batching_delay: fix verified. Latency before the fault mean 9.0 ms · p99 20.0 ms · "
        "queue 10% → at diagnosis mean 122.0 ms · p99 161.0 ms · queue 92% → after the fix "
        "mean 10.0 ms · p99 22.0 ms · queue 12%"
    )
    failed = [
        *records[:2],
        _record(
            "verify", "failed", 161.0, reason="verify failed: queue_share=0.8 is not below 0.5"
        ),
        _record("triton.update_config", "rolled_back", 162.0),
    ]
    assert fix_verdict(failed) == (
        "verification failed (queue_share=0.8 is not below 0.5); rolled back"
    )
    assert fix_verdict(records[:2], busy=True) == "fix applied, verifying"
    planned = [_record("triton.update_config", "planned", 100.0, dry_run=True)]
    assert fix_verdict(planned) == "fix planned (dry-run)"
    assert before_after("x", {}, {}, {}, planned).endswith("→ at end –")
