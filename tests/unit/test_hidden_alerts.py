"""Which webhook alerts the features mode's reads of ``ALERTS`` hide, and when to warn of them."""

from __future__ import annotations

from tritonguard.core.feature_rows import FeatureSnapshot, Row, SnapshotBuilder, failed_snapshot
from tritonguard.core.features import SubjectKey
from tritonguard.core.hidden_alerts import (
    HiddenAlert,
    HiddenAlerts,
    HiddenAlertWarnings,
    by_alert,
    hidden_after_s,
)
from tritonguard.core.recorded_incidents import FiringCause, firing_at_read
from tritonguard.core.thresholds import Thresholds

T = Thresholds()
KEY = ("prod", "triton-0", "resnet")
OTHER = ("prod", "triton-1", "resnet")
# Rules evaluated and read every 15 s.
BOUND = hidden_after_s(15.0, 15.0)


def _read(at: float, *listed: SubjectKey, asked: bool = True) -> FeatureSnapshot:
    """Return a good read at ``at`` whose ALERTS lists batching_delay on ``listed``."""
    b = SnapshotBuilder(T, 15.0, at)
    if asked:
        b.add_alerts(
            Row(
                {
                    "alertname": "TritonguardBatchingDelay",
                    "alertstate": "firing",
                    "cause": "batching_delay",
                    "namespace": key[0],
                    "pod": key[1],
                    "model": key[2],
                },
                1.0,
            )
            for key in listed
        )
    return b.build()


def _heard(
    started: float | None, *keys: SubjectKey, seen: float = 990.0
) -> dict[SubjectKey, dict[str, FiringCause]]:
    """Return the webhook's book: batching_delay firing on ``keys`` since ``started``."""
    keys = keys or (KEY,)
    return {k: {"batching_delay": FiringCause("batching_delay", {}, seen, started)} for k in keys}


def test_the_bound_is_two_evaluations_and_a_read() -> None:
    """An alert may lag its startsAt by two rule evaluations, and the read by one interval.

    With rules evaluated every 15 s and read every 30 s an alert is given 60 s; with both
    at 15 s, 45 s.
    """
    assert hidden_after_s(15.0, 30.0) == 60.0
    assert BOUND == 45.0


def test_an_alert_no_read_lists_past_the_bound_is_hidden_and_still_opens_nothing() -> None:
    """The webhook says it fires since 900 s, reads never list it: hidden once past the bound.

    A read 30 s after its start is within the bound (the ruler may not have written it yet)
    and proves nothing; the read at 1000 s, 100 s after, should have listed it, so it is
    hidden, named by its alert and subject. The read still wins: nothing fires for the
    incident book, as before.
    """
    hidden = HiddenAlerts(bound_s=BOUND)
    heard = _heard(900.0)
    assert hidden.judge(_read(930.0), heard) == []
    got = hidden.judge(_read(1000.0), heard)
    assert got == [HiddenAlert(KEY, "batching_delay", 900.0, 100.0)]
    assert got[0].alertname == "TritonguardBatchingDelay"
    assert got[0].subject == "prod/triton-0/resnet"
    assert firing_at_read(_read(1000.0), heard) == {}


def test_an_alert_a_read_listed_is_resolved_not_hidden_when_reads_stop_listing_it() -> None:
    """Listed by a read once, then absent: a resolution Alertmanager never delivered.

    The webhook still holds it as firing, but a read saw it, so the read path does show
    ALERTS; its absence later is the rule having stopped, not hidden. The other subject's
    alert, never listed, is hidden beside it.
    """
    hidden = HiddenAlerts(bound_s=BOUND)
    heard = _heard(900.0, KEY, OTHER)
    assert hidden.judge(_read(920.0, KEY), heard) == []
    later = hidden.judge(_read(1200.0), heard)
    assert later == [HiddenAlert(OTHER, "batching_delay", 900.0, 300.0)]


def test_a_new_firing_of_a_listed_alert_is_judged_anew() -> None:
    """A later firing of the same alert (a new startsAt) owes nothing to the old one's listing.

    The first firing was listed; the webhook forgot it (resolved) and then told of a new
    one from 2000 s, which no read lists: hidden past the bound.
    """
    hidden = HiddenAlerts(bound_s=BOUND)
    assert hidden.judge(_read(920.0, KEY), _heard(900.0)) == []
    assert hidden.judge(_read(1500.0), {}) == []
    assert hidden.judge(_read(2100.0), _heard(2000.0)) == [
        HiddenAlert(KEY, "batching_delay", 2000.0, 100.0)
    ]


def test_a_read_that_cannot_tell_judges_nothing() -> None:
    """A failed read, or one that did not ask for ALERTS, says nothing: None, not "none hidden".

    An alert whose startsAt the webhook did not give cannot be judged either: when it should
    be listed is unknown.
    """
    hidden = HiddenAlerts(bound_s=BOUND)
    heard = _heard(900.0)
    assert hidden.judge(None, heard) is None
    assert hidden.judge(failed_snapshot(1000.0, 15.0, 60.0, "down"), heard) is None
    assert hidden.judge(_read(1000.0, asked=False), heard) is None
    assert hidden.judge(_read(1000.0), _heard(None)) == []


def test_warnings_come_once_per_alert_and_subjects_then_every_repeat() -> None:
    """One warning for an alert name's hidden subjects, not one a read; news warns at once.

    The same subjects warn again only ``repeat_s`` later; a subject joining them warns at
    once; one leaving is no news; a name no longer hidden and hidden again warns at once.
    """
    one = [HiddenAlert(KEY, "batching_delay", 900.0, 100.0)]
    two = [*one, HiddenAlert(OTHER, "batching_delay", 950.0, 50.0)]
    gate = HiddenAlertWarnings(repeat_s=600.0)
    assert gate.due(by_alert(one), 1000.0) == ["TritonguardBatchingDelay"]
    assert gate.due(by_alert(one), 1015.0) == []
    assert gate.due(by_alert(two), 1030.0) == ["TritonguardBatchingDelay"]
    assert gate.due(by_alert(one), 1045.0) == []
    assert gate.due(by_alert(one), 1629.0) == []
    assert gate.due(by_alert(one), 1630.0) == ["TritonguardBatchingDelay"]
    assert gate.due({}, 1645.0) == []
    assert gate.due(by_alert(one), 1660.0) == ["TritonguardBatchingDelay"]
    retry = [HiddenAlert(KEY, "retry_storm", 900.0, 100.0)]
    assert gate.due(by_alert([*one, *retry]), 1675.0) == ["TritonguardRetryStorm"]
