"""A step that needs a Triton endpoint and has none says why, when the daemon knows why."""

from __future__ import annotations

import pytest

from tests.playbook_harness import incident
from tritonguard.actions.registry import ActionContext, ActionFailed

STALE = (
    "pod discovery in namespace prod has been failing for 42 s (HTTP 403 Forbidden); "
    "its pod endpoints may be stale"
)


def _context(withheld: str | None) -> ActionContext:
    event = incident("model_reload")
    return ActionContext(
        subject=event.subject,
        event=event,
        playbook="reload",
        bounds={},
        dry_run=False,
        triton_withheld=withheld,
    )


def test_a_withheld_endpoint_names_the_stale_watch_and_what_to_check() -> None:
    """The failure carries discovery's reason, says nothing changed, and what to look at."""
    with pytest.raises(ActionFailed) as caught:
        _context(STALE).need_triton()
    said = str(caught.value)
    assert said.startswith("no Triton endpoint for prod/triton-5d9c7b-x2x9q/resnet: " + STALE)
    assert "withheld from actions until the watch is current again" in said
    assert "nothing was changed" in said
    assert "may list and watch pods in prod" in said


def test_without_a_known_reason_the_failure_stays_the_plain_one() -> None:
    """No reason known (no discovery, a pod never seen): the short message, no guessing."""
    with pytest.raises(ActionFailed, match=r"^no Triton endpoint known for prod/"):
        _context(None).need_triton()
