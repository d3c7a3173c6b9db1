"""URLs without their secrets: userinfo is split off for display and kept apart for auth."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

# ``scheme://userinfo@`` anywhere in a text. The userinfo runs to the last ``@`` before the
# path (a password with a raw ``@`` is common, if invalid), and ends at whitespace.
_USERINFO_IN_TEXT = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")


@dataclass(frozen=True, slots=True)
class BasicCredentials:
    """A username and password for HTTP basic authentication; the password stays out of repr."""

    username: str
    password: str = field(default="", repr=False)

    def authorization(self) -> str:
        """Return the ``Authorization`` header value (RFC 7617, UTF-8)."""
        # aiohttp 3.14 deprecates its BasicAuth helper, and the function replacing it does not
        # exist in the older releases the project supports; the encoding is one line anyway.
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"


def split_userinfo(url: str) -> tuple[str, BasicCredentials | None]:
    """Return ``url`` without its ``user:password@`` part, and the credentials it held.

    Percent-escapes in the userinfo are decoded, as browsers and HTTP clients do, so
    ``p%40ss`` authenticates as ``p@ss``. A URL without userinfo comes back unchanged.
    """
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return url, None
    username, _, password = userinfo.partition(":")
    clean = urlunsplit(parts._replace(netloc=hostport))
    return clean, BasicCredentials(unquote(username), unquote(password))


def redact_url(url: str) -> str:
    """Return ``url`` without its userinfo, fit for logs, labels and error messages."""
    return split_userinfo(url)[0]


def redact_text(text: str) -> str:
    """Remove the userinfo of every URL inside a free text (an error message from a library)."""
    return _USERINFO_IN_TEXT.sub(r"\g<scheme>", text)
