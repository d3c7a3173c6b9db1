"""What the demo says about a fault's fix: when to stop it, the verdict, latency before and after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Latency = Mapping[str, float | None]
Record = Mapping[str, Any]

# An undiagnosed fault runs as long as the recorded scenarios' fault phase, no longer.
UNDIAGNOSED_S = 75.0
# The longest shipped held_for is 60 s; a playbook that has not acted by then never will.
PLAYBOOK_WAIT_S = 90.0
# Longest shipped verify wait (90 s) plus the steps before it and an evaluation or two.
VERIFY_GRACE_S = 150.0
# A live change with no verification: long enough for the feature windows to see it.
REMEDY_SETTLE_S = 30.0
# After the playbook settled: one more scrape for the thread's last replies.
SETTLE_S = 4.0

# Steps that only tell people or check; everything else changes a server.
_NOT_REMEDY = ("slack.post", "verify", "*")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value / 1000:.1f} ms"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def latency_text(view: Latency) -> str:
    """Return mean, p99 and queue share in one short line ("–" when nothing is known)."""
    if not view:
        return "–"
    return (
        f"mean {_ms(view.get('mean_latency_us'))} · p99 {_ms(view.get('p99_us'))} · "
        f"queue {_share(view.get('queue_share'))}"
    )


def is_remedy(record: Record) -> bool:
    """Whether the record is a step that changes (or would change) a server."""
    return record.get("action") not in _NOT_REMEDY and record.get("phase", "step") == "step"


def live_changes(records: Sequence[Record]) -> list[Record]:
    """Return the remediation steps that really ran (not planned)."""
    return [
        r for r in records if is_remedy(r) and r.get("status") == "ran" and not r.get("dry_run")
    ]


def should_cut(
    records: Sequence[Record],
    *,
    busy: bool,
    now: float,
    onset_at: float,
    diagnosed_at: float | None,
) -> bool:
    """Whether the fault has shown all it will: the playbook is done, verified, or timed out.

    ``busy``: the playbook stage still has work in flight for the subject (a verify waiting).
    Every wait is bounded, so a playbook that never acts or never settles does not hold the
    demo up.
    """
    if diagnosed_at is None:
        return now - onset_at >= UNDIAGNOSED_S
    seen = [r for r in records if r.get("status") != "deferred"]
    if not seen:
        return now - diagnosed_at >= PLAYBOOK_WAIT_S
    first, last = float(seen[0].get("at", now)), float(seen[-1].get("at", now))
    if busy:
        return now - first >= VERIFY_GRACE_S
    changes = live_changes(seen)
    if changes and not any(r.get("action") == "verify" for r in seen):
        return now - float(changes[-1].get("at", now)) >= REMEDY_SETTLE_S
    return now - last >= SETTLE_S


def fix_verdict(records: Sequence[Record], *, busy: bool = False) -> str:
    """Return one line on what became of the fix: verified, rolled back, planned, failed...

    ``busy``: the playbook is still at work (a verification waiting).
    """
    seen = [r for r in records if r.get("status") != "deferred"]
    if not seen:
        return "no playbook ran"
    if busy and not any(r.get("action") == "verify" for r in seen):
        return "fix applied, verifying" if live_changes(seen) else "playbook running"
    verify = next((r for r in reversed(seen) if r.get("action") == "verify"), None)
    rolled = any(r.get("status") == "rolled_back" for r in seen)
    if verify is not None and verify.get("status") == "ran":
        return "fix verified"
    if verify is not None and verify.get("status") == "failed":
        why = str(verify.get("reason") or "").removeprefix("verify failed: ")
        return f"verification failed ({why})" + ("; rolled back" if rolled else "")
    failed = next((r for r in seen if is_remedy(r) and r.get("status") == "failed"), None)
    if failed is not None:
        return f"fix failed: {failed.get('action')} ({failed.get('reason') or 'no reason'})"
    if live_changes(seen):
        return "fix applied (no verification step)"
    if any(is_remedy(r) and r.get("status") == "planned" for r in seen):
        return "fix planned (dry-run)"
    skipped = next((r for r in seen if r.get("status") == "skipped"), None)
    if skipped is not None:
        return f"playbook skipped ({skipped.get('reason') or skipped.get('guard')})"
    return "notified only (the playbook changes nothing)"


def before_after(
    name: str, before: Latency, at_diagnosis: Latency, after: Latency, records: Sequence[Record]
) -> str:
    """Return the fault's closing line: the verdict, then latency before, during and after."""
    verdict = fix_verdict(records)
    label = "after the fix" if live_changes(records) else "at end"
    return (
        f"{name}: {verdict}. Latency before the fault {latency_text(before)} → at diagnosis "
        f"{latency_text(at_diagnosis)} → {label} {latency_text(after)}"
    )


def action_line(record: Record) -> str:
    """One line for a playbook decision (planned, ran, skipped, failed...)."""
    mode = "dry-run" if record.get("dry_run") else "live"
    detail = record.get("detail") or {}
    what = ""
    if isinstance(detail, dict):
        changes = detail.get("changes")
        if isinstance(changes, list) and changes:
            what = " " + "; ".join(
                f"{c.get('path')}: {c.get('old')} → {c.get('new')}"
                for c in changes
                if isinstance(c, dict)
            )
        elif "requests" in detail:
            what = f" {detail['requests']} warm-up requests to {detail.get('model')}"
        elif "text" in detail:
            what = f" “{str(detail['text'])[:120]}”"
    reason = f" ({record['reason']})" if record.get("reason") else ""
    guard = f" [guard {record['guard']}]" if record.get("guard") else ""
    return (
        f"  playbook {record.get('playbook')}: {record.get('action')} "
        f"{record.get('status')} [{mode}]{guard}{reason}{what}"
    )
