"""``triton.warmup``: send real inference requests shaped from the model's metadata."""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import Field

from tritonguard.actions.registry import (
    ActionContext,
    ActionFailed,
    ActionParams,
    ActionResult,
    action,
)
from tritonguard.core.playbook_model import Duration


class WarmupParams(ActionParams):
    """How many zero-filled requests to send, one after another."""

    model: str | None = Field(None, description="model name; default: the incident's model")
    requests: int = Field(8, ge=1, le=1000)
    batch_size: int = Field(1, ge=1, le=4096)
    request_timeout: Duration = 30.0


def zero_inputs(metadata: dict[str, Any], batch_size: int) -> list[dict[str, Any]]:
    """Return JSON input tensors of zeros for every input in the metadata.

    A variable dimension (-1) becomes ``batch_size`` when it is the first one, 1 elsewhere.
    """
    inputs = []
    for spec in metadata.get("inputs", []):
        shape = [int(d) for d in spec.get("shape", [])]
        shape = [(batch_size if i == 0 else 1) if d < 0 else d for i, d in enumerate(shape)]
        count = math.prod(shape) if shape else 1
        dtype = str(spec.get("datatype", "FP32"))
        zero: Any = "" if dtype == "BYTES" else (False if dtype == "BOOL" else 0)
        inputs.append(
            {"name": spec["name"], "shape": shape, "datatype": dtype, "data": [zero] * count}
        )
    if not inputs:
        raise ActionFailed("model metadata lists no inputs; cannot shape warm-up requests")
    return inputs


async def _plan(ctx: ActionContext, params: WarmupParams) -> dict[str, Any]:
    return {"model": params.model or ctx.subject.model, "requests": params.requests}


@action("triton.warmup", WarmupParams, plan=_plan)
async def warmup(ctx: ActionContext, params: WarmupParams) -> ActionResult:
    """Send N real requests so that the first user requests do not pay the cold start."""
    triton = ctx.need_triton()
    model = params.model or ctx.subject.model
    metadata = await triton.model_metadata(model)
    inputs = zero_inputs(metadata, params.batch_size)
    outputs = [str(o["name"]) for o in metadata.get("outputs", []) if "name" in o]
    took = []
    for _ in range(params.requests):
        start = time.monotonic()
        await triton.infer(model, inputs, binary_outputs=outputs, timeout_s=params.request_timeout)
        took.append(time.monotonic() - start)
    return ActionResult(
        detail={
            "model": model,
            "requests": len(took),
            "first_ms": round(took[0] * 1000, 1),
            "last_ms": round(took[-1] * 1000, 1),
        }
    )
