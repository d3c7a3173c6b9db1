"""Each subject's own healthy history, and the baseline (medians) signatures compare against."""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from statistics import median

import numpy as np
import numpy.typing as npt

from tritonguard.core.features import FeatureSet, SubjectKey
from tritonguard.core.thresholds import Thresholds

# Features the baseline keeps: each is compared against the model's own healthy history.
BASELINE_FEATURES: tuple[str, ...] = (
    "mean_latency_us",
    "mean_queue_us",
    "p99_us",
    "queue_share",
    "compute_per_inference_us",
    "compute_per_exec_us",
    "request_rate",
    "inference_rate",
    "busy_instances",
    "pending",
    "container_cpu_cores",
    "input_share",
    "output_share",
    "compute_input_us",
    "compute_output_us",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "ingress_rate",
    "node_cpu_busy",
    "cpu_waiting_share",
    "cpu_host_util",
    "scrape_latency_us",
    "scrape_queue_us",
)


@dataclass(frozen=True, slots=True)
class Baseline:
    """The model's own healthy history: median feature values and how much history backs them."""

    values: dict[str, float]
    span_s: float
    snapshots: int
    # Median absolute deviation of each feature over the same snapshots: the noise to beat.
    spreads: dict[str, float] = field(default_factory=dict)
    # Whose history this is: the subject's own ("own"), its own as saved before the daemon
    # restarted ("carried"), or the same model on other pods ("fleet") for a pod too new to
    # have one.
    source: str = "own"

    def get(self, name: str) -> float | None:
        """Median of one feature over the baseline period, or None if never known."""
        return self.values.get(name)

    def abnormal_above(self, name: str, k: float, floor: float) -> float | None:
        """Return the value above which ``name`` is abnormal, or None without a baseline.

        Beyond the median by ``k`` robust standard deviations (1.4826 x MAD) and by at least
        ``floor`` times the median.
        """
        med = self.values.get(name)
        if med is None:
            return None
        sigma = 1.4826 * self.spreads.get(name, 0.0)
        return med + max(k * sigma, (floor - 1.0) * med)

    def ratio(self, name: str, current: float | None, floor: float = 0.0) -> float | None:
        """Return current value over baseline; None when either is unknown or the baseline is ~0."""
        base = self.values.get(name)
        if current is None or base is None:
            return None
        base = max(base, floor)
        return current / base if base > 0 else None


# A snapshot: its row of 22 packed features (176 bytes), its time (8) and health (1) in the
# subject's columns, those arrays' growth slack (CPython grows an array by a sixteenth plus
# a few items) and its share of the subject's entries in the history's dicts. Measured with
# tracemalloc over 2,000 subjects: 206 bytes a snapshot at a full 10-minute lookback (61
# snapshots a subject), 215 at half of it, where the subject's entries weigh more (it was
# 385 with an object and an array per snapshot). Rounded up so the bound holds.
SNAPSHOT_BYTES = 224
# A subject's own cost whatever its snapshots: its track, the headers of its three arrays
# and its entries in the history's, the shapes' and the model index's dicts. Measured with
# tracemalloc over 2,000 subjects at one snapshot each, 650 bytes beyond the snapshot's,
# its key included; rounded up. Without it a fleet just started (one to six snapshots each)
# holds up to three times what the bound counts.
SUBJECT_BYTES = 768
# A carried baseline: two dicts of the baseline features, as the memory bound counts it.
CARRIED_BYTES = 4096


_WIDTH = len(BASELINE_FEATURES)
# Subjects whose baselines the engine asks to be worked out together (``prepare``).
PREPARE_CHUNK = 256
# Snapshots (padded to the longest subject's) in one numpy pass. The pass holds about five
# arrays of 22 features x 8 bytes a snapshot: 8,192 snapshots keep each near 1.4 MB, so the
# pass adds a few MB whatever the fleet's size and scrape interval (a subject holds 61
# snapshots at 10 s, 301 at 2 s), while the numpy calls' fixed cost is spread over 27 to
# 134 subjects, enough to be small.
PASS_SNAPSHOTS = 8192


