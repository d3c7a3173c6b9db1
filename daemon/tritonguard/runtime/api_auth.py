"""Bearer-token checks for the daemon's state-changing HTTP endpoints."""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal

Refusal = Literal["missing", "not_bearer", "wrong_token"]
REFUSALS: tuple[Refusal, ...] = ("missing", "not_bearer", "wrong_token")


class BearerToken:
    """The token clients must present as ``Authorization: Bearer <token>``.

    Only a digest is kept, and digests are compared in constant time: neither the content
    nor the length of the token leaks through how long a refusal takes.
    """

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would admit anyone")
        self._digest = _digest(token)

    def refusal(self, authorization: str | None) -> Refusal | None:
        """Return why an ``Authorization`` header value is refused, or None when it is accepted."""
        if authorization is None or not authorization.strip():
            return "missing"
        scheme, _, credentials = authorization.strip().partition(" ")
        # The scheme is case-insensitive (RFC 9110, section 11.1); the token is not.
        if scheme.lower() != "bearer" or not credentials.strip():
            return "not_bearer"
        if not hmac.compare_digest(_digest(credentials.strip()), self._digest):
            return "wrong_token"
        return None


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
