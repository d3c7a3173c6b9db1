"""Which rule alerts the webhook reports firing that the features mode's reads never list.

In the ``features`` mode a read of ``ALERTS`` is the truth at its instant and the webhook
only adds alerts that started after it (``recorded_incidents.firing_at_read``). A read path
that never lists ``ALERTS`` (a label-enforcing proxy or a tenant that filters the series, a
Thanos or Mimir querier that does not reach the ruler's alerts, a daemon pointed at another
Prometheus than the one whose rules fire) therefore drops every webhook alert without a
trace. :class:`HiddenAlerts` tells such an alert apart from a resolved one, and
:class:`HiddenAlertWarnings` says when to warn of it again; the policy stays that the read
wins, so nothing opens on a hidden alert. Nothing here does I/O.

An alert is hidden at a read when the webhook holds it as firing with a known ``startsAt``,
the read asked for ``ALERTS`` and succeeded, the read does not list it, its instant is
more than :func:`hidden_after_s` past the alert's start, and no read ever listed it since
the webhook told of it. The last condition keeps a resolution Alertmanager never delivered
(the reads listed the alert, then stopped) from reading as hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tritonguard.core.feature_rows import FeatureSnapshot
from tritonguard.core.features import SubjectKey
from tritonguard.core.recorded_incidents import FiringCause
from tritonguard.core.rules_export import alert_name

# Rule evaluations an alert's ALERTS series may lag its ``startsAt``. Its sample is written
# when the evaluation that fired it ends, which may be up to one evaluation after the
# instant it is stamped with; a ruler that is not the queried server (Thanos Ruler, Mimir's
# ruler writing remotely) or a ruler whose clock runs ahead of the daemon's can add about
# one more. A read inside that lag legitimately misses an alert just fired.
HIDDEN_AFTER_EVALUATIONS = 2
# How often one alert name's warning repeats while the same subjects stay hidden.
DEFAULT_REPEAT_S = 600.0
# Subjects a warning names; the rest are counted.
SHOWN_SUBJECTS = 10


def hidden_after_s(evaluation_interval_s: float, read_interval_s: float) -> float:
    """Return how long past its ``startsAt`` an alert may be absent from a read, and not hidden.

    An alert just fired can be up to ``HIDDEN_AFTER_EVALUATIONS`` evaluations ahead of what
    a query of ``ALERTS`` answers, and a read's instant is taken when it starts, so the read
    that first could list it may come up to one read interval after that: a read within
    this bound proves nothing, one past it should have listed the alert.
    """
    return HIDDEN_AFTER_EVALUATIONS * evaluation_interval_s + read_interval_s


@dataclass(frozen=True, slots=True)
class HiddenAlert:
    """One alert the webhook reports firing that a read of ``ALERTS`` should have listed.

    ``absent_s`` is how long it has fired, by its ``startsAt``, at the read's instant.
    """

    key: SubjectKey
    cause: str
    started: float
    absent_s: float

    @property
    def alertname(self) -> str:
        """Return the rule alert's name (``TritonguardBatchingDelay``, ...)."""
        return alert_name(self.cause)

    @property
    def subject(self) -> str:
        """Return the subject as ``namespace/pod/model``."""
        return "/".join(self.key)


class HiddenAlerts:
    """Judge each read against the webhook's firing alerts; remember which reads listed them.

    ``bound_s`` is :func:`hidden_after_s`. The alerts some read listed are kept by subject,
    cause and ``startsAt`` for as long as the webhook holds them, so memory follows the
    webhook's own bounded book.
    """

    def __init__(self, *, bound_s: float) -> None:
        self.bound_s = bound_s
        self._listed: set[tuple[SubjectKey, str, float]] = set()

    def judge(
        self,
        snapshot: FeatureSnapshot | None,
        heard: Mapping[SubjectKey, Mapping[str, FiringCause]],
    ) -> list[HiddenAlert] | None:
        """Return the webhook's alerts hidden from this read; None if the read cannot tell.

        A read that failed or did not ask for ``ALERTS`` says nothing of what it would list.
        """
        if snapshot is None or not snapshot.ok or snapshot.alerts is None:
            return None
        listed, at = snapshot.alerts, snapshot.at
        held: set[tuple[SubjectKey, str, float]] = set()
        hidden: list[HiddenAlert] = []
        for key, causes in heard.items():
            for cause, firing in causes.items():
                started = firing.started
                if started is None:
                    # Without a start there is no telling when the read should list it.
                    continue
                ident = (key, cause, started)
                held.add(ident)
                if cause in listed.get(key, ()):
                    self._listed.add(ident)
                elif ident not in self._listed and at - started > self.bound_s:
                    hidden.append(HiddenAlert(key, cause, started, at - started))
        self._listed &= held
        return sorted(hidden, key=lambda h: (h.alertname, h.key))


def by_alert(hidden: Iterable[HiddenAlert]) -> dict[str, list[HiddenAlert]]:
    """Return the hidden alerts by alert name, each name's subjects in order."""
    out: dict[str, list[HiddenAlert]] = {}
    for alert in sorted(hidden, key=lambda h: (h.alertname, h.key)):
        out.setdefault(alert.alertname, []).append(alert)
    return out


class HiddenAlertWarnings:
    """When to warn of an alert name's hidden alerts: not every read, but not only once.

    A name is due when it is newly hidden, when a subject not in its last warning joined
    it, or ``repeat_s`` after its last warning while it stays hidden. A subject leaving the
    set is no news. State is kept per alert name (at most the nine causes' names).
    """

    def __init__(self, repeat_s: float = DEFAULT_REPEAT_S) -> None:
        self.repeat_s = repeat_s
        self._warned: dict[str, tuple[frozenset[SubjectKey], float]] = {}

    def due(self, hidden: Mapping[str, Iterable[HiddenAlert]], now: float) -> list[str]:
        """Return the alert names to warn about now (and note them warned)."""
        out: list[str] = []
        for name in [n for n in self._warned if n not in hidden]:
            del self._warned[name]
        for name, alerts in sorted(hidden.items()):
            subjects = frozenset(a.key for a in alerts)
            if not subjects:
                continue
            last = self._warned.get(name)
            if last is None or not subjects <= last[0] or now - last[1] >= self.repeat_s:
                self._warned[name] = (subjects, now)
                out.append(name)
        return out
