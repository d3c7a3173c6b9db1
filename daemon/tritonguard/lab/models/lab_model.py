"""Triton Python-backend model whose costs (accelerator, CPU, copy, cold start) come from config."""

# This file is copied into a model repository as `<model>/<version>/model.py` and runs inside
# Triton's python stub process, not inside the product. Every behaviour is driven by the
# `parameters` of config.pbtxt so that a deploy (a new config) changes it for real.

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _params(model_config: dict[str, Any]) -> dict[str, str]:
    raw = model_config.get("parameters", {}) or {}
    return {key: str(value.get("string_value", "")) for key, value in raw.items()}


class TritonPythonModel:
    """Lab model: sleeps for accelerator time, hashes for CPU time, converts inputs (copies)."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Read the behaviour parameters from the model config."""
        config = json.loads(args["model_config"])
        p = _params(config)
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.accel_s = float(p.get("accel_ms", "0") or 0) / 1000.0
        self.accel_item_s = float(p.get("accel_ms_per_item", "0") or 0) / 1000.0
        self.cpu_bytes = int(float(p.get("cpu_bytes", "0") or 0))
        self.cpu_item_bytes = int(float(p.get("cpu_bytes_per_item", "0") or 0))
        self.copy_passes = int(p.get("copy_passes", "0") or 0)
        self.cold_execs = int(p.get("cold_execs", "0") or 0)
        self.cold_s = float(p.get("cold_ms", "0") or 0) / 1000.0
        self.cold_decay = float(p.get("cold_decay", "0.6") or 0.6)
        self.hiccup_file = p.get("hiccup_file", "")
        self.hiccup_s = float(p.get("hiccup_ms", "0") or 0) / 1000.0
        self.lock_path = p.get("accel_lock", "")
        self.switch_s = float(p.get("switch_ms", "0") or 0) / 1000.0
        ledger_dir = p.get("ledger_dir", "")
        self.ledger = os.path.join(ledger_dir, f"{os.getpid()}.json") if ledger_dir else ""
        self.init_s = float(p.get("init_ms", "0") or 0) / 1000.0
        self.buffer = os.urandom(max(self.cpu_bytes, self.cpu_item_bytes, 1))
        self.executions = 0
        self.busy_s = 0.0
        self.in_bytes = 0
        self.out_bytes = 0
        if self.init_s:
            time.sleep(self.init_s)  # model load time (weights, engine build)

    @contextlib.contextmanager
    def _accelerator(self) -> Iterator[None]:
        """Hold the shared accelerator: one instance at a time, a switch between holders costs."""
        if not self.lock_path:
            yield
            return
        with open(self.lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.seek(0)
                last = handle.read().strip()
                me = str(os.getpid())
                if last and last != me and self.switch_s:
                    # A context switch between instances on one device is not free.
                    time.sleep(self.switch_s)
                    self.busy_s += self.switch_s
                handle.seek(0)
                handle.truncate()
                handle.write(me)
                handle.flush()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write_ledger(self) -> None:
        if not self.ledger:
            return
        tmp = self.ledger + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(
                {
                    "busy_s": self.busy_s,
                    "in_bytes": self.in_bytes,
                    "out_bytes": self.out_bytes,
                    "executions": self.executions,
                },
                handle,
            )
        os.replace(tmp, self.ledger)

    def execute(self, requests: list[Any]) -> list[Any]:
        """Serve one batch of requests with the configured costs."""
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        items = sum(int(a.shape[0]) for a in arrays) if self.batched else len(arrays)
        self.in_bytes += sum(int(a.nbytes) for a in arrays)

        # Input format conversion (layout + dtype), proportional to the input size.
        for _ in range(self.copy_passes):
            for a in arrays:
                np.ascontiguousarray(a.T).astype(np.float16)

        # CPU preprocessing: a fixed amount of work, so contention stretches it.
        work = self.cpu_bytes + self.cpu_item_bytes * items
        view = memoryview(self.buffer)
        while work > 0:
            chunk = min(work, len(self.buffer))
            hashlib.sha256(view[:chunk]).digest()
            work -= chunk

        accel = self.accel_s + self.accel_item_s * items
        if self.executions < self.cold_execs:
            accel += self.cold_s * (self.cold_decay**self.executions)
        if self.hiccup_file and os.path.exists(self.hiccup_file):
            accel += self.hiccup_s
        if accel > 0:
            with self._accelerator():
                start = time.monotonic()
                time.sleep(accel)
                self.busy_s += time.monotonic() - start
        self.executions += 1

        responses = []
        for a in arrays:
            shape = [int(a.shape[0]), 1] if self.batched else [1]
            out = np.full(shape, float(self.executions), dtype=np.float32)
            self.out_bytes += int(out.nbytes)
            tensor = pb_utils.Tensor("OUTPUT0", out)
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        self._write_ledger()
        return responses
