"""One thread per incident, delivered through the persisted outbox to the fake Slack.

slack_sdk's real client talks to ``tests/fakes/fake_slack.py``. Time that the outbox waits
(backoff, Retry-After) runs on a virtual clock, so a two-minute outage takes milliseconds;
every HTTP call is real.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_slack import FakeSlack, StoredMessage
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.slack_routing import RouteMatch, SlackRoute
from tritonguard.core.slack_thread import ThreadPlanner, ThreadSettings
from tritonguard.runtime.slack_outbox import Backoff, OutboxWorker, SlackOutbox
from tritonguard.runtime.slack_threads import SlackThreads, build_threads
from tritonguard.runtime.slack_transport import ConsoleTransport, SlackTransport
from tritonguard.settings import Settings

CHANNEL = "#tritonguard-alerts"
# Slack stamps messages with its own clock; the incidents are set now, as a daemon's would be.
T0 = float(int(time.time()))


class VirtualClock:
    """Time for the outbox: sleeping advances it at once; ``at`` runs hooks as it passes."""

    def __init__(self, now: float = T0) -> None:
        self.now = now
        self.hooks: list[tuple[float, Any]] = []

    def __call__(self) -> float:
        """Return the virtual now."""
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` and run the hooks it passes."""
        self.now += max(seconds, 0.001)
        due = [h for h in self.hooks if h[0] <= self.now]
        self.hooks = [h for h in self.hooks if h[0] > self.now]
        for _, hook in due:
            await hook()


def incident(event: str = "opened", at: float = T0, **kw: Any) -> IncidentEvent:
    """Return a retry storm on speech/asr."""
    base: dict[str, Any] = dict(
        event=event,
        incident_id="inc-outage",
        cause="retry_storm",
        subject=Subject("speech", "asr", "asr-0"),
        at=at,
        confidence=0.9,
        summary="Retry storm: 98% of requests time out.",
        evidence={
            "ingress_timeouts_share": Evidence(0.98, "ratio", 30, "timed out", 1.0),
            "mean_latency_ms": Evidence(1830.0, "ms", 30, "latency"),
            "mean_queue_ms": Evidence(1800.0, "ms", 30, "queue"),
        },
        fix=Fix("Shed load.", "dynamic_batching { }"),
        opened_at=T0,
    )
    base.update(kw)
    return IncidentEvent(**base)


def record(action: str, status: str, at: float, **kw: Any) -> ActionRecord:
    """Return an audit record of the incident's playbook."""
    base: dict[str, Any] = dict(
        at=at,
        incident_id="inc-outage",
        event="opened",
        playbook="retry-storm-shed-load",
        subject="speech/asr-0/asr",
        action=action,
        params={},
        dry_run=False,
        status=status,
    )
    base.update(kw)
    return ActionRecord(**base)


def story() -> Iterator[tuple[float, IncidentEvent | ActionRecord]]:
    """Yield an incident's life: open, post, shed load, verify, resolve (times after T0)."""
    yield 0.0, incident()
    yield 1.0, record("slack.post", "ran", T0 + 1, params={"text": "Shedding load on asr."})
    shed = {
        "changes": [
            {"path": "dynamic_batching.default_queue_policy.max_queue_size", "old": None, "new": 64}
        ]
    }
    yield 2.0, record("triton.shed_load", "ran", T0 + 2, detail=shed)
    yield (
        62.0,
        record(
            "verify",
            "ran",
            T0 + 62,
            detail={"values": {"queue_share": 0.1}},
            params={"checks": [{"feature": "queue_share", "below": 0.5}]},
        ),
    )
    yield 100.0, incident("resolved", at=T0 + 100)


def notifier(fake: FakeSlack) -> SlackNotifier:
    """Return the daemon's Slack client for the outbox (no SDK retries)."""
    return SlackNotifier(fake.token, base_url=fake.base_url, timeout_s=5, retries=False)