class _Track:
    """One subject's snapshots as columns: each evaluation's time, health and features.

    One row of ``rows`` (NaN where a feature was unknown) per snapshot, all rows in one packed
    array: a snapshot costs its 185 bytes of numbers, not an object, an array header and a
    slot of its own (about 150 bytes more each, some 350 MB at 40,000 subjects).
    """

    __slots__ = ("healthy", "rows", "times")

    def __init__(self) -> None:
        self.times: array[float] = array("d")
        self.healthy = bytearray()
        self.rows: array[float] = array("d")

    def __len__(self) -> int:
        return len(self.times)

    def append(self, t: float, f: FeatureSet, healthy: bool) -> None:
        """Add one evaluation's snapshot at the end."""
        self.times.append(t)
        self.healthy.append(healthy)
        self.rows.extend(_known(getattr(f, n)) for n in BASELINE_FEATURES)

    def drop_before(self, horizon: float) -> int:
        """Drop the leading snapshots older than ``horizon``; return how many."""
        times = self.times
        k = 0
        while k < len(times) and times[k] < horizon:
            k += 1
        if k:
            del times[:k]
            del self.healthy[:k]
            del self.rows[: k * _WIDTH]
        return k


class BaselineHistory:
    """Per-subject snapshots of the baseline features, each marked healthy or not.

    ``max_bytes`` bounds all subjects together (None: unbounded). Over it, the subjects
    evaluated least recently (pods that went away, models no longer served) lose their
    history first; a subject in use keeps it.
    """

    def __init__(self, thresholds: Thresholds, max_bytes: int | None = None) -> None:
        self.t = thresholds
        self.max_bytes = max_bytes
        self._history: OrderedDict[SubjectKey, _Track] = OrderedDict()
        # Subjects by (namespace, model), to find a model's other pods.
        self._by_model: dict[tuple[str, str], set[SubjectKey]] = {}
        self._fleet_at: float | None = None
        self._fleet: dict[tuple[str, str], Baseline | None] = {}
        self.snapshots = 0
        self.subjects_shed = 0
        # Baselines saved before a restart, by subject: (when saved, baseline). Each is the
        # reference until the subject has history of its own again.
        self._carried: dict[SubjectKey, tuple[float, Baseline]] = {}
        # Each subject's last window and interval, to export its baseline as it was judged.
        self._shape: dict[SubjectKey, tuple[float, float]] = {}
        # Baselines worked out together for one evaluation (``prepare``): by subject, the
        # window and interval they were asked for and the answer, valid at one (now, started).
        self._prepared: dict[SubjectKey, tuple[float, float, Baseline | None]] = {}
        self._prepared_for: tuple[float, float | None] | None = None

    def remember(self, key: SubjectKey, now: float, f: FeatureSet, healthy: bool) -> None:
        """Add this evaluation's features; drop snapshots older than the lookback."""
        hist = self._history.get(key)
        if hist is None:
            hist = self._history[key] = _Track()
            self._by_model.setdefault((key[0], key[2]), set()).add(key)
        else:
            self._history.move_to_end(key)
        hist.append(now, f, healthy)
        # Its snapshots change (one in, the oldest out): a prepared answer no longer holds.
        self._prepared.pop(key, None)
        self._shape[key] = (f.window_s, f.interval_s)
        self.snapshots += 1
        self.snapshots -= hist.drop_before(now - self.t.baseline_lookback_s)
        cap = self.max_bytes
        while cap is not None and self._held_bytes() > cap and len(self._history) > 1:
            gone, oldest = self._history.popitem(last=False)
            self._prepared.pop(gone, None)
            self._unindex(gone)
            self._shape.pop(gone, None)
            self._carried.pop(gone, None)
            self.snapshots -= len(oldest)
            self.subjects_shed += 1

    def forget(self, key: SubjectKey) -> None:
        """Drop a subject that is gone."""
        self._carried.pop(key, None)
        self._shape.pop(key, None)
        self._prepared.pop(key, None)
        hist = self._history.pop(key, None)
        if hist is not None:
            self._unindex(key)
            self.snapshots -= len(hist)

    def carry(self, key: SubjectKey, saved_at: float, baseline: Baseline) -> bool:
        """Take a baseline saved before a restart as the subject's reference for now.

        Within the memory bound only: past it the subject learns its baseline again, as it
        would have without the file (False).
        """
        if self.max_bytes is not None and self.approx_bytes + CARRIED_BYTES > self.max_bytes:
            return False
        self._carried[key] = (saved_at, replace(baseline, source="carried"))
        return True

    def carried(self, key: SubjectKey, now: float) -> Baseline | None:
        """Return the subject's carried baseline, or None when there is none or it is too old.

        Older than ``baseline_lookback_s`` it describes a period the subject's own history
        would already have forgotten, so it no longer stands for the model's normal.
        """
        got = self._carried.get(key)
        if got is None:
            return None
        saved_at, base = got
        if now - saved_at > self.t.baseline_lookback_s or saved_at > now:
            del self._carried[key]
            return None
        return base

    def export(self, now: float, started: float | None) -> list[tuple[SubjectKey, float, Baseline]]:
        """Return every subject's baseline worth saving: (subject, when it held, baseline).

        A subject's own baseline holds now; one still carried keeps the time it was saved, so
        a chain of restarts can never make an old reference look new.
        """
        out: list[tuple[SubjectKey, float, Baseline]] = []
        shapes = list(self._shape.items())
        # A chunk of subjects a numpy pass (``prepare``), as an evaluation does, so the
        # minutely save shares the evaluation's one path to a baseline.
        for start in range(0, len(shapes), PREPARE_CHUNK):
            chunk = shapes[start : start + PREPARE_CHUNK]
            self.prepare(
                ((key, window, interval) for key, (window, interval) in chunk), now, started
            )
            for key, (window, interval) in chunk:
                own = self.baseline(key, now, window, interval, started)
                if own is not None:
                    out.append((key, now, own))
        owned = {key for key, _, _ in out}
        for key in list(self._carried):
            if key not in owned and (base := self.carried(key, now)) is not None:
                out.append((key, self._carried[key][0], base))
        return out

    def _unindex(self, key: SubjectKey) -> None:
        peers = self._by_model.get((key[0], key[2]))
        if peers is not None:
            peers.discard(key)
            if not peers:
                del self._by_model[(key[0], key[2])]

    def _held_bytes(self) -> int:
        return self.snapshots * SNAPSHOT_BYTES + len(self._history) * SUBJECT_BYTES

    @property
    def approx_bytes(self) -> int:
        """Return what subjects, snapshots and carried baselines cost, as the bound counts it."""
        return self._held_bytes() + len(self._carried) * CARRIED_BYTES

    def baseline(
        self, key: SubjectKey, now: float, window: float, interval: float, started: float | None
    ) -> Baseline | None:
        """Return the medians of the subject's healthy snapshots, or None without enough of them.

        ``started`` is when the stream began: a window reaching before the first sample holds
        less data than its nominal length. An answer :meth:`prepare` worked out for this
        evaluation is the same, and is taken as it is.
        """
        # Taken once: a second ask (a peer's) works it out again, as the track may have moved.
        held = self._prepared.pop(key, None) if self._prepared_for == (now, started) else None
        if held is not None and held[:2] == (window, interval):
            base = held[2]
        else:
            picked = self._picked(key, now, window, interval, started)
            if picked is None:
                return None
            hist, rows, span = picked
            values, spreads = _medians_and_spreads(hist.rows, rows)
            base = Baseline(values, span, len(rows), spreads)
        if base is not None and self._carried:
            # Its own history is back: the saved reference has done its work, and its
            # memory goes back to the budget.
            self._carried.pop(key, None)
        return base

    def prepare(
        self,
        asks: Iterable[tuple[SubjectKey, float, float]],
        now: float,
        started: float | None,
    ) -> None:
        """Work out the baselines of many subjects at once, for :meth:`baseline` to answer.

        ``asks`` are (subject, window, interval), as the evaluation at ``now`` will ask. One
        numpy pass over all of them instead of one a subject: the same float64 operations in
        the same order, so the same numbers to the bit. An answer is given once, and holds
        until the subject's snapshots change (:meth:`remember`, :meth:`forget`) or the next
        call; the caller asks for ``PREPARE_CHUNK`` subjects at a time, so that no more
        answers than that wait at once.
        """
        self._prepared = {}
        self._prepared_for = (now, started)
        found: list[tuple[SubjectKey, float, float, float, int]] = []
        tracks: list[tuple[_Track, list[int]]] = []
        for key, window, interval in asks:
            picked = self._picked(key, now, window, interval, started)
            if picked is None:
                self._prepared[key] = (window, interval, None)
                continue
            hist, rows, span = picked
            found.append((key, window, interval, span, len(rows)))
            tracks.append((hist, rows))
        answers = [m for part in _passes(tracks) for m in _many_medians_and_spreads(part)]
        for (key, window, interval, span, n), (values, spreads) in zip(found, answers, strict=True):
            self._prepared[key] = (window, interval, Baseline(values, span, n, spreads))

    def _picked(
        self, key: SubjectKey, now: float, window: float, interval: float, started: float | None
    ) -> tuple[_Track, list[int], float] | None:
        """Return the subject's track, its healthy snapshots' rows and their span, if enough."""
        hist = self._history.get(key)
        if not hist:
            return None
        # Exclude the recent past: an onset inside the current window must not become "normal".
        cutoff = now - self.t.baseline_gap_windows * window
        times = hist.times
        picked = [k for k, ok in enumerate(hist.healthy) if ok and times[k] <= cutoff]
        if not picked:
            return None
        oldest, newest = times[picked[0]], times[picked[-1]]
        first = started if started is not None else oldest
        span = newest - max(oldest - window, first)
        if span < max(self.t.baseline_min_span_s, interval):
            return None
        return hist, picked, span

    def fleet_baseline(
        self, key: SubjectKey, now: float, window: float, interval: float, started: float | None
    ) -> Baseline | None:
        """Return the same model's baseline on its other pods, for a pod with none of its own.

        A pod of a scale-out or a rolling update runs the model its peers run: until it has
        history of its own, theirs is the reference, so it is judged from its first scrapes
        instead of after ``baseline_min_span_s``. The median over peers of each feature's
        median, and of its spread; None when no peer has a baseline. Computed once per model
        and evaluation, however many of its pods are new.
        """
        ns, pod, model = key
        cache_key = (ns, model)
        if self._fleet_at != now:
            self._fleet_at, self._fleet = now, {}
        if cache_key in self._fleet:
            return self._fleet[cache_key]
        peers = [
            b
            for k in self._by_model.get(cache_key, ())
            if k[1] != pod and (b := self.baseline(k, now, window, interval, started)) is not None
        ]
        fleet = None
        if peers:
            names = {n for b in peers for n in b.values}
            values = {
                n: median(v for b in peers if (v := b.values.get(n)) is not None) for n in names
            }
            spreads = {
                n: median(v for b in peers if (v := b.spreads.get(n)) is not None)
                for n in names
                if any(n in b.spreads for b in peers)
            }
            fleet = Baseline(
                values,
                min(b.span_s for b in peers),
                sum(b.snapshots for b in peers),
                spreads,
                source="fleet",
            )
        self._fleet[cache_key] = fleet
        return fleet


