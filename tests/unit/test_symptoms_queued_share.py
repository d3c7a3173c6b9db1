"""One bar for a queued request, in the engine and in the exported rules alike."""

from __future__ import annotations

from tritonguard.core import symptoms
from tritonguard.core.rules_export import num, rule_group
from tritonguard.core.thresholds import Thresholds


def test_the_queued_bar_is_half_the_request_time() -> None:
    """Queued past half the request time is waiting longer than computing, whatever the scale."""
    assert symptoms.QUEUED_SHARE == 0.5


def test_the_rules_read_the_engines_queued_bar() -> None:
    """Both rules that call a share queued compare it with the engine's constant.

    The per-scrape `:queued` flag and the no-baseline symptom read the same bar as
    ``symptoms.symptom_of`` and ``symptoms._queued_now``.
    """
    rules = {r.get("record"): r["expr"] for r in rule_group(Thresholds(), 2.0)["rules"]}
    bar = num(symptoms.QUEUED_SHARE)
    assert (
        f"tritonguard:scrape_queue_share > {bar}" in rules["tritonguard:scrape_queue_share:queued"]
    )
    assert f"tritonguard:queue_share > {bar} and" in rules["tritonguard:symptom"]
