"""Which rule alerts fire, as a read of ``ALERTS`` says and as the webhook adds between reads."""

from __future__ import annotations

from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.feature_rows import (
    CAUSE_OF_ALERT,
    Row,
    SnapshotBuilder,
    alerts_query,
    failed_snapshot,
)
from tritonguard.core.findings import CAUSES, Subject
from tritonguard.core.recorded_incidents import (
    CauseAlerts,
    FiringCause,
    RecordedIncidents,
    firing_at_read,
    started_at,
)
from tritonguard.core.rules_export import compile_rules
from tritonguard.core.thresholds import Thresholds
from tritonguard.runtime.alertmanager_webhook import Alert

T = Thresholds()
SUBJECT = Subject("prod", "resnet", "triton-0")
KEY = ("prod", "triton-0", "resnet")
OTHER = ("prod", "triton-1", "resnet")


def _alert_row(of: str = "batching_delay", **labels: str) -> Row:
    """Return one ALERTS series of the cause alert of ``of`` firing on ``KEY``.

    ``labels`` override its labels; an empty one is left out.
    """
    base = {
        "__name__": "ALERTS",
        "alertname": "Tritonguard" + "".join(p.capitalize() for p in of.split("_")),
        "alertstate": "firing",
        "cause": of,
        "namespace": "prod",
        "pod": "triton-0",
        "model": "resnet",
    }
    return Row({k: v for k, v in {**base, **labels}.items() if v}, 1.0)


def _read(at: float, *alerts: Row, symptom: bool = True) -> SnapshotBuilder:
    """Return a read at ``at`` of the subject and the given alert rows.

    Sick, it shows the symptom and the batcher's recorded confidence; well, neither.
    """
    subject = {"namespace": "prod", "pod": "triton-0", "model": "resnet"}
    b = SnapshotBuilder(T, 15.0, at)
    b.add("request_rate", [Row(subject, 40.0)])
    if symptom:
        b.add("symptom", [Row(subject, 1.0)])
        b.add("cause_confidence", [Row({**subject, "cause": "batching_delay"}, 0.8)])
    b.add_alerts(alerts)
    return b


def _heard(
    seen: float, started: float | None
) -> dict[tuple[str, str, str], dict[str, FiringCause]]:
    """Return the webhook's view: batching_delay on KEY, heard at ``seen``, started at ``started``."""
    return {
        KEY: {"batching_delay": FiringCause("batching_delay", {"summary": "told"}, seen, started)}
    }


def test_the_alerts_query_selects_exactly_the_exported_rules_cause_alerts() -> None:
    """One instant selector of the nine cause alerts the rule export writes, firing only.

    The names are the export's own alerts, each labelled with its cause, so a renamed or
    added alert in the export would leave this selector behind and fail here.
    """
    exported = {r.alert: r.labels.get("cause") for r in compile_rules(T, 15.0) if r.alert}
    assert exported == CAUSE_OF_ALERT and set(exported.values()) == set(CAUSES)
    query = alerts_query()
    assert query.startswith('ALERTS{alertstate="firing", alertname=~"') and 'cause!=""' in query
    assert query.count("|") == len(CAUSES) - 1
    assert all(name in query for name in exported)


def test_alert_rows_become_the_causes_firing_for_each_subject() -> None:
    """Firing cause alerts are kept by subject; others are left out, malformed ones counted.

    A row without a cause label, with a cause not its alert's, or without namespace and
    model is counted as unlabelled; a pending alert and an alert that is not the rules'
    are not causes, silently; an HA pair's two copies of one alert are one firing cause,
    not a conflict.
    """
    b = SnapshotBuilder(T, 15.0, 1000.0)
    b.add_alerts(
        [
            _alert_row(replica="a"),
            _alert_row(replica="b"),
            _alert_row("retry_storm", alertstate="pending"),
            _alert_row("cold_start", cause=""),
            _alert_row("cold_start", cause="retry_storm"),
            _alert_row("memory_copy", namespace=""),
            _alert_row("memory_copy", model=""),
            _alert_row(alertname="TritonSLOBurn"),
            _alert_row("model_reload", pod="triton-1"),
        ]
    )
    snap = b.build()
    assert snap.alerts == {
        KEY: frozenset({"batching_delay"}),
        OTHER: frozenset({"model_reload"}),
    }
    assert snap.problems() == {"unlabelled": 4}


def test_a_read_without_the_alerts_query_names_no_alerts_but_an_empty_answer_names_none() -> None:
    """None means the read did not ask (the webhook alone says); {} means nothing fires."""
    assert SnapshotBuilder(T, 15.0, 1000.0).build().alerts is None
    assert failed_snapshot(1000.0, 15.0, 60.0, "down").alerts is None
    empty = SnapshotBuilder(T, 15.0, 1000.0)
    empty.add_alerts([])
    assert empty.build().alerts == {}