def threads(
    fake: FakeSlack, clock: VirtualClock, path: str = ":memory:", **settings: Any
) -> SlackThreads:
    """Return the threads service delivering to the fake."""
    outbox = SlackOutbox(path)
    worker = OutboxWorker(
        outbox,
        SlackTransport(notifier(fake)),
        backoff=Backoff(1.0, 30.0),
        clock=clock,
        sleep=clock.sleep,
    )
    planner = ThreadPlanner(ThreadSettings(channel=CHANNEL, **settings))
    return SlackThreads(planner, outbox, worker, clock=clock)


def feed(th: SlackThreads, item: IncidentEvent | ActionRecord) -> None:
    """Hand one transition or record to the threads."""
    if isinstance(item, IncidentEvent):
        th.observe_events([item])
    else:
        th.observe_records([item])


def texts(messages: list[StoredMessage]) -> list[str]:
    """Return the text of each message."""
    return [m.text for m in messages]


async def test_one_thread_per_incident_root_updated_in_place_on_resolve(
    fake_slack: FakeSlack,
) -> None:
    """One root; the steps, verification and resolution in its thread; the root edited to RESOLVED."""
    clock = VirtualClock()
    th = threads(fake_slack, clock)
    for offset, item in story():
        clock.now = T0 + offset
        feed(th, item)
        await th.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    replies = fake_slack.thread_of(root)
    assert [r.text.split(":")[0] for r in replies] == [
        "done",
        "verified",
        "✅ *Resolved* after 1 min 40 s",
    ]
    assert root.edits >= 3
    assert root.blocks[0]["text"]["text"].startswith("✅ RESOLVED · CRITICAL · retry_storm")
    assert root.metadata is not None and root.metadata["event_payload"]["state"] == "resolved"
    done = next(b for b in root.blocks if b.get("block_id") == "done")["text"]["text"]
    assert "max_queue_size` unset → 64" in done and "`verify`" in done
    await th.close()


async def test_slack_down_two_minutes_then_every_message_once_in_order_in_its_thread(
    fake_slack: FakeSlack,
) -> None:
    """Slack is unreachable for the whole incident (2 min): afterwards all of it arrives once.

    The root first, then the replies in the order they happened, each in the root's thread;
    the root ends up as the last update left it, and nothing is posted twice.
    """
    clock = VirtualClock()
    th = threads(fake_slack, clock)
    await fake_slack.stop()
    back_at = T0 + 120.0
    clock.hooks.append((back_at, fake_slack.start))
    for offset, item in story():
        while clock.now < T0 + offset:
            await th.worker.deliver_due()
            await clock.sleep(min(5.0, T0 + offset - clock.now))
        feed(th, item)
        await th.worker.deliver_due()
    assert fake_slack.messages == []
    assert th.outbox.counts().get("pending", 0) >= 5
    await th.worker.drain()
    assert clock.now >= back_at
    [root] = fake_slack.roots_in(CHANNEL)
    replies = fake_slack.thread_of(root)
    assert [r.text.split(":")[0] for r in replies] == [
        "done",
        "verified",
        "✅ *Resolved* after 1 min 40 s",
    ]
    assert all(r.thread_ts == root.ts for r in replies)
    assert root.blocks[0]["text"]["text"].startswith("✅ RESOLVED")
    states = th.outbox.counts()
    assert states.get("pending", 0) == 0 and states.get("dead", 0) == 0
    waits = [c for c in fake_slack.calls if c.method == "chat.postMessage"]
    assert len(waits) == 4, "one root and three replies, none twice"
    await th.close()


async def test_a_post_whose_answer_was_lost_is_found_not_posted_again(
    fake_slack: FakeSlack,
) -> None:
    """Slack posted the reply but the answer never came back: the retry finds it by its key."""
    clock = VirtualClock()
    th = threads(fake_slack, clock)
    items = list(story())
    for _, item in items[:2]:
        feed(th, item)
    await th.worker.drain()
    fake_slack.drop_response_next(1)
    feed(th, items[2][1])
    await th.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert texts(fake_slack.thread_of(root))[0].startswith("done:")
    assert len(fake_slack.thread_of(root)) == 1
    assert any(c.method == "conversations.replies" for c in fake_slack.calls)
    await th.close()