_COLUMNS = np.arange(len(BASELINE_FEATURES))


def _medians_and_spreads(
    packed_rows: array[float], picked: list[int]
) -> tuple[dict[str, float], dict[str, float]]:
    """Return each known feature's median and median absolute deviation over the picked rows.

    All columns at once in numpy: NaN (unknown) sorts last, so a column's known values are
    its first ``known`` rows. The arithmetic is ``statistics.median``'s, in the same float64
    operations (the middle value, or the mean of the two middle ones), so the numbers are
    the same to the bit as a per-column sort in Python, at a third of its cost.
    """
    # Indexing copies the rows out, so no view of the subject's array outlives the call (an
    # array with a view exported cannot grow).
    rows = np.frombuffer(packed_rows, dtype=np.float64).reshape(-1, _WIDTH)[picked]
    ordered = np.sort(rows, axis=0)
    known = len(picked) - np.isnan(rows).sum(axis=0)
    lo, hi = np.maximum((known - 1) // 2, 0), known // 2
    odd = known % 2 == 1
    mid = _middle(ordered, lo, hi, odd)
    spread = _middle(np.sort(np.abs(ordered - mid), axis=0), lo, hi, odd)
    values: dict[str, float] = {}
    spreads: dict[str, float] = {}
    for name, n, m, d in zip(
        BASELINE_FEATURES, known.tolist(), mid.tolist(), spread.tolist(), strict=True
    ):
        if n:
            values[name] = m
            spreads[name] = d
    return values, spreads


def _passes(tracks: list[tuple[_Track, list[int]]]) -> Iterator[list[tuple[_Track, list[int]]]]:
    """Split (track, rows) into runs whose padded snapshots fit ``PASS_SNAPSHOTS`` (one or more)."""
    part: list[tuple[_Track, list[int]]] = []
    longest = 0
    for item in tracks:
        width = max(longest, len(item[1]))
        if part and (len(part) + 1) * width > PASS_SNAPSHOTS:
            yield part
            part, width = [], len(item[1])
        part.append(item)
        longest = width
    if part:
        yield part


def _many_medians_and_spreads(
    tracks: list[tuple[_Track, list[int]]],
) -> list[tuple[dict[str, float], dict[str, float]]]:
    """Return :func:`_medians_and_spreads` of each (track, picked rows), all in one pass.

    The subjects' rows stand side by side, one row of features a subject and its snapshots
    along the last axis, padded with NaN to the longest: NaN sorts last and is not counted as
    known, so each column's known values and its middle are exactly the one-subject pass's.
    """
    longest = max(len(rows) for _, rows in tracks)
    stack = np.full((len(tracks), _WIDTH, longest), math.nan)
    for i, (hist, rows) in enumerate(tracks):
        stack[i, :, : len(rows)] = (
            np.frombuffer(hist.rows, dtype=np.float64).reshape(-1, _WIDTH)[rows].T
        )
    ordered = np.sort(stack, axis=2)
    known = longest - np.isnan(stack).sum(axis=2)
    lo, hi = np.maximum((known - 1) // 2, 0), known // 2
    odd = known % 2 == 1
    mid = _lane_middle(ordered, lo, hi, odd)
    spread = _lane_middle(np.sort(np.abs(ordered - mid[:, :, None]), axis=2), lo, hi, odd)
    out: list[tuple[dict[str, float], dict[str, float]]] = []
    for counts, mids, spreads_of in zip(known.tolist(), mid.tolist(), spread.tolist(), strict=True):
        values: dict[str, float] = {}
        spreads: dict[str, float] = {}
        for name, n, m, d in zip(BASELINE_FEATURES, counts, mids, spreads_of, strict=True):
            if n:
                values[name] = m
                spreads[name] = d
        out.append((values, spreads))
    return out


def _lane_middle(
    ordered: npt.NDArray[np.float64],
    lo: npt.NDArray[np.intp],
    hi: npt.NDArray[np.intp],
    odd: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """Return each lane's median of its leading known values, as :func:`_middle` per column."""
    a = np.take_along_axis(ordered, lo[:, :, None], axis=2)[:, :, 0]
    b = np.take_along_axis(ordered, hi[:, :, None], axis=2)[:, :, 0]
    return np.where(odd, b, (a + b) / 2)


def _middle(
    ordered: npt.NDArray[np.float64],
    lo: npt.NDArray[np.intp],
    hi: npt.NDArray[np.intp],
    odd: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """Return each column's median of its leading known rows, as ``statistics.median``."""
    a, b = ordered[lo, _COLUMNS], ordered[hi, _COLUMNS]
    return np.where(odd, b, (a + b) / 2)


def _known(value: object) -> float:
    """Return a feature's value for packing: NaN stands for unknown (never for zero)."""
    return value if isinstance(value, float) else math.nan
