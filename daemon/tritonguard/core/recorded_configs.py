"""The config reads a recording made, answered when a replay's engine asks, as Triton would.

A recording made beside a Triton (the fault lab's) holds its configs as reads at known times:
each model's when it first served, and again after each change the run made. The daemon
reads a config when a model first appears and when its latency begins to shift
(``shift_reads.py``). A replay given a recording's reads does the same: it gives the engine
each subject's first read when it falls due, and answers each later ask with the newest read
at or before the time of asking, the config a Triton would have returned then. A read the
engine never asks for stays unseen, as it would in the daemon, so a replay knows no config
sooner than the daemon would.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tritonguard.core.features import SubjectKey
from tritonguard.core.findings import Subject


@dataclass(frozen=True, slots=True)
class ConfigRead:
    """One config as the repository API returned it, at ``at`` (unix seconds)."""

    at: float
    subject: Subject
    config: Mapping[str, Any]


class RecordedConfigs:
    """A recording's config reads, by subject and in time order."""

    def __init__(self, reads: Iterable[ConfigRead]) -> None:
        by_key: dict[SubjectKey, list[ConfigRead]] = {}
        for read in sorted(reads, key=lambda r: r.at):
            s = read.subject
            by_key.setdefault((s.namespace, s.pod, s.model), []).append(read)
        self._by_key = by_key
        self._times = {key: [r.at for r in reads] for key, reads in by_key.items()}

    def first_reads(self) -> list[ConfigRead]:
        """Return each subject's first read, oldest first: the read on its first appearance."""
        return sorted((reads[0] for reads in self._by_key.values()), key=lambda r: r.at)

    def answer(self, subject: Subject, at: float) -> Mapping[str, Any] | None:
        """Return the config in force at ``at``: the newest read at or before it (None if none)."""
        key = (subject.namespace, subject.pod, subject.model)
        times = self._times.get(key)
        if not times:
            return None
        i = bisect_right(times, at)
        return self._by_key[key][i - 1].config if i else None