def test_the_read_wins_and_the_webhook_only_adds_what_started_after_it() -> None:
    """At a read, ``ALERTS`` decides; the webhook adds only alerts begun after the read.

    An alert the read lists fires, with the webhook's annotations when it told of it too;
    one the webhook still holds from before the read but the read lacks does not (a lost
    resolution); one heard after the read but firing since before it does not either (a
    repeated notification of what the read saw gone); one heard after and started after
    the read does. Without the read's alerts the webhook alone says.
    """
    read = _read(1000.0, _alert_row("retry_storm")).build()
    told = {KEY: {"retry_storm": FiringCause("retry_storm", {"summary": "told"}, 990.0)}}
    got = firing_at_read(read, told)
    assert got == {KEY: {"retry_storm": told[KEY]["retry_storm"]}}
    bare = firing_at_read(read, {})
    assert bare == {KEY: {"retry_storm": FiringCause("retry_storm", {}, 1000.0)}}
    assert firing_at_read(read, _heard(990.0, 980.0)).get(KEY, {}).keys() == {"retry_storm"}
    assert firing_at_read(read, _heard(1005.0, 980.0))[KEY].keys() == {"retry_storm"}
    assert firing_at_read(read, _heard(1005.0, None))[KEY].keys() == {"retry_storm"}
    added = firing_at_read(read, _heard(1005.0, 1003.0))
    assert added[KEY].keys() == {"retry_storm", "batching_delay"}
    nothing = _read(1000.0).build()
    assert firing_at_read(nothing, _heard(990.0, 980.0)) == {}
    unasked = SnapshotBuilder(T, 15.0, 1000.0).build()
    assert firing_at_read(unasked, _heard(990.0, 980.0)) == _heard(990.0, 980.0)
    down = failed_snapshot(1000.0, 15.0, 60.0, "down")
    assert firing_at_read(down, _heard(990.0, 980.0)) == _heard(990.0, 980.0)


def test_the_webhook_keeps_when_an_alert_started_firing() -> None:
    """Alertmanager's ``startsAt`` is kept as epoch seconds; its zero time is unknown."""
    assert started_at("2024-01-01T00:00:00.123456789Z") == 1704067200.123456
    assert started_at("0001-01-01T00:00:00Z") is None
    assert started_at("") is None and started_at("yesterday") is None
    book = CauseAlerts(ttl_s=100.0, max_alerts=10)
    labels = {
        "alertname": "TritonguardBatchingDelay",
        "cause": "batching_delay",
        "namespace": "prod",
        "pod": "triton-0",
        "model": "resnet",
    }
    book.update([Alert("firing", labels, starts_at="2024-01-01T00:00:00Z")], 1704067210.0)
    (kept,) = book.firing(1704067210.0)[KEY].values()
    assert kept.started == 1704067200.0 and kept.seen == 1704067210.0


def _engine() -> tuple[Engine, RecordedIncidents]:
    """Return an engine and the recorded-incidents book that feeds it."""
    engine = Engine(EngineConfig(thresholds=T))
    return engine, RecordedIncidents(engine, max_age_s=30.0)


def test_a_read_alone_opens_and_resolves_without_any_notification() -> None:
    """No webhook at all: the read's alert opens the incident, its absence resolves it.

    As after a restart, the first read that lists the alert opens the incident; once a
    read no longer lists it and the features show recovery for the resolve time, the
    incident resolves with recovery evidence.
    """
    _, rec = _engine()
    (opened,) = rec.evaluate(_read(1000.0, _alert_row()).build(), {}, 1000.0)
    assert opened.event == "opened" and opened.subject == SUBJECT
    assert opened.cause == "batching_delay"
    assert rec.evaluate(_read(1001.0, symptom=False).build(), {}, 1001.0) == []
    later = 1001.0 + T.resolve_after_s + 1.0
    (resolved,) = rec.evaluate(_read(later, symptom=False).build(), {}, later)
    assert resolved.event == "resolved" and resolved.recovered


def test_a_lost_resolution_or_a_stale_notification_neither_holds_nor_reopens() -> None:
    """The webhook still says firing from before; the reads say gone: the incident resolves.

    After it resolved, a repeated notification of the alert (firing since before the
    reads) does not reopen it; an alert that really started again after the last read
    does, at once, and the next read that confirms it keeps it open.
    """
    engine, rec = _engine()
    webhook = _heard(999.0, 990.0)
    (opened,) = rec.evaluate(_read(1000.0, _alert_row()).build(), webhook, 1000.0)
    assert opened.event == "opened"
    t, events = 1001.0, []
    while engine.book.is_open(SUBJECT):
        assert t < 1001.0 + T.resolve_after_s + 30.0, "never resolved"
        events = rec.evaluate(_read(t, symptom=False).build(), webhook, t)
        t += 1.0
    assert [e.event for e in events] == ["resolved"]
    stale = _heard(t + 0.5, 990.0)
    assert rec.evaluate(_read(t, symptom=False).build(), stale, t + 0.6) == []
    assert not engine.book.is_open(SUBJECT)
    anew = _heard(t + 1.5, t + 1.2)
    (again,) = rec.evaluate(_read(t + 1.0).build(), anew, t + 1.6)
    assert again.event == "opened"
    confirmed = _read(t + 2.0, _alert_row()).build()
    assert [e.event for e in rec.evaluate(confirmed, anew, t + 2.0)] == []
    assert engine.book.is_open(SUBJECT)
