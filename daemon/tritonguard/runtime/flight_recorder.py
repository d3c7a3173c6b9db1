"""Flight recorder: save each incident's series, from before onset to resolution, as a trace."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tritonguard.core.config_info import change_samples
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.samples import Labels, Sample, label
from tritonguard.core.series_store import DROPPED, Series, SeriesStore
from tritonguard.core.targets import target_of
from tritonguard.core.trace_writer import render_trace_gz
from tritonguard.runtime.audit_store import AuditStore

# Families about a workload or a host rather than a pod: their series carry the exporter's
# own pod label (kube-state-metrics', the ingress controller's) or none (node-exporter, a
# DCGM exporter without pod mapping), so they are looked for across the whole family.
_WIDE_PREFIXES = ("kube_horizontalpodautoscaler_", "nginx_", "node_", "DCGM_")
# Families whose pod label is their exporter's: the engine joins them by workload name.
_WORKLOAD_PREFIXES = ("kube_horizontalpodautoscaler_", "nginx_")
# The families that say which pods serve a model (for a model-wide subject).
_SERVING = ("nv_inference_request_success", "nv_inference_exec_count")

# What a held point costs: 8 bytes in each of two float arrays plus their growth slack
# (the store measures 21.4 bytes for the same layout, series_store.POINT_BYTES).
POINT_BYTES = 24
# What a followed series costs besides its points: the track object (three slots), two
# empty arrays and its entry in the capture's map with the key tuple. Measured with
# tracemalloc over 5,000 tracks at 383 bytes each, which also counts the store's family
# index the capture had built; a point cost 16.8 bytes. Rounded up so the bound holds.
TRACK_BYTES = 400
# However tight the budget, a followed series keeps enough points for two rate windows
# at the coarsest scrape intervals, as the store does (series_store.MIN_POINTS_KEPT).
MIN_POINTS_KEPT = 16


def relevant(name: str, labels: Labels, subject: Subject) -> bool:
    """Return True when a series belongs to the subject's model, or to its pod/node without one.

    Host-, pod- and node-level series (CPU, GPU, HPA) carry no ``model`` label and are kept:
    signatures need them to tell the causes apart. The pod and namespace are the ones the
    series is about (``exported_pod`` before the scraping Prometheus' ``pod``), as the
    engine joins them; HPA and ingress series are kept by namespace, whatever exporter pod
    they came through.
    """
    model = label(labels, "model")
    if model and model != subject.model:
        return False
    namespace = target_of(labels)[0]
    if namespace and subject.namespace and namespace != subject.namespace:
        return False
    if name.startswith(_WORKLOAD_PREFIXES):
        return True
    pod = label(labels, "exported_pod") or label(labels, "pod") or label(labels, "pod_name")
    return not (pod and subject.pod and pod != subject.pod)


def _raw_values(series: Series, lo: int, hi: int) -> list[float]:
    """Return points ``lo:hi`` of a series as a scrape showed them (counters un-adjusted).

    The store adds to a counter, at each reset, the value it had just before; so after a
    reset at point k the offset is the stored value at k - 1, and after the newest reset it
    is ``series.offset``. Points before the oldest reset still in the window keep an offset
    the store has forgotten: written as stored they are shifted, never lower than the
    reset's value, so a replay still sees the reset and the same increases.
    """
    values = series.values
    if not series.counter:
        return list(values[lo:hi])
    resets = series.resets
    out: list[float] = []
    for i in range(lo, hi):
        k = bisect.bisect_right(resets, series.times[i])
        if k == len(resets):
            offset = series.offset
        elif k == 0:
            offset = 0.0
        else:
            at = series.at_or_before(resets[k - 1])
            offset = values[at - 1] if at >= 1 else 0.0
        out.append(values[i] - offset)
    return out


def _floats() -> array[float]:
    return array("d")


@dataclass(slots=True)
class _Track:
    """One followed series: the store's object, and the points copied from it so far."""

    series: Series
    times: array[float] = field(default_factory=_floats)
    values: array[float] = field(default_factory=_floats)

    def catch_up(self, since: float) -> int:
        """Copy the points the store gained after the last one taken (or from ``since``)."""
        s = self.series
        after = self.times[-1] if self.times else since
        lo = (
            bisect.bisect_right(s.times, after)
            if self.times
            else bisect.bisect_left(s.times, after)
        )
        hi = len(s.times)
        if lo < hi and s.born is not None and s.times[lo] == s.born:
            # The store's own zero at a counter's birth: a replay places it again from
            # the scrapes around it, so written it would place the birth a scrape earlier.
            lo += 1
        if lo >= hi:
            return 0
        self.times.extend(s.times[lo:hi])
        self.values.extend(_raw_values(s, lo, hi))
        return hi - lo

    def keep(self, points: int) -> int:
        """Keep the newest ``points``; return how many were let go."""
        extra = len(self.times) - points
        if extra <= 0:
            return 0
        del self.times[:extra]
        del self.values[:extra]
        return extra


@dataclass(slots=True)
class _Capture:
    subject: Subject
    start: float
    tracks: dict[tuple[str, Labels], _Track] = field(default_factory=dict)
    # The store's shape (series count, expiries) when the capture last looked for series.
    seen: tuple[int, int] = (-1, -1)
    # What the incident followed, as the trace's change series (config_info): kept apart so
    # the memory bound's trimming of old points never drops them.
    notes: list[Sample] = field(default_factory=list)

    def note(self, event: IncidentEvent) -> None:
        """Keep the change the incident names, so its trace replays to the same change."""
        if event.change is None:
            return
        for sample in change_samples(event.subject, event.change):
            if sample not in self.notes:
                self.notes.append(sample)

    def points(self) -> int:
        """Return how many points the capture holds."""
        return sum(len(t.times) for t in self.tracks.values())

    def samples(self) -> list[Sample]:
        """Return the capture as timestamped samples, change series first."""
        out = list(self.notes)
        for (name, labels), track in self.tracks.items():
            out.extend(
                Sample(name, labels, v, t) for t, v in zip(track.times, track.values, strict=True)
            )
        return out


def _pods_of(store: SeriesStore, subject: Subject) -> list[str]:
    """Return the pods whose series a subject's capture follows: its own, or its model's."""
    if subject.pod:
        return [subject.pod]
    pods: dict[str, None] = {}
    for name in _SERVING:
        for s in store.index(name).by_subject.get((subject.namespace, "", subject.model), ()):
            pods[target_of(s.labels)[1]] = None
    return list(pods)


def _nodes_of(store: SeriesStore, subject: Subject, pods: list[str]) -> frozenset[str]:
    """Return the node names and host addresses kube-state-metrics places the pods on."""
    by_pod = store.index("kube_pod_info").by_pod
    names: set[str] = set()
    for pod in pods:
        for ns, s in by_pod.get(pod, ()):
            if ns in ("", subject.namespace) or not subject.namespace:
                names.update((label(s.labels, "node"), label(s.labels, "host_ip")))
    return frozenset(names - {""})


def _on_nodes(labels: Labels, nodes: frozenset[str]) -> bool:
    """Return whether a node-exporter series is one of ``nodes``' (by name or host)."""
    return label(labels, "node") in nodes or label(labels, "instance").rsplit(":", 1)[0] in nodes


def _relevant_series(store: SeriesStore, subject: Subject) -> list[Series]:
    """Return the store's series relevant to a subject, found through its family indexes.

    Pod-level families are read from the subject's pods' buckets only, so the cost does
    not grow with the fleet; workload and host families are read whole (a series per
    deployment or GPU). node-exporter's series are kept for the nodes the subject's pods
    run on, as the engine joins them (by kube_pod_info's node and host IP); a fleet's
    every node and CPU would be most of the capture (50 nodes: 3,200 of 3,300 series).
    Without a placement they are all kept, as the engine reads them when one node is in
    view.
    """
    pods = _pods_of(store, subject)
    nodes = _nodes_of(store, subject, pods)
    out: list[Series] = []
    for name in store.names():
        by_pod = store.index(name).by_pod
        wide = name.startswith(_WIDE_PREFIXES)
        buckets = list(by_pod.values()) if wide else [by_pod[p] for p in pods if p in by_pod]
        placed = bool(nodes) and name.startswith("node_")
        for bucket in buckets:
            out.extend(
                s
                for _, s in bucket
                if relevant(name, s.labels, subject) and (not placed or _on_nodes(s.labels, nodes))
            )
    return out


class FlightRecorder:
    """One capture per open incident, read from the engine's series store, within a bound.

    The engine's store already holds every consumed series' points for at least the
    diagnosis' period lookback (7 min, longer than ``pre_s``), so the recorder keeps no copy
    of the stream: at an incident's opening it takes the subject's series from ``pre_s``
    before onset on, and at each ``observe`` (every poll) and event it copies the points the
    store gained since (a cursor per series: the last time taken), so an incident longer
    than the store keeps points for keeps its start. Its
    memory grows with the open incidents, not with the fleet.

    ``max_bytes`` bounds the open captures together: each gets an equal share, and drops
    the oldest points of each series beyond it, so a long incident cannot exhaust memory.
    ``dropped`` counts the points let go.
    """

    def __init__(
        self,
        directory: Path,
        store: AuditStore,
        series: SeriesStore,
        *,
        pre_s: float = 300.0,
        max_bytes: int = 96 * 1024 * 1024,
    ) -> None:
        self.directory = directory
        self.store = store
        self.series = series
        self.pre_s = pre_s
        self.max_bytes = max_bytes
        self.dropped = 0
        self._captures: dict[str, _Capture] = {}

    def held(self) -> int:
        """Return how many points the open captures hold."""
        return sum(c.points() for c in self._captures.values())

    def held_bytes(self) -> int:
        """Return what the open captures cost, as the memory bound counts it."""
        return sum(
            c.points() * POINT_BYTES + len(c.tracks) * TRACK_BYTES for c in self._captures.values()
        )

    def observe(self, samples: Iterable[Sample], now: float) -> None:
        """Copy into every open capture what the store gained since the last look.

        ``samples`` (the poll's, or none when a scrape wrote the store directly) is not
        read: the engine's store is the source either way, and the poll has fed it already.
        """
        del samples, now
        for cap in self._captures.values():
            self._catch_up(cap)

    def _catch_up(self, cap: _Capture) -> None:
        store = self.series
        shape = (len(store), store.generation)
        if shape != cap.seen:
            # Series came or went: follow new relevant ones, and pick up again any the
            # store dropped and took in anew (a new object under the same labels).
            cap.seen = shape
            for s in _relevant_series(store, cap.subject):
                track = cap.tracks.get((s.name, s.labels))
                if track is None:
                    cap.tracks[(s.name, s.labels)] = _Track(s)
                elif track.series is not s and track.series.scrape_key is DROPPED:
                    track.series = s
        for track in cap.tracks.values():
            track.catch_up(cap.start)
        self._bound(cap)

    def _bound(self, cap: _Capture) -> None:
        share = self.max_bytes // max(1, len(self._captures))
        if cap.points() * POINT_BYTES + len(cap.tracks) * TRACK_BYTES <= share:
            return
        room = max(0, share - len(cap.tracks) * TRACK_BYTES)
        per_series = max(MIN_POINTS_KEPT, room // POINT_BYTES // max(1, len(cap.tracks)))
        for track in cap.tracks.values():
            self.dropped += track.keep(per_series)

    def on_event(self, event: IncidentEvent) -> Path | None:
        """Start a capture on open; write the trace on resolve and return its path."""
        if event.event == "opened" and event.incident_id not in self._captures:
            cap = _Capture(event.subject, event.opened_at - self.pre_s)
            self._captures[event.incident_id] = cap
            cap.note(event)
            self._catch_up(cap)
            return None
        held = self._captures.get(event.incident_id)
        if held is not None:
            # An update may name a change read only after the opening.
            held.note(event)
            self._catch_up(held)
        if event.event == "resolved":
            done = self._captures.pop(event.incident_id, None)
            if done is None or not done.points():
                return None
            return self._write(event.incident_id, done.samples())
        return None

    def flush(self) -> list[Path]:
        """Write every open capture (on shutdown) so nothing recorded is lost."""
        for cap in self._captures.values():
            self._catch_up(cap)
        paths = [self._write(i, c.samples()) for i, c in self._captures.items() if c.points()]
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
