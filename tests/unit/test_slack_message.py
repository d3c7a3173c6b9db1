"""The incident message as Block Kit: within Slack's limits, templated parts, the right order."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.fakes.fake_slack import validate_blocks
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.config_changes import ChangeTimeline
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.severity import SeverityRules, severity
from tritonguard.core.slack_message import (
    APPROVE_ACTION,
    ApprovalView,
    ThreadView,
    describe,
    record_reply,
    resolution_reply,
    root_message,
)
from tritonguard.core.slack_templates import SlackTemplates


def incident(evidence: dict[str, Evidence] | None = None, **kw: object) -> IncidentEvent:
    """Return an open incident with the given evidence."""
    base = dict(
        event="opened",
        incident_id="inc-1",
        cause="retry_storm",
        subject=Subject("speech", "asr", "asr-0"),
        at=1000.0,
        confidence=0.9,
        summary="Retry storm: clients re-send.",
        evidence=evidence or {},
        fix=Fix("Shed load.", "dynamic_batching { }"),
        opened_at=1000.0,
    )
    base.update(kw)
    return IncidentEvent(**base)  # type: ignore[arg-type]


def test_retry_storm_shows_the_deciding_numbers_first() -> None:
    """The timeout share that decided it, pending and arrivals lead; a 0 share comes last."""
    evidence = {
        "triton_canceled_share": Evidence(0.0, "ratio", 8, "cancelled", 0.0),
        "ingress_timeouts_share": Evidence(0.98, "ratio", 8, "timed out", 1.0),
        "pending": Evidence(4761.0, "requests", 8, "pending", 0.1),
        "arrivals_vs_baseline": Evidence(5.9, "ratio", 8, "arrivals", 0.15),
    }
    blocks = root_message(ThreadView(incident(evidence), "critical")).blocks
    fields = next(b for b in blocks if b.get("block_id") == "evidence")["fields"]
    texts = [f["text"] for f in fields]
    assert texts[0].startswith("*Timed out at the ingress*\n98 %")
    assert "×5.9" in texts[1] and "4,761 requests" in texts[2]
    assert texts[-1].startswith("*Cancelled in Triton*\n0 %")


def test_a_huge_diagnosis_still_fits_block_kit() -> None:
    """Hundreds of evidence items and a long fix fit 50 blocks, 10 fields, 3000 chars, header 150."""
    evidence = {f"n{i}_share": Evidence(0.5, "ratio", 30, "w" * 500, 0.1) for i in range(300)}
    ev = incident(
        evidence,
        summary="s" * 10_000,
        fix=Fix("f" * 10_000, "c" * 10_000),
        subject=Subject("n" * 200, "m" * 200, "p"),
    )
    records = tuple(
        ActionRecord(1.0, "inc-1", "opened", "pb", "k", "verify", {}, True, "planned")
        for _ in range(500)
    )
    message = root_message(ThreadView(ev, "high", records))
    assert len(message.blocks) <= 50
    for block in message.blocks:
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
        if block["type"] == "section":
            assert len(block.get("text", {}).get("text", "")) <= 3000
            assert len(block.get("fields", [])) <= 10
            assert all(len(f["text"]) <= 2000 for f in block.get("fields", []))
    assert len(message.text) <= 3000


def test_header_names_severity_cause_and_subject() -> None:
    """The header says how bad, which cause and where, and turns to RESOLVED at the end."""
    ev = incident()
    header = root_message(ThreadView(ev, "critical")).blocks[0]["text"]["text"]
    assert header == "🔴 CRITICAL · retry_storm · speech/asr on asr-0"
    done = ThreadView(ev, "critical", resolution=incident(event="resolved", at=1250.0))
    header = root_message(done).blocks[0]["text"]["text"]
    assert header.startswith("✅ RESOLVED · CRITICAL")
    assert "after 4 min 10 s" in resolution_reply(done).text


def test_templates_replace_parts_and_are_checked_when_they_load() -> None:
    """A user template renders in the sandbox; an unknown name fails at load, not at 3 a.m."""
    templates = SlackTemplates(header="{{ severity | upper }} {{ model }} ({{ namespace }})")
    view = ThreadView(incident(), "high", templates=templates)
    assert root_message(view).blocks[0]["text"]["text"] == "HIGH asr (speech)"
    with pytest.raises(ValidationError, match="unknown name"):
        SlackTemplates(summary="{{ secrets }}")
    with pytest.raises(ValidationError, match="syntax"):
        SlackTemplates(resolved="{{ model ")


def test_a_template_that_cannot_render_keeps_the_default() -> None:
    """Evidence the incident lacks does not blank the message: the default stays, with why."""
    view = ThreadView(incident(), "high", templates=SlackTemplates(summary="{{ evidence.nope }}"))
    summary = next(b for b in root_message(view).blocks if b.get("block_id") == "summary")
    assert summary["text"]["text"].startswith("Retry storm: clients re-send.")
    assert "template summary" in summary["text"]["text"]


def test_dry_run_says_what_would_be_done_and_a_run_what_was_done() -> None:
    """Plans are titled as plans; real runs as what was done, with the numbers changed."""
    change = {"changes": [{"path": "a.b", "old": 150000, "new": 500}], "model": "m"}
    plan = ActionRecord(
        1.0,
        "inc-1",
        "opened",
        "pb",
        "k",
        "triton.update_config",
        {},
        True,
        "planned",
        detail=change,
    )
    ran = ActionRecord(
        1.0, "inc-1", "opened", "pb", "k", "triton.update_config", {}, False, "ran", detail=change
    )
    planned_text = str(root_message(ThreadView(incident(), "high", (plan,))).blocks)
    ran_text = str(root_message(ThreadView(incident(), "high", (ran,))).blocks)
    assert "Dry-run — what would be done" in planned_text
    assert "What was done" in ran_text and "150,000 → 500" in ran_text
    assert describe(ran) == "`triton.update_config` — `a.b` 150,000 → 500"
    assert record_reply(ran).text.startswith("done:")


def test_pending_approval_puts_buttons_on_the_root() -> None:
    """A step waiting for approval shows Approve and Reject carrying the approval's id."""
    approval = ApprovalView("ap-1", "pb", "triton.update_config", "x → 1", ("S0ONCALL",), 2000.0)
    blocks = root_message(ThreadView(incident(), "high", approvals=(approval,))).blocks
    actions = next(b for b in blocks if b["type"] == "actions")
    assert actions["elements"][0]["action_id"] == APPROVE_ACTION
    assert {e["value"] for e in actions["elements"]} == {"ap-1"}


