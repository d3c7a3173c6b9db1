"""model_warmup built from a model config's inputs: shapes, batch size, refusals."""

from __future__ import annotations

import pytest

from tritonguard.core.model_warmup import WarmupError, warmup_from_inputs

CONFIG = {
    "name": "ranker",
    "max_batch_size": 8,
    "input": [
        {"name": "dense", "data_type": "TYPE_FP32", "dims": ["16"]},
        {"name": "tokens", "data_type": "TYPE_INT64", "dims": ["-1", "4"]},
        {"name": "mask", "data_type": "TYPE_BOOL", "dims": ["-1"], "optional": True},
    ],
}


def test_every_required_input_gets_zero_data_with_concrete_dims() -> None:
    """Int64 dims given as strings become ints; -1 becomes variable_dim; optional inputs are left out."""
    [sample] = warmup_from_inputs(CONFIG, count=5, variable_dim=7)
    assert sample["count"] == 5 and sample["batch_size"] == 1
    assert sample["inputs"] == {
        "dense": {"data_type": "TYPE_FP32", "dims": [16], "zero_data": True},
        "tokens": {"data_type": "TYPE_INT64", "dims": [7, 4], "zero_data": True},
    }


@pytest.mark.parametrize(("max_batch", "asked", "used"), [(8, 64, 8), (8, 4, 4), (0, 16, 1)])
def test_batch_size_respects_max_batch_size(max_batch: int, asked: int, used: int) -> None:
    """Triton refuses warm-up batches above max_batch_size, and anything but 1 without batching."""
    [sample] = warmup_from_inputs({**CONFIG, "max_batch_size": max_batch}, batch_size=asked)
    assert sample["batch_size"] == used


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"input": []}, "no required inputs"),
        ({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["a"]}]}, "non-integer dims"),
        ({"input": [{"name": "x", "dims": [1]}]}, "needs a name and a data_type"),
    ],
)
def test_configs_that_cannot_be_warmed_automatically_say_why(config: dict, says: str) -> None:  # type: ignore[type-arg]
    """No guessing: a config without usable inputs is refused with what to do."""
    with pytest.raises(WarmupError, match=says):
        warmup_from_inputs(config)
