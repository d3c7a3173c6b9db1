"""Flight recorder: save each incident's series, from before onset to resolution, as a trace."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tritonguard.core.config_info import change_samples
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.samples import Sample, label
from tritonguard.core.trace_writer import render_trace_gz
from tritonguard.runtime.audit_store import AuditStore


def relevant(sample: Sample, subject: Subject) -> bool:
    """Return True when a sample belongs to the subject's model, or to its pod/node without a model.

    Host-, pod- and node-level series (CPU, GPU, HPA) carry no ``model`` label and are kept:
    signatures need them to tell the causes apart.
    """
    model = label(sample.labels, "model")
    if model and model != subject.model:
        return False
    namespace = label(sample.labels, "namespace")
    if namespace and subject.namespace and namespace != subject.namespace:
        return False
    pod = label(sample.labels, "pod")
    return not (pod and subject.pod and pod != subject.pod)


@dataclass(slots=True)
class _Capture:
    subject: Subject
    samples: list[Sample] = field(default_factory=list)
    # What the incident followed, as the trace's change series (config_info): kept apart so
    # the memory bound's trimming of old samples never drops them.
    notes: list[Sample] = field(default_factory=list)

    def note(self, event: IncidentEvent) -> None:
        """Keep the change the incident names, so its trace replays to the same change."""
        if event.change is None:
            return
        for sample in change_samples(event.subject, event.change):
            if sample not in self.notes:
                self.notes.append(sample)


# A recorded sample (its object, its own label tuple from the parser, two floats), measured
# with tracemalloc at about 550 bytes; rounded up so the bound holds.
SAMPLE_BYTES = 600


class FlightRecorder:
    """Ring buffer of recent samples plus one capture per open incident, within a memory bound.

    ``pre_s`` is how much history before the onset a trace keeps. ``max_bytes`` bounds ring
    and captures together: the ring gets half, the open captures share the other half, and
    each drops its oldest samples beyond its part, so a long incident or a large fleet cannot
    exhaust memory. ``dropped`` counts what was let go.
    """

    def __init__(
        self,
        directory: Path,
        store: AuditStore,
        *,
        pre_s: float = 300.0,
        max_bytes: int = 96 * 1024 * 1024,
    ) -> None:
        self.directory = directory
        self.store = store
        self.pre_s = pre_s
        self.max_samples = max(1000, max_bytes // SAMPLE_BYTES)
        self.dropped = 0
        self._ring: deque[Sample] = deque()
        self._captures: dict[str, _Capture] = {}

    def held(self) -> int:
        """Return how many samples the ring and the open captures hold."""
        return len(self._ring) + sum(len(c.samples) for c in self._captures.values())

    def _ring_cap(self) -> int:
        return self.max_samples // 2

    def _capture_cap(self) -> int:
        return max(1, self.max_samples // 2 // max(1, len(self._captures)))

    def observe(self, samples: Iterable[Sample], now: float) -> None:
        """Add samples (timestamps default to ``now``) to the ring and to open captures."""
        timed = [
            s if s.timestamp is not None else Sample(s.name, s.labels, s.value, now)
            for s in samples
        ]
        self._ring.extend(timed)
        horizon = now - self.pre_s
        while self._ring and (self._ring[0].timestamp or 0.0) < horizon:
            self._ring.popleft()
        ring_cap = self._ring_cap()
        while len(self._ring) > ring_cap:
            self._ring.popleft()
            self.dropped += 1
        per_capture = self._capture_cap()
        for cap in self._captures.values():
            cap.samples.extend(s for s in timed if relevant(s, cap.subject))
            if len(cap.samples) > per_capture:
                extra = len(cap.samples) - per_capture
                del cap.samples[:extra]
                self.dropped += extra

    def on_event(self, event: IncidentEvent) -> Path | None:
        """Start a capture on open; write the trace on resolve and return its path."""
        if event.event == "opened" and event.incident_id not in self._captures:
            start = event.opened_at - self.pre_s
            cap = _Capture(event.subject)
            cap.samples = [
                s
                for s in self._ring
                if (s.timestamp or 0.0) >= start and relevant(s, event.subject)
            ]
            self._captures[event.incident_id] = cap
            cap.note(event)
            return None
        held = self._captures.get(event.incident_id)
        if held is not None:
            # An update may name a change read only after the opening.
            held.note(event)
        if event.event == "resolved":
            done = self._captures.pop(event.incident_id, None)
            if done is None or not done.samples:
                return None
            return self._write(event.incident_id, done.notes + done.samples)
        return None

    def flush(self) -> list[Path]:
        """Write every open capture (on shutdown) so nothing recorded is lost."""
        paths = [
            self._write(i, c.notes + c.samples) for i, c in self._captures.items() if c.samples
        ]
        self._captures.clear()
        return paths

    def _write(self, incident_id: str, samples: list[Sample]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in incident_id)
        path = self.directory / f"{safe}.om.gz"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(render_trace_gz(samples))
        tmp.replace(path)
        self.store.set_trace(incident_id, str(path))
        return path
