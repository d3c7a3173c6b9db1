"""Userinfo is split off URLs for display and kept, decoded, for basic authentication."""

from __future__ import annotations

import base64

import pytest

from tritonguard.core.urls import BasicCredentials, redact_text, redact_url, split_userinfo


@pytest.mark.parametrize(
    ("url", "clean", "creds"),
    [
        ("http://h:8002/metrics", "http://h:8002/metrics", None),
        ("http://u:p@h:8002/metrics?x=1", "http://h:8002/metrics?x=1", ("u", "p")),
        ("https://u@h/metrics", "https://h/metrics", ("u", "")),
        ("http://u:p%40ss%3A@[::1]:8002/m", "http://[::1]:8002/m", ("u", "p@ss:")),
        ("http://u:p@ss@h:8002/m", "http://h:8002/m", ("u", "p@ss")),
    ],
)
def test_split_userinfo(url: str, clean: str, creds: tuple[str, str] | None) -> None:
    """The clean URL keeps everything but the userinfo; escapes in the userinfo are decoded."""
    got_clean, got_creds = split_userinfo(url)
    assert got_clean == clean == redact_url(url)
    assert (None if got_creds is None else (got_creds.username, got_creds.password)) == creds


def test_password_stays_out_of_repr_and_goes_into_the_header() -> None:
    """The password is not in repr; the header is RFC 7617 basic auth in UTF-8."""
    creds = BasicCredentials("user", "pässword")
    assert "pässword" not in repr(creds)
    expected = base64.b64encode("user:pässword".encode()).decode()
    assert creds.authorization() == f"Basic {expected}"


def test_redact_text_strips_userinfo_of_every_url_in_a_message() -> None:
    """A library error quoting URLs loses their userinfo and keeps the rest word for word."""
    text = (
        "GET http://a:b@h1:1/x failed; redirected to https://tok@h2/y (user@example.org), "
        "then http://u:p@ss@h3 too"
    )
    assert redact_text(text) == (
        "GET http://h1:1/x failed; redirected to https://h2/y (user@example.org), then http://h3 too"
    )
