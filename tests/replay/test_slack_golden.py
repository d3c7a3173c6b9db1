"""Golden Slack messages: the root of each cause's incident, from its recorded trace.

Each trace runs through the real engine and the shipped playbooks' dry-run plans; the root
message must match ``tests/golden/slack/<cause>.root.json`` (the blocks Slack receives) and
``<cause>.root.txt`` (the same as text, for review). Rewrite both after an intended change
with ``TRITONGUARD_UPDATE_GOLDEN=1 pytest tests/replay/test_slack_golden.py``.
"""

from __future__ import annotations

import json

import pytest

from tests.slack_harness import golden, planned, replay
from tritonguard.core import slack_text
from tritonguard.core.findings import CAUSES
from tritonguard.core.incident_links import LinkSettings, links
from tritonguard.core.severity import severity
from tritonguard.core.slack_message import ThreadView, root_message

LINKS = LinkSettings(
    grafana_url="https://grafana.example.com", prometheus_url="https://prometheus.example.com"
)


@pytest.mark.parametrize("cause", CAUSES)
async def test_root_message_of_each_cause_matches_its_golden(cause: str) -> None:
    """The root of a real incident of every cause renders exactly as reviewed.

    Header with severity, cause and subject; queue against compute; the deciding evidence
    first with units; the fix and its snippet; the dry-run plan; links.
    """
    replayed = await replay(cause)
    event = replayed.opened()
    records = await planned(replayed, event)
    view = ThreadView(
        event,
        severity(event),
        tuple(records),
        links=tuple(links(event, LINKS)),
        mentions=("S0ONCALL01",),
    )
    message = root_message(view)
    as_json = json.dumps(message.as_dict(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    as_text = slack_text.render(message.blocks, urls=False) + "\n"
    assert as_json == golden(f"{cause}.root.json", as_json)
    assert as_text == golden(f"{cause}.root.txt", as_text)
