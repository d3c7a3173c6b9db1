"""Slack's "What changed": the rollout an incident followed, beside the model-config diff."""

from __future__ import annotations

from tests.unit.test_rollout_changes import ROLLOUT, incident, raised_delay_incident
from tritonguard.core.config_changes import ConfigChange
from tritonguard.core.slack_message import what_changed


def test_slack_says_the_config_diff_then_what_rolled_out_when_against_which_revision() -> None:
    """The root's "What changed" lists the config leaves, then the revision and its diff."""
    text = what_changed(raised_delay_incident())
    assert text.splitlines() == [
        "*What changed* (read 30 s before it opened, against the previous read)",
        "• `dynamic_batching.max_queue_delay_microseconds`: 500 → 150,000",
        "*Rolled out* 40 s before it opened: Deployment triton-a revision 7 (against revision 6)",
        "• `containers[triton].image`: triton:24.08 → triton:24.09",
    ]


def test_a_rollout_without_a_config_change_is_what_changed_by_itself() -> None:
    """A rollout that changed no model config still heads the section, with its own diff."""
    text = what_changed(incident(ConfigChange.of_rollout("ranker", ROLLOUT)))
    assert text.splitlines() == [
        "*What changed*: a rollout 40 s before it opened: Deployment triton-a revision 7 "
        "(against revision 6)",
        "• `containers[triton].image`: triton:24.08 → triton:24.09",
    ]
