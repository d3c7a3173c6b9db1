"""Model repositories for the lab: config.pbtxt generation and installation of the lab model."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

LAB_MODEL_SOURCE = Path(__file__).parent / "models" / "lab_model.py"


@dataclass(frozen=True)
class QueuePolicy:
    """``default_queue_policy`` of the dynamic batcher (server-side load shedding)."""

    max_queue_size: int = 0
    default_timeout_us: int = 0
    reject: bool = True

    def render(self) -> str:
        """Return the pbtxt block."""
        action = "REJECT" if self.reject else "DELAY"
        return (
            "  default_queue_policy {\n"
            f"    timeout_action: {action}\n"
            f"    default_timeout_microseconds: {self.default_timeout_us}\n"
            f"    max_queue_size: {self.max_queue_size}\n"
            "  }\n"
        )


@dataclass(frozen=True)
class DynamicBatching:
    """``dynamic_batching`` block."""

    max_queue_delay_us: int = 0
    preferred_batch_size: tuple[int, ...] = ()
    queue_policy: QueuePolicy | None = None

    def render(self) -> str:
        """Return the pbtxt block."""
        body = f"  max_queue_delay_microseconds: {self.max_queue_delay_us}\n"
        if self.preferred_batch_size:
            sizes = ", ".join(str(s) for s in self.preferred_batch_size)
            body += f"  preferred_batch_size: [ {sizes} ]\n"
        if self.queue_policy is not None:
            body += self.queue_policy.render()
        return "dynamic_batching {\n" + body + "}\n"


@dataclass(frozen=True)
class Behaviour:
    """Costs of the lab model, passed as config ``parameters`` (see ``models/lab_model.py``).

    ``accel_ms``/``accel_ms_per_item``: accelerator time per execution (a sleep, optionally under
    ``accel_lock`` shared by all instances, with ``switch_ms`` charged when the holder changes).
    ``cpu_bytes``/``cpu_bytes_per_item``: bytes hashed per execution (fixed CPU work).
    ``copy_passes``: transpose+FP16 conversions of every input. ``cold_execs``/``cold_ms``/
    ``cold_decay``: the first executions are slower by ``cold_ms * cold_decay**n``.
    ``hiccup_file``/``hiccup_ms``: extra accelerator time while that file exists.
    ``ledger_dir``: where each stub process writes its busy time and bytes for the exporters.
    ``init_ms``: time spent in ``initialize`` (model load). ``revision``: no effect on the
    model; a new value changes the config, as a redeploy of the same model would.
    """

    accel_ms: float = 0.0
    accel_ms_per_item: float = 0.0
    cpu_bytes: int = 0
    cpu_bytes_per_item: int = 0
    copy_passes: int = 0
    cold_execs: int = 0
    cold_ms: float = 0.0
    cold_decay: float = 0.6
    hiccup_file: str = ""
    hiccup_ms: float = 0.0
    accel_lock: str = ""
    switch_ms: float = 0.0
    ledger_dir: str = ""
    init_ms: float = 0.0
    revision: str = ""

    def parameters(self) -> dict[str, str]:
        """Return the non-default behaviour parameters as strings."""
        out: dict[str, str] = {}
        for key, default in Behaviour().__dict__.items():
            value = getattr(self, key)
            if value != default:
                out[key] = str(value)
        return out


@dataclass(frozen=True)
class ModelSpec:
    """Everything that goes into one model's ``config.pbtxt`` and version directory."""

    name: str
    version: int = 1
    max_batch_size: int = 8
    input_dims: tuple[int, ...] = (16,)
    instance_count: int = 1
    dynamic_batching: DynamicBatching | None = None
    warmup_count: int = 0
    warmup_batch_size: int = 1
    behaviour: Behaviour = field(default_factory=Behaviour)

    def with_(self, **changes: object) -> ModelSpec:
        """Return a copy with fields changed (a new deploy of the same model)."""
        return replace(self, **changes)  # type: ignore[arg-type]  # replace() checks field names

    def render_config(self) -> str:
        """Return the config.pbtxt text."""
        if self.max_batch_size == 0 and any(d < 0 for d in self.input_dims):
            raise ValueError(f"model {self.name}: an unbatched model needs a full shape in dims")
        dims = ", ".join(str(d) for d in self.input_dims)
        out_dims = "1"
        text = (
            f'name: "{self.name}"\n'
            'backend: "python"\n'
            f"max_batch_size: {self.max_batch_size}\n"
            "input [\n"
            f'  {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {dims} ] }}\n'
            "]\n"
            "output [\n"
            f'  {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {out_dims} ] }}\n'
            "]\n"
            f"instance_group [ {{ count: {self.instance_count} kind: KIND_CPU }} ]\n"
            f"version_policy: {{ specific: {{ versions: [ {self.version} ] }} }}\n"
        )
        if self.dynamic_batching is not None:
            text += self.dynamic_batching.render()
        params = self.behaviour.parameters()
        for key in sorted(params):
            text += f'parameters {{ key: "{key}" value: {{ string_value: "{params[key]}" }} }}\n'
        if self.warmup_count > 0:
            batch = self.warmup_batch_size if self.max_batch_size > 0 else 1
            text += (
                "model_warmup [\n"
                "  {\n"
                '    name: "lab_warmup"\n'
                f"    batch_size: {batch}\n"
                f"    count: {self.warmup_count}\n"
                '    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 '
                f"dims: [ {dims} ] zero_data: true }} }}\n"
                "  }\n"
                "]\n"
            )
        return text


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_model(repository: Path, spec: ModelSpec, *, atomic: bool = True) -> Path:
    """Install ``spec`` into ``repository`` and return the model directory.

    With ``atomic`` the config is replaced in one rename; otherwise it is rewritten in place,
    file by file, as a careless deploy script would (Triton's poller may see the partial change).
    """
    model_dir = repository / spec.name
    version_dir = model_dir / str(spec.version)
    version_dir.mkdir(parents=True, exist_ok=True)
    target = version_dir / "model.py"
    if atomic:
        tmp = version_dir / "model.py.tmp"
        shutil.copyfile(LAB_MODEL_SOURCE, tmp)
        os.replace(tmp, target)
        _atomic_write(model_dir / "config.pbtxt", spec.render_config())
    else:
        shutil.copyfile(LAB_MODEL_SOURCE, target)
        (model_dir / "config.pbtxt").write_text(spec.render_config())
    return model_dir


