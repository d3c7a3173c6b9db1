"""The parts of a Triton model config (GET /v2/models/{m}/config JSON) that signatures use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Summary of a model's serving configuration."""

    max_batch_size: int
    dynamic_batching: bool
    max_queue_delay_us: float | None
    instance_count: int | None
    has_warmup: bool
    max_queue_size: int | None
    default_timeout_us: float | None
    # The kind every instance group has ("KIND_GPU", "KIND_CPU", ...); None when the groups
    # differ or none is listed (Triton then picks a GPU if it has one).
    instance_kind: str | None = None


def _int(value: Any, default: int = 0) -> int:
    # Triton's JSON renders int64 fields as strings ("max_queue_delay_microseconds": "100000").
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_model_config(config: Mapping[str, Any]) -> ModelConfig:
    """Summarise Triton's JSON model config; missing sections mean Triton's defaults."""
    db = config.get("dynamic_batching")
    batching = isinstance(db, Mapping)
    delay = _int(db.get("max_queue_delay_microseconds")) if batching and db is not None else None
    policy = db.get("default_queue_policy") if batching and db is not None else None
    count: int | None = None
    kinds: set[str] = set()
    groups = config.get("instance_group")
    if isinstance(groups, list) and groups:
        count = 0
        for g in groups:
            n = _int(g.get("count"), 1) if isinstance(g, Mapping) else 1
            gpus = g.get("gpus") if isinstance(g, Mapping) else None
            # KIND_GPU groups place `count` instances on every listed GPU.
            count += n * (len(gpus) if isinstance(gpus, list) and gpus else 1)
            kind = g.get("kind") if isinstance(g, Mapping) else None
            kinds.add(kind if isinstance(kind, str) and kind.startswith("KIND_") else "")
    warmup = config.get("model_warmup")
    return ModelConfig(
        max_batch_size=_int(config.get("max_batch_size")),
        dynamic_batching=batching,
        max_queue_delay_us=float(delay) if delay is not None else None,
        instance_count=count,
        has_warmup=isinstance(warmup, list) and len(warmup) > 0,
        max_queue_size=_int(policy.get("max_queue_size")) if isinstance(policy, Mapping) else None,
        default_timeout_us=(
            float(_int(policy.get("default_timeout_microseconds")))
            if isinstance(policy, Mapping)
            else None
        ),
        instance_kind=(next(iter(kinds)) or None) if len(kinds) == 1 else None,
    )


def instance_group_snippet(count: int, kind: str | None) -> str:
    """Return the ``instance_group`` to paste for ``count`` instances of the model's own kind.

    Without a known kind the line is left out, and Triton picks one (a GPU if it has one):
    writing KIND_GPU into a CPU model's config would make its load fail.
    """
    kind_line = f"\n    kind: {kind}" if kind else ""
    return f"instance_group [\n  {{\n    count: {count}{kind_line}\n  }}\n]"