def test_severity_from_what_users_feel() -> None:
    """Failing requests or latency ×10 are critical, ×3 high, the rest a warning."""

    def sev(**values: float) -> str:
        evidence = {k: Evidence(v, "x", 1, "") for k, v in values.items()}
        return severity(incident(evidence))

    assert sev(ingress_timeouts_share=0.2) == "critical"
    assert sev(mean_latency_ms=120, baseline_mean_latency_ms=10) == "critical"
    assert sev(mean_latency_ms=40, baseline_mean_latency_ms=10) == "high"
    assert sev(mean_latency_ms=15, baseline_mean_latency_ms=10) == "warning"
    assert sev() == "warning"
    strict = SeverityRules(high_latency_factor=1.2)
    evidence = {
        "mean_latency_ms": Evidence(15, "ms", 1, ""),
        "baseline_mean_latency_ms": Evidence(10, "ms", 1, ""),
    }
    assert severity(incident(evidence), strict) == "high"


def test_the_root_says_what_changed_before_the_incident() -> None:
    """The config change the incident followed reads leaf by leaf, with when it was seen.

    On-call's first question after a deploy is what changed: the root shows the diff the
    repository API reads gave, before the evidence, and passes Block Kit's checks.
    """
    timeline = ChangeTimeline()
    key = ("speech", "asr-0", "asr")
    timeline.read(key, {"dynamic_batching": {"max_queue_delay_microseconds": "500"}}, 900.0)
    change = timeline.read(
        key, {"dynamic_batching": {"max_queue_delay_microseconds": "150000"}}, 960.0
    )
    blocks = root_message(ThreadView(incident(change=change), "critical")).blocks
    [section] = [b for b in blocks if b.get("block_id") == "change"]
    text = section["text"]["text"]
    assert text.splitlines() == [
        "*What changed* (read 40 s before it opened, against the previous read)",
        "• `dynamic_batching.max_queue_delay_microseconds`: 500 → 150000",
    ]
    assert validate_blocks(blocks) == []
