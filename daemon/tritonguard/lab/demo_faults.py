"""The faults the demo injects by default and in its quick run (light, for the CLI's help)."""

from __future__ import annotations

DEFAULT_FAULTS: tuple[str, ...] = (
    "batching_delay",
    "too_few_instances",
    "retry_storm",
    "cold_start",
)
QUICK_FAULTS: tuple[str, ...] = ("batching_delay", "retry_storm")
