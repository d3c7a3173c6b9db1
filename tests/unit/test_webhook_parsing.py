"""The webhook's pieces on literals: JSON depth bound, body parsing, bearer check, log throttle."""

from __future__ import annotations

import json
import time

import pytest

from tritonguard.runtime.alertmanager_webhook import (
    WebhookError,
    nesting_exceeds,
    parse_webhook_body,
)
from tritonguard.runtime.api_auth import BearerToken
from tritonguard.runtime.log_throttle import LogThrottle


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [{"b": {}}]}', 4),
        ('["[[[[", "{{{{"]', 1),  # brackets inside strings do not nest
        ('[" \\" [[[ ", {"k\\\\": []}]', 3),  # escaped quotes and backslashes
    ],
)
def test_nesting_is_measured_outside_strings(text: str, depth: int) -> None:
    """The depth is that of arrays and objects; strings, escapes included, are skipped."""
    json.loads(text)  # the literal is valid JSON
    assert not nesting_exceeds(text, depth)
    assert nesting_exceeds(text, depth - 1) is (depth > 0)


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 500_000,  # one unterminated string of escaped quotes
        '"' + '\\"' * 500_000 + "\\",  # ... ending in a lone backslash
        '"' * 1_000_000,
        "[]," * 330_000,
        "[" * 1_000_000,
    ],
    ids=["escaped-quotes", "trailing-backslash", "quotes", "flat", "deep"],
)
def test_the_depth_check_is_linear_on_hostile_bodies(text: str) -> None:
    """A megabyte crafted against string scanning is measured, not scanned again and again.

    Linear, it takes milliseconds; a scan that restarts at each quote or bracket would take
    hours on a megabyte. The bound is that gap, not a speed: a loaded CI machine is far
    inside it (the speed itself is for benchmarks).
    """
    started = time.perf_counter()
    assert nesting_exceeds(text, 32) is text.startswith("[[")
    assert time.perf_counter() - started < 10.0


def test_an_unterminated_string_hides_no_depth_the_parser_would_reach() -> None:
    """Brackets after an unterminated string are where the parser fails, not where it recurses."""
    text = '["' + "[" * 10_000
    assert not nesting_exceeds(text, 2)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "body nests deeper than 32 levels"),
        (b"\xff\xfe", "body is not UTF-8 JSON"),
        (b"{not json", "body is not JSON"),
        (b'{"n": ' + b"9" * 5000 + b"}", "body is not JSON"),
        (b'{"version": "3"}', "unsupported webhook version '3'"),
    ],
    ids=["deep", "not-utf8", "not-json", "long-integer", "version"],
)
def test_bad_bodies_get_one_line_reasons(body: bytes, reason: str) -> None:
    """Each bad body raises WebhookError with a one-line reason, never a RecursionError."""
    with pytest.raises(WebhookError) as err:
        parse_webhook_body(body, max_depth=32)
    assert str(err.value).startswith(reason)
    assert "\n" not in str(err.value)


def test_a_webhook_body_parses_within_the_default_depth() -> None:
    """A real-shaped notification (4 levels) parses at the default bound."""
    body = {
        "version": "4",
        "alerts": [{"status": "firing", "labels": {"alertname": "A"}, "fingerprint": "f"}],
    }
    (alert,) = parse_webhook_body(json.dumps(body).encode(), max_depth=32)
    assert alert.name == "A" and alert.fingerprint == "f"
    with pytest.raises(WebhookError):
        parse_webhook_body(json.dumps(body).encode(), max_depth=3)


@pytest.mark.parametrize(
    ("header", "refusal"),
    [
        (None, "missing"),
        ("", "missing"),
        ("Bearer", "not_bearer"),
        ("Bearer   ", "not_bearer"),
        ("Basic czNjcmV0", "not_bearer"),
        ("Token s3cret", "not_bearer"),
        ("Bearer s3cre", "wrong_token"),
        ("Bearer s3cret-and-more", "wrong_token"),
        ("Bearer S3CRET", "wrong_token"),
        ("Bearer s3cret, Bearer other", "wrong_token"),
        ("Bearer s3cret", None),
        ("bearer s3cret", None),
        ("  BEARER   s3cret  ", None),
    ],
)
def test_bearer_header_is_checked(header: str | None, refusal: str | None) -> None:
    """Only `Bearer <the token>` passes; the scheme is case-insensitive, the token is not."""
    assert BearerToken("s3cret").refusal(header) == refusal


def test_an_empty_token_is_refused_at_construction() -> None:
    """An empty configured token would let anyone in, so it cannot be configured."""
    with pytest.raises(ValueError, match="admit anyone"):
        BearerToken("")


def test_log_throttle_lets_one_line_per_interval_and_reports_what_it_held() -> None:
    """First occurrence at once; then one line per interval carrying the count held back."""
    now = [0.0]
    throttle = LogThrottle(10.0, clock=lambda: now[0])
    assert throttle.tally("a") == 1
    assert [throttle.tally("a") for _ in range(5)] == [None] * 5
    assert throttle.tally("b", 3) == 3  # keys are independent
    now[0] = 10.0
    assert throttle.tally("a", 2) == 7
    assert throttle.tally("a") is None
