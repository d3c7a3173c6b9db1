"""Firing Alertmanager alerts, kept so playbooks can match incidents on alert names too."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Literal

from tritonguard.core.findings import IncidentEvent
from tritonguard.logs import get_logger
from tritonguard.runtime.alertmanager_webhook import Alert
from tritonguard.runtime.log_throttle import LogThrottle

# Alertmanager re-sends firing alerts every repeat_interval (4 h by default) and always sends
# the resolution; an alert heard of in neither way for this long is dropped anyway, so a lost
# "resolved" notification cannot keep a playbook armed forever.
DEFAULT_TTL_S = 6 * 3600.0
# The same caps as settings.ApiSettings; the daemon passes the configured values.
DEFAULT_MAX_ALERTS = 10_000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
# A flood evicts on every notification; the log says so once a minute with the count.
EVICTION_LOG_INTERVAL_S = 60.0
# What the book's own index adds per entry: its OrderedDict slot and the entry record.
_ENTRY_OVERHEAD_BYTES = 200

Cap = Literal["max_alerts", "max_bytes"]
CAPS: tuple[Cap, ...] = ("max_alerts", "max_bytes")
EvictedCallback = Callable[[Cap, int], None]


@dataclass(frozen=True, slots=True)
class _Entry:
    alert: Alert
    seen: float
    size: int


def entry_size(key: str, alert: Alert) -> int:
    """Return the bytes one remembered alert holds, by Python's own object sizes.

    Strings that several alerts share (label names, "firing") are counted for each, so the
    estimate errs high: the book never holds more than its byte cap says.
    """
    labels, notes = alert.labels, alert.annotations
    strings = chain(
        (key, alert.status, alert.starts_at, alert.ends_at, alert.fingerprint),
        (alert.generator_url,),
        labels.keys(),
        labels.values(),
        notes.keys(),
        notes.values(),
    )
    objects = sys.getsizeof(alert) + sys.getsizeof(labels) + sys.getsizeof(notes)
    return _ENTRY_OVERHEAD_BYTES + objects + sum(map(sys.getsizeof, strings))


class AlertBook:
    """Alerts firing now, by fingerprint (or name + labels when Alertmanager gave none).

    The book holds at most ``max_alerts`` entries and ``max_bytes`` (see :func:`entry_size`).
    Beyond either cap the entries heard of least recently go first; each one dropped is
    reported to ``on_evicted`` (the daemon counts them) and logged, at most once a minute.
    """

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
        *,
        max_alerts: int = DEFAULT_MAX_ALERTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_evicted: EvictedCallback | None = None,
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_alerts = max_alerts
        self.max_bytes = max_bytes
        self.on_evicted = on_evicted
        self.evicted: dict[Cap, int] = dict.fromkeys(CAPS, 0)
        # Oldest first: a refreshed alert moves to the end, so expiry and eviction both
        # take from the front.
        self._firing: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._eviction_log = LogThrottle(EVICTION_LOG_INTERVAL_S, clock=clock)
        self._log = get_logger("tritonguard.alerts")

    @property
    def count(self) -> int:
        """Return how many alerts the book holds."""
        return len(self._firing)

    @property
    def bytes(self) -> int:
        """Return the bytes the held alerts take (see :func:`entry_size`)."""
        return self._bytes

    def update(self, alerts: Iterable[Alert]) -> None:
        """Apply one webhook notification: firing alerts are kept, resolved ones forgotten."""
        now = self.clock()
        self._expire(now)
        dropped: dict[Cap, int] = dict.fromkeys(CAPS, 0)
        for alert in alerts:
            key = alert.fingerprint or f"{alert.name}|{sorted(alert.labels.items())}"
            self._forget(key)
            if alert.status != "firing":
                continue
            entry = _Entry(alert, now, entry_size(key, alert))
            self._firing[key] = entry
            self._bytes += entry.size
            while self._firing and (
                len(self._firing) > self.max_alerts or self._bytes > self.max_bytes
            ):
                cap: Cap = "max_alerts" if len(self._firing) > self.max_alerts else "max_bytes"
                self._forget(next(iter(self._firing)))
                dropped[cap] += 1
        self._report(dropped)

    def names_for(self, event: IncidentEvent) -> frozenset[str]:
        """Names of firing alerts about the event's subject.

        An alert is about the subject unless one of its ``namespace``, ``model`` or ``pod``
        labels names something else; alerts without those labels apply everywhere.
        """
        self._expire(self.clock())
        subject = event.subject
        wanted = {"namespace": subject.namespace, "model": subject.model, "pod": subject.pod}
        names = set()
        for entry in self._firing.values():
            alert = entry.alert
            if all(alert.labels.get(k, v) == v or not v for k, v in wanted.items()) and alert.name:
                names.add(alert.name)
        return frozenset(names)

    def _forget(self, key: str) -> None:
        entry = self._firing.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size

    def _expire(self, now: float) -> None:
        while self._firing:
            key, oldest = next(iter(self._firing.items()))
            if now - oldest.seen <= self.ttl_s:
                return
            self._forget(key)

    def _report(self, dropped: dict[Cap, int]) -> None:
        for cap, n in dropped.items():
            if not n:
                continue
            self.evicted[cap] += n
            if self.on_evicted is not None:
                self.on_evicted(cap, n)
            since_last_line = self._eviction_log.tally(cap, n)
            if since_last_line is not None:
                self._log.warning(
                    "alert book full: oldest alerts dropped",
                    cap=cap,
                    limit=self.max_alerts if cap == "max_alerts" else self.max_bytes,
                    dropped=since_last_line,
                    dropped_total=self.evicted[cap],
                    held=len(self._firing),
                    held_bytes=self._bytes,
                )
