"""Firing Alertmanager alerts, kept so playbooks can match incidents on alert names too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from tritonguard.core.findings import IncidentEvent
from tritonguard.runtime.alertmanager_webhook import Alert

# Alertmanager re-sends firing alerts every repeat_interval (4 h by default) and always sends
# the resolution; an alert heard of in neither way for this long is dropped anyway, so a lost
# "resolved" notification cannot keep a playbook armed forever.
DEFAULT_TTL_S = 6 * 3600.0


class AlertBook:
    """Alerts firing now, by fingerprint (or name + labels when Alertmanager gave none)."""

    def __init__(
        self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._firing: dict[str, tuple[Alert, float]] = {}

    def update(self, alerts: Iterable[Alert]) -> None:
        """Apply one webhook notification: firing alerts are kept, resolved ones forgotten."""
        now = self.clock()
        for alert in alerts:
            key = alert.fingerprint or f"{alert.name}|{sorted(alert.labels.items())}"
            if alert.status == "firing":
                self._firing[key] = (alert, now)
            else:
                self._firing.pop(key, None)

    def names_for(self, event: IncidentEvent) -> frozenset[str]:
        """Names of firing alerts about the event's subject.

        An alert is about the subject unless one of its ``namespace``, ``model`` or ``pod``
        labels names something else; alerts without those labels apply everywhere.
        """
        now = self.clock()
        for key in [k for k, (_, seen) in self._firing.items() if now - seen > self.ttl_s]:
            del self._firing[key]
        subject = event.subject
        wanted = {"namespace": subject.namespace, "model": subject.model, "pod": subject.pod}
        names = set()
        for alert, _ in self._firing.values():
            if all(alert.labels.get(k, v) == v or not v for k, v in wanted.items()) and alert.name:
                names.add(alert.name)
        return frozenset(names)
