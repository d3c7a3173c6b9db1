"""Rate limits for log lines that a client or a flood could otherwise repeat without end."""

from __future__ import annotations

import time
from collections.abc import Callable


class LogThrottle:
    """At most one line per key per ``interval_s``; what was held back is reported with it.

    ``tally(key, n)`` adds ``n`` occurrences. It returns the occurrences since the key's last
    line (these ``n`` included) when a line may be written now, else None. The first
    occurrence of a key is always let through, so a quiet daemon logs the first problem at once.
    """

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def tally(self, key: str, n: int = 1) -> int | None:
        """Count ``n`` occurrences of ``key``; return how many to report now, or None."""
        held = self._held.get(key, 0) + n
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = held
            return None
        self._last[key] = now
        self._held[key] = 0
        return held
