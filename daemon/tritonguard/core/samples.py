"""Metric samples and label sets: the unit every source produces and the series store consumes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Sorted (name, value) pairs: hashable, cheap to compare, and canonical so that the same
# series from two scrapes maps to the same key whatever label order the exporter used.
Labels = tuple[tuple[str, str], ...]


def make_labels(mapping: Mapping[str, str] | Iterable[tuple[str, str]]) -> Labels:
    """Return the canonical (sorted) label tuple for a mapping or pairs."""
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple(sorted(items))


def label(labels: Labels, name: str, default: str = "") -> str:
    """Return one label's value, or ``default`` when the series does not carry it."""
    for key, value in labels:
        if key == name:
            return value
    return default


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of one series; ``timestamp`` in epoch seconds, None if the exposition had none."""

    name: str
    labels: Labels
    value: float
    timestamp: float | None = None
