"""Build a model_warmup section from a model config's own inputs (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class WarmupError(ValueError):
    """The config cannot be warmed up automatically; the message says what to write instead."""


def _dims(raw: Any, name: str, variable_dim: int) -> list[int]:
    try:
        dims = [int(d) for d in raw or []]
    except (TypeError, ValueError):
        raise WarmupError(f"input {name!r} has non-integer dims {raw!r}") from None
    # A variable dimension gets a small concrete size: warm-up must only touch every code path
    # once, and Triton refuses a warm-up sample with -1 in it.
    return [variable_dim if d < 0 else d for d in dims]


def warmup_from_inputs(
    config: Mapping[str, Any],
    *,
    count: int = 8,
    batch_size: int = 1,
    variable_dim: int = 1,
    name: str = "tritonguard_warmup",
) -> list[dict[str, Any]]:
    """Return a ``model_warmup`` list with one zero-data sample covering every required input.

    ``batch_size`` is capped at the model's ``max_batch_size`` (1 for models without batching,
    as Triton requires). Optional inputs are left out, as a client may leave them out.
    """
    inputs = [i for i in config.get("input") or [] if isinstance(i, Mapping)]
    required = [i for i in inputs if not i.get("optional")]
    if not required:
        raise WarmupError(
            "the model config lists no required inputs; write model_warmup by hand "
            "(see Triton's model_configuration docs)"
        )
    max_batch = int(config.get("max_batch_size") or 0)
    batch = 1 if max_batch == 0 else max(1, min(batch_size, max_batch))
    samples: dict[str, Any] = {}
    for spec in required:
        name_ = str(spec.get("name", ""))
        dtype = str(spec.get("data_type", ""))
        if not name_ or not dtype:
            raise WarmupError(f"input {spec!r} needs a name and a data_type")
        samples[name_] = {
            "data_type": dtype,
            "dims": _dims(spec.get("dims"), name_, variable_dim),
            "zero_data": True,
        }
    return [{"name": name, "batch_size": batch, "count": count, "inputs": samples}]
