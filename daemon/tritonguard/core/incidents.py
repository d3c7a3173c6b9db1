"""Incident state machine: open when a finding holds, update, resolve with hysteresis."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tritonguard.core.findings import CAUSES, EventKind, Finding, IncidentEvent, Subject
from tritonguard.core.thresholds import Thresholds

if TYPE_CHECKING:
    from tritonguard.core.config_changes import ConfigChange


@dataclass(slots=True)
class _Candidate:
    since: float
    evaluations: int
    last: Finding


@dataclass(slots=True)
class _Open:
    incident_id: str
    opened_at: float
    finding: Finding
    last_match: float
    last_event: float
    secondary: list[str]
    # The incident as last announced (opened/updated): what playbooks act on between
    # transitions, so an action renders the numbers the incident stream reported.
    announced: IncidentEvent | None = None
    # Announce the next reading whatever changed: the model's config was read anew, and
    # what the incident says of it (max_queue_delay, instance count) was read from the old.
    stale: bool = False


@dataclass(slots=True)
class _SubjectState:
    candidates: dict[str, _Candidate] = field(default_factory=dict)
    open: _Open | None = None


def _rank(f: Finding) -> tuple[float, int]:
    # Ties go to the cause earlier in the catalogue, so the primary choice is deterministic.
    return (f.confidence, -CAUSES.index(f.cause))


class IncidentBook:
    """One open incident per subject at most; the primary cause leads, others are secondary."""

    def __init__(
        self,
        thresholds: Thresholds,
        change_of: Callable[[Subject, float], ConfigChange | None] = lambda s, t: None,
    ) -> None:
        self.t = thresholds
        self._state: dict[Subject, _SubjectState] = {}
        # The config change an incident opened at a time followed, if any: named in every
        # transition, so a reread after the incident opened shows in its next update.
        self._change_of = change_of

    def open_incidents(self) -> list[IncidentEvent]:
        """Return the incidents open now, as 'updated'-style records."""
        out = []
        for subject, st in sorted(self._state.items(), key=lambda kv: kv[0].key()):
            if st.open is not None:
                out.append(self._event("updated", subject, st.open, st.open.last_match))
        return out

    def announced(self) -> list[IncidentEvent]:
        """Return each open incident as its last opened/updated event announced it."""
        out = []
        for _, st in sorted(self._state.items(), key=lambda kv: kv[0].key()):
            if st.open is not None and st.open.announced is not None:
                out.append(replace(st.open.announced))
        return out

    def config_read(self, subject: Subject) -> None:
        """Say the subject's model config changed: its open incident is announced again."""
        st = self._state.get(subject)
        if st is not None and st.open is not None:
            st.open.stale = True

    def is_open(self, subject: Subject) -> bool:
        """Whether the subject has an open incident."""
        st = self._state.get(subject)
        return st is not None and st.open is not None

    def observe(
        self,
        subject: Subject,
        findings: list[Finding],
        now: float,
        interval_s: float,
        recovered: bool,
    ) -> list[IncidentEvent]:
        """Feed one evaluation's findings for a subject with fresh data; return transitions.

        ``recovered`` says the symptom is gone (latency back near baseline by counter rates),
        which resolution requires in addition to the finding's absence.
        """
        st = self._state.setdefault(subject, _SubjectState())
        holding = {f.cause: f for f in findings if f.confidence >= self.t.close_confidence}
        strong = {c: f for c, f in holding.items() if f.confidence >= self.t.open_confidence}
        for cause in list(st.candidates):
            if cause not in strong:
                del st.candidates[cause]
        for cause, f in strong.items():
            cand = st.candidates.get(cause)
            if cand is None:
                st.candidates[cause] = _Candidate(now, 1, f)
            else:
                cand.evaluations += 1
                cand.last = f
        events: list[IncidentEvent] = []
        resolve_after = max(self.t.resolve_after_s, self.t.resolve_after_scrapes * interval_s)
        if st.open is not None:
            inc = st.open
            current = holding.get(inc.finding.cause)
            rival = self._held(st, now, interval_s)
            if (
                current is not None
                and rival is not None
                and rival.cause != current.cause
                and rival.confidence >= current.confidence + self.t.supersede_margin
            ):
                # A clearly stronger cause has held as long as any new incident must: the
                # first diagnosis was the early view of it (overload turning into a retry
                # storm), and its playbooks, not the weaker cause's, should act now.
                ev = self._event("resolved", subject, inc, now)
                ev.summary = f"Superseded by {rival.cause}: {rival.summary}"
                events.append(ev)
                st.open = None
                current = None
            if st.open is not None and current is not None:
                inc.last_match = now
                changed = abs(current.confidence - inc.finding.confidence) >= 0.15
                secondary = sorted(c for c in holding if c != current.cause)
                inc.finding = current
                # A config change read after the incident opened (the daemon rereads configs
                # on every opening) is news to whoever acts on the incident.
                announced = inc.announced.change if inc.announced is not None else None
                news = self._change_of(subject, inc.opened_at) != announced
                if inc.stale or (
                    (changed or news or secondary != inc.secondary)
                    and now - inc.last_event >= self.t.update_min_interval_s
                ):
                    inc.stale = False
                    inc.secondary = secondary
                    inc.last_event = now
                    inc.announced = self._event("updated", subject, inc, now)
                    events.append(inc.announced)
                return events
            if st.open is not None:
                if now - inc.last_match < resolve_after or not (recovered or rival is not None):
                    return events
                events.append(self._event("resolved", subject, inc, now))
                st.open = None
        rival = self._held(st, now, interval_s)
        if rival is not None:
            secondary = sorted(c for c in holding if c != rival.cause)
            st.open = _Open(self._id(subject, rival.cause, now), now, rival, now, now, secondary)
            st.candidates.clear()
            st.open.announced = self._event("opened", subject, st.open, now)
            events.append(st.open.announced)
        return events

    def _held(self, st: _SubjectState, now: float, interval_s: float) -> Finding | None:
        slow = interval_s >= self.t.hold_single_scrape_s
        # A settled reading already rests on a scrape after its evidence: it holds at once.
        held = [
            c.last
            for c in st.candidates.values()
            if slow
            or c.last.settled
            or (c.evaluations >= self.t.hold_evaluations and now - c.since >= self.t.hold_s)
        ]
        if not held:
            return None
        best = max(held, key=_rank)
        # A stronger reading forming now waits out its hold rather than let a weaker one that
        # happened to appear a scrape earlier open first (an overload becoming a retry storm).
        forming = max((c.last for c in st.candidates.values()), key=_rank)
        return best if forming.cause == best.cause else None

    def forget(self, subject: Subject, now: float) -> list[IncidentEvent]:
        """Close the incident of a subject that vanished for longer than the retention."""
        st = self._state.pop(subject, None)
        if st is None or st.open is None:
            return []
        ev = self._event("resolved", subject, st.open, now)
        ev.summary = (
            f"{subject.model} stopped reporting metrics; incident closed without recovery evidence."
        )
        ev.recovered = False
        return [ev]

    @staticmethod
    def _id(subject: Subject, cause: str, now: float) -> str:
        raw = f"{cause}|{subject.key()}|{now:.3f}".encode()
        return "inc-" + hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:12]

    def _event(self, kind: EventKind, subject: Subject, inc: _Open, now: float) -> IncidentEvent:
        f = inc.finding
        summary = f.summary
        if kind == "resolved":
            summary = f"Recovered: {f.cause} on {subject.model} no longer holds. Was: {f.summary}"
        return IncidentEvent(
            event=kind,
            incident_id=inc.incident_id,
            cause=f.cause,
            subject=subject,
            at=now,
            confidence=f.confidence,
            summary=summary,
            evidence=dict(f.evidence),
            fix=f.fix,
            opened_at=inc.opened_at,
            secondary=list(inc.secondary),
            change=self._change_of(subject, inc.opened_at),
        )