def config_json(spec: ModelSpec) -> dict[str, object]:
    """Return the model config as the JSON Triton's repository load API accepts."""
    out: dict[str, object] = {
        "name": spec.name,
        "backend": "python",
        "max_batch_size": spec.max_batch_size,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": list(spec.input_dims)}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
        "instance_group": [{"count": spec.instance_count, "kind": "KIND_CPU"}],
        "version_policy": {"specific": {"versions": [spec.version]}},
        "parameters": {k: {"string_value": v} for k, v in spec.behaviour.parameters().items()},
    }
    db = spec.dynamic_batching
    if db is not None:
        batching: dict[str, object] = {"max_queue_delay_microseconds": db.max_queue_delay_us}
        if db.preferred_batch_size:
            batching["preferred_batch_size"] = list(db.preferred_batch_size)
        if db.queue_policy is not None:
            qp = db.queue_policy
            batching["default_queue_policy"] = {
                "timeout_action": "REJECT" if qp.reject else "DELAY",
                "default_timeout_microseconds": qp.default_timeout_us,
                "max_queue_size": qp.max_queue_size,
            }
        out["dynamic_batching"] = batching
    if spec.warmup_count > 0:
        out["model_warmup"] = [
            {
                "name": "lab_warmup",
                "batch_size": spec.warmup_batch_size if spec.max_batch_size > 0 else 1,
                "count": spec.warmup_count,
                "inputs": {
                    "INPUT0": {
                        "data_type": "TYPE_FP32",
                        "dims": list(spec.input_dims),
                        "zero_data": True,
                    }
                },
            }
        ]
    return out
