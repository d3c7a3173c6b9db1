"""The nine cause signatures, by catalogue id; each is a pure function of a Context."""

from __future__ import annotations

from collections.abc import Callable

from tritonguard.core.findings import CAUSES, Finding
from tritonguard.core.signatures import (
    batching_delay,
    cold_start,
    cpu_bottleneck,
    memory_copy,
    model_reload,
    node_contention,
    retry_storm,
    too_few_instances,
    too_many_instances,
)
from tritonguard.core.signatures.context import Context

Signature = Callable[[Context], Finding | None]

SIGNATURES: dict[str, Signature] = {
    m.CAUSE: m.check
    for m in (
        batching_delay,
        too_few_instances,
        too_many_instances,
        cold_start,
        cpu_bottleneck,
        memory_copy,
        model_reload,
        node_contention,
        retry_storm,
    )
}
# A check `python -O` keeps: the registry is the catalogue, in its order (ties rank by it).
if tuple(SIGNATURES) != CAUSES:
    raise ImportError("signature registry must list the catalogue's causes in its order")
