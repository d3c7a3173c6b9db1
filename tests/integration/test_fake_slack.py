"""The fake Slack Web API, proven with slack_sdk's own clients and no retry logic of ours."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.fake_slack import FakeSlack


def _client(server: FakeSlack, token: str | None = None) -> AsyncWebClient:
    """Build a plain slack_sdk client that does not retry, so every answer is seen as sent."""
    return AsyncWebClient(
        token=token or server.token, base_url=server.base_url, timeout=5, retry_handlers=[]
    )


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


async def _error_of(call: object) -> dict[str, object]:
    with pytest.raises(SlackApiError) as err:
        await call  # type: ignore[misc]
    data = err.value.response.data
    assert isinstance(data, dict)
    return data


async def test_auth_and_conversations_list(fake_slack: FakeSlack) -> None:
    """auth.test names the bot; conversations.list lists the workspace's channels."""
    slack = _client(fake_slack)
    auth = await slack.auth_test()
    assert auth["ok"] is True
    assert auth["user"] == "tritonguard"
    channels = await slack.conversations_list()
    assert [c["name"] for c in channels["channels"]] == [
        "tritonguard-alerts",
        "ml-oncall",
        "finance",
    ]


async def test_bad_or_missing_token_is_rejected(fake_slack: FakeSlack) -> None:
    """Unknown tokens get invalid_auth and nothing is stored."""
    data = await _error_of(
        _client(fake_slack, "xoxb-wrong").chat_postMessage(channel="ml-oncall", text="hi")
    )
    assert data["error"] == "invalid_auth"
    assert fake_slack.messages == []


async def test_post_by_name_is_stored_under_the_channel_id(fake_slack: FakeSlack) -> None:
    """chat.postMessage accepts a #name, answers with the channel ID and a ts, stores the blocks."""
    slack = _client(fake_slack)
    resp = await slack.chat_postMessage(
        channel="#ml-oncall", text="p99 up", blocks=[_section("*batching_delay*")]
    )
    assert resp["channel"] == "C0ONCALL02"
    (stored,) = fake_slack.messages_in("ml-oncall")
    assert (stored.ts, stored.text) == (resp["ts"], "p99 up")
    assert stored.blocks[0]["text"]["text"] == "*batching_delay*"


async def test_channel_errors(fake_slack: FakeSlack) -> None:
    """Unknown channels are channel_not_found; channels the bot is not in are not_in_channel."""
    slack = _client(fake_slack)
    missing = await _error_of(slack.chat_postMessage(channel="nope", text="x"))
    assert missing["error"] == "channel_not_found"
    outside = await _error_of(slack.chat_postMessage(channel="finance", text="x"))
    assert outside["error"] == "not_in_channel"


@pytest.mark.parametrize(
    ("blocks", "pointer"),
    [
        ([_section("x")] * 51, "/blocks"),
        ([_section("x" * 3001)], "/blocks/0/text/text"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "/blocks/0/text"),
        (
            [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
            "/blocks/0/fields",
        ),
        ([{"type": "context", "elements": []}], "/blocks/0/elements"),
        ([{"type": "carousel"}], "/blocks/0/type"),
    ],
)
async def test_block_kit_limits_are_enforced(
    fake_slack: FakeSlack, blocks: list[dict[str, object]], pointer: str
) -> None:
    """Blocks over Block Kit's limits are invalid_blocks, with Slack's json-pointer errors."""
    data = await _error_of(
        _client(fake_slack).chat_postMessage(channel="ml-oncall", text="x", blocks=blocks)
    )
    assert data["error"] == "invalid_blocks"
    errors = data["errors"]
    assert isinstance(errors, list)
    assert any(f"[json-pointer:{pointer}" in e for e in errors)


async def test_limits_are_inclusive(fake_slack: FakeSlack) -> None:
    """Exactly 50 blocks, 3000-character sections and 150-character headers are accepted."""
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}]
    blocks += [_section("s" * 3000)] * 49
    resp = await _client(fake_slack).chat_postMessage(channel="ml-oncall", text="x", blocks=blocks)
    assert resp["ok"] is True


async def test_text_limits(fake_slack: FakeSlack) -> None:
    """Text over 40 000 characters is msg_too_long; neither text nor blocks is no_text."""
    slack = _client(fake_slack)
    long = await _error_of(slack.chat_postMessage(channel="ml-oncall", text="x" * 40001))
    assert long["error"] == "msg_too_long"
    with pytest.warns(UserWarning, match="text"):  # slack_sdk itself warns about missing text
        empty = await _error_of(slack.chat_postMessage(channel="ml-oncall", text=""))
    assert empty["error"] == "no_text"


async def test_update_replaces_a_stored_message(fake_slack: FakeSlack) -> None:
    """chat.update edits the message in place; an unknown ts is message_not_found."""
    slack = _client(fake_slack)
    posted = await slack.chat_postMessage(channel="ml-oncall", text="open")
    await slack.chat_update(channel=posted["channel"], ts=posted["ts"], text="resolved")
    (stored,) = fake_slack.messages
    assert (stored.text, stored.edits) == ("resolved", 1)
    data = await _error_of(slack.chat_update(channel=posted["channel"], ts="1.000000", text="x"))
    assert data["error"] == "message_not_found"


async def test_rate_limit_answers_429_with_retry_after(fake_slack: FakeSlack) -> None:
    """An injected rate limit is HTTP 429, error ratelimited and a Retry-After header."""
    fake_slack.rate_limit_next(1, retry_after_s=7)
    with pytest.raises(SlackApiError) as err:
        await _client(fake_slack).chat_postMessage(channel="ml-oncall", text="x")
    assert err.value.response.status_code == 429
    assert err.value.response.headers["Retry-After"] == "7"
    assert err.value.response.data["error"] == "ratelimited"
    resp = await _client(fake_slack).chat_postMessage(channel="ml-oncall", text="x")
    assert resp["ok"] is True


async def test_sync_web_client_works_too(fake_slack: FakeSlack) -> None:
    """slack_sdk's synchronous WebClient posts through the same fake (form-encoded body)."""
    sync = WebClient(token=fake_slack.token, base_url=fake_slack.base_url, timeout=5)
    resp = await asyncio.to_thread(sync.chat_postMessage, channel="C0ALERTS01", text="sync")
    assert resp["ok"] is True
    assert fake_slack.messages_in("C0ALERTS01")[0].text == "sync"
