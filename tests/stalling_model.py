"""Triton Python-backend model whose initialize() blocks while a file exists (a stuck load)."""

# Copied into a model repository as `<model>/<version>/model.py` by tests/stalling_repo.py; it
# runs inside Triton's python stub, never inside the test process. A load of a config whose
# `stall_file` parameter names an existing file stays LOADING until the file is removed (or
# `stall_max_s` passes), which is how a real model stuck building an engine or fetching
# weights looks to Triton's repository API.

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _params(model_config: dict[str, Any]) -> dict[str, str]:
    raw = model_config.get("parameters", {}) or {}
    return {key: str(value.get("string_value", "")) for key, value in raw.items()}


class TritonPythonModel:
    """Blocks in initialize while ``stall_file`` exists; serves zeros afterwards."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Stall while the configured file exists, leaving a marker that the load began."""
        config = json.loads(args["model_config"])
        p = _params(config)
        self.batched = int(config.get("max_batch_size", 0)) > 0
        stall = p.get("stall_file", "")
        if not stall or not os.path.exists(stall):
            return
        # The marker tells the test that Triton really is inside this load.
        with open(f"{stall}.started-{os.getpid()}", "w") as handle:
            handle.write(str(time.time()))
        deadline = time.monotonic() + float(p.get("stall_max_s", "600") or 600)
        while os.path.exists(stall) and time.monotonic() < deadline:
            time.sleep(0.05)

    def execute(self, requests: list[Any]) -> list[Any]:
        """Answer every request with zeros."""
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            shape = [int(a.shape[0]), 1] if self.batched else [1]
            out = pb_utils.Tensor("OUTPUT0", np.zeros(shape, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
