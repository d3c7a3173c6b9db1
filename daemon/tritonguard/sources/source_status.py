"""What a source returns from one poll: the samples and how each of its targets fared."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tritonguard.core.samples import Sample


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How one target (a scraped endpoint or a Prometheus query group) fared in one poll."""

    source: str
    target: str
    ok: bool
    at: float
    duration_s: float
    samples: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PollResult:
    """Samples from one poll; a failed target contributes no samples, only an error status.

    ``stored`` counts samples the source already read into the engine's store itself (the
    scrape source's fused path): they are not in ``samples``, and are not to be ingested
    again.
    """

    samples: list[Sample] = field(default_factory=list)
    statuses: list[SourceStatus] = field(default_factory=list)
    stored: int = 0

    @property
    def ingested(self) -> int:
        """Return how many samples this poll brought in, handed on or stored already."""
        return len(self.samples) + self.stored

    @property
    def ok(self) -> bool:
        """Return True when at least one target answered."""
        return any(status.ok for status in self.statuses)


class Source(Protocol):
    """A live source polled by the daemon on its own interval."""

    name: str
    interval_s: float

    async def poll(self) -> PollResult:
        """Fetch what is new since the last poll; never raise for a target being down."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
