"""SlackNotifier against the fake Slack Web API: posting, fitting limits, retries, failures."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from tests.fakes.fake_slack import FakeSlack, validate_blocks
from tritonguard.clients.ports import PostedMessage
from tritonguard.clients.slack_api import (
    SlackError,
    SlackNotifier,
    fit_blocks,
    fit_text,
    truncate,
)


def _notifier(server: FakeSlack, **kwargs: object) -> SlackNotifier:
    return SlackNotifier(server.token, base_url=server.base_url, **kwargs)  # type: ignore[arg-type]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


async def test_post_returns_where_the_message_landed(fake_slack: FakeSlack) -> None:
    """post() gives the channel ID and ts; the fake stored the text and blocks."""
    posted = await _notifier(fake_slack).post(
        "#tritonguard-alerts", "batching_delay on resnet", [_section("*queue share 0.93*")]
    )
    (stored,) = fake_slack.messages_in("tritonguard-alerts")
    assert posted == PostedMessage(ts=stored.ts, channel="C0ALERTS01")
    assert stored.text == "batching_delay on resnet"
    assert stored.blocks == [_section("*queue share 0.93*")]


async def test_oversized_diagnosis_is_trimmed_and_accepted(fake_slack: FakeSlack) -> None:
    """60 blocks, a 5000-character section, a long header and 50 000 characters of text post."""
    blocks: list[dict[str, object]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "H" * 400}},
        _section("```\n" + "evidence line\n" * 400),
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2500}] * 12},
    ]
    blocks += [_section(f"step {i}") for i in range(57)]
    assert validate_blocks(blocks)  # as built, Slack would reject these
    await _notifier(fake_slack).post("ml-oncall", "t" * 50000, blocks)
    (stored,) = fake_slack.messages
    assert len(stored.text) <= 40000
    assert stored.text.endswith("more characters)")
    assert len(stored.blocks) == 50
    assert stored.blocks[-1]["type"] == "context"
    assert "11 more blocks left out" in stored.blocks[-1]["elements"][0]["text"]
    header = stored.blocks[0]["text"]["text"]
    assert len(header) <= 150
    assert header.startswith("HHH")
    code = stored.blocks[1]["text"]["text"]
    assert len(code) <= 3000
    assert code.count("```") == 2  # the cut code block is closed again
    assert len(stored.blocks[2]["fields"]) == 10


def test_fit_blocks_leaves_conforming_blocks_alone() -> None:
    """Blocks already within the limits come back equal (and copied, not aliased)."""
    blocks = [_section("ok"), {"type": "divider"}]
    fitted = fit_blocks(blocks)
    assert fitted == blocks
    assert fitted[0] is not blocks[0]
    assert fit_text("short") == "short"


def test_truncate_marks_the_cut_and_respects_the_limit() -> None:
    """Every truncated text fits its limit and says how much was cut."""
    for limit in (150, 2000, 3000):
        for size in (limit + 1, limit * 3):
            out = truncate("x" * size, limit)
            assert len(out) <= limit
            kept = out.index("…")
            assert out.endswith(f"(+{size - kept} more characters)")


async def test_rate_limit_is_retried_after_retry_after(fake_slack: FakeSlack) -> None:
    """A 429 is waited out (slack_sdk's handler) and the post then succeeds."""
    fake_slack.rate_limit_next(1, retry_after_s=0)
    posted = await _notifier(fake_slack).post("ml-oncall", "after a 429")
    assert [c.http_status for c in fake_slack.calls] == [429, 200]
    assert fake_slack.messages_in("ml-oncall")[0].ts == posted.ts


async def test_persistent_rate_limit_is_a_clear_error(fake_slack: FakeSlack) -> None:
    """When 429s outlast the retries, post() raises SlackError(kind="rate_limited")."""
    fake_slack.rate_limit_next(5, retry_after_s=0)
    with pytest.raises(SlackError) as err:
        await _notifier(fake_slack, rate_limit_retries=1).post("ml-oncall", "x")
    assert err.value.kind == "rate_limited"
    assert len(fake_slack.calls) == 2


async def test_server_error_is_retried_once(fake_slack: FakeSlack) -> None:
    """A single 503 is retried by slack_sdk's server-error handler; two are an error."""
    fake_slack.fail_next(1, 503)
    await _notifier(fake_slack).post("ml-oncall", "after a 503")
    assert len(fake_slack.messages) == 1
    fake_slack.fail_next(2, 503)
    with pytest.raises(SlackError) as err:
        await _notifier(fake_slack).post("ml-oncall", "x")
    assert err.value.kind == "server"
    assert "503" in str(err.value)


async def test_bad_token_is_a_one_line_auth_error(fake_slack: FakeSlack) -> None:
    """An invalid token fails with kind 'auth' and Slack's error code in one line."""
    notifier = SlackNotifier("xoxb-revoked", base_url=fake_slack.base_url)
    with pytest.raises(SlackError) as err:
        await notifier.post("ml-oncall", "x")
    assert (err.value.kind, err.value.error) == ("auth", "invalid_auth")
    assert str(err.value) == "chat.postMessage to ml-oncall: Slack said invalid_auth"
    with pytest.raises(SlackError):
        await notifier.check_auth()
    assert await _notifier(fake_slack).check_auth() == "tritonguard@Fake Workspace"


async def test_unknown_channel_is_a_channel_error(fake_slack: FakeSlack) -> None:
    """Posting to a channel that does not exist is kind 'channel'."""
    with pytest.raises(SlackError) as err:
        await _notifier(fake_slack).post("#does-not-exist", "x")
    assert err.value.kind == "channel"
    assert "channel_not_found" in str(err.value)


async def test_update_edits_the_posted_message(fake_slack: FakeSlack) -> None:
    """update() replaces text and blocks of the message post() returned."""
    notifier = _notifier(fake_slack)
    posted = await notifier.post("ml-oncall", "open", [_section("opened")])
    again = await notifier.update(posted, "resolved", [_section("resolved after 4 min")])
    assert again == posted
    (stored,) = fake_slack.messages
    assert (stored.text, stored.edits) == ("resolved", 1)
    assert stored.blocks == [_section("resolved after 4 min")]


async def test_down_slack_fails_fast() -> None:
    """Nothing listening: SlackError(kind="down") within about a second (one quick retry)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    notifier = SlackNotifier("xoxb-x", base_url=f"http://127.0.0.1:{port}/api/", timeout_s=2)
    started = time.monotonic()
    with pytest.raises(SlackError) as err:
        await notifier.post("ml-oncall", "x")
    assert time.monotonic() - started < 2.0
    assert err.value.kind == "down"
    assert "\n" not in str(err.value)


async def test_slow_slack_times_out(fake_slack: FakeSlack) -> None:
    """A response slower than timeout_s is SlackError(kind="timeout")."""
    fake_slack.set_delay(2.0)
    started = time.monotonic()
    with pytest.raises(SlackError) as err:
        await _notifier(fake_slack, timeout_s=0.3).post("ml-oncall", "x")
    assert time.monotonic() - started < 1.5
    assert err.value.kind == "timeout"
    fake_slack.set_delay(0)