async def test_rate_limit_waits_as_long_as_retry_after_asks(fake_slack: FakeSlack) -> None:
    """A 429 with Retry-After: 30 holds the outbox 30 s (virtual), then the root goes out once."""
    clock = VirtualClock()
    th = threads(fake_slack, clock)
    fake_slack.rate_limit_next(1, retry_after_s=30)
    for _, item in list(story())[:2]:
        feed(th, item)
    await th.worker.deliver_due()
    assert fake_slack.messages == []
    assert th.worker.paused_until == pytest.approx(T0 + 30.0)
    await th.worker.drain()
    assert clock.now >= T0 + 30.0
    assert len(fake_slack.roots_in(CHANNEL)) == 1
    await th.close()


async def test_the_outbox_survives_a_restart(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """Messages queued before a restart are delivered by the next process, into the same thread."""
    db = str(tmp_path / "audit.sqlite3")
    clock = VirtualClock()
    first = threads(fake_slack, clock, db)
    for _, item in list(story())[:2]:
        feed(first, item)
    await first.worker.drain()
    await fake_slack.stop()
    feed(first, list(story())[2][1])
    await first.worker.deliver_due()
    await first.close()
    await fake_slack.start()
    second = threads(fake_slack, clock, db)
    await second.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert texts(fake_slack.thread_of(root))[0].startswith("done:")
    await second.close()


async def test_a_new_leader_goes_on_in_the_open_thread(fake_slack: FakeSlack) -> None:
    """Another replica (its own database, its own incident id) finds the open root by metadata."""
    clock = VirtualClock()
    old = threads(fake_slack, clock)
    for _, item in list(story())[:2]:
        feed(old, item)
    await old.worker.drain()
    await old.close()
    new = threads(fake_slack, clock)
    other = incident(incident_id="inc-other-replica", opened_at=T0)
    new.observe_events([other])
    new.observe_records(
        [record("slack.post", "ran", T0 + 5, incident_id="inc-other-replica", params={"text": "x"})]
    )
    new.observe_records(
        [record("triton.shed_load", "ran", T0 + 6, incident_id="inc-other-replica")]
    )
    await new.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    assert texts(fake_slack.thread_of(root))[0].startswith("done:")
    await new.close()


async def test_routes_pick_the_channel_and_mention_the_on_call_group(fake_slack: FakeSlack) -> None:
    """A route for the namespace sends the thread to its channel and mentions its group."""
    clock = VirtualClock()
    route = SlackRoute(
        match=RouteMatch(namespace="speech"), channel="#ml-oncall", mention=["S0ONCALL01"]
    )
    th = threads(fake_slack, clock, routes=(route,))
    for _, item in list(story())[:2]:
        feed(th, item)
    await th.worker.drain()
    assert fake_slack.roots_in(CHANNEL) == []
    [root] = fake_slack.roots_in("#ml-oncall")
    assert "<!subteam^S0ONCALL01>" in str(root.blocks)
    await th.close()


async def test_without_a_token_the_thread_goes_to_the_console_and_the_log(tmp_path: Path) -> None:
    """No token: the same root (evidence, fix) is printed and logged; nothing fails."""
    out: list[str] = []
    settings = Settings(audit_db_path=tmp_path / "a.sqlite3")
    th = build_threads(settings, transport=ConsoleTransport(out.append))
    for _, item in list(story())[:3]:
        feed(th, item)
    await th.worker.drain()
    printed = "\n".join(out)
    assert "Timed out at the ingress" in printed and "98 %" in printed
    assert "Shed load." in printed and "dynamic_batching { }" in printed
    assert "Request 1.83 s = queue 1.8 s" in printed.replace("*", "")
    await th.close()
