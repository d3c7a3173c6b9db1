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
    """Samples from one poll; a failed target contributes no samples, only an error status."""

    samples: list[Sample] = field(default_factory=list)
    statuses: list[SourceStatus] = field(default_factory=list)

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
