"""The instance_group a fix tells the on-call engineer to paste keeps the model's own kind.

The snippets of too_few_instances and too_many_instances used to write ``kind: KIND_GPU``
whatever the model ran on; pasted into a CPU model's config, Triton refuses to load it.
"""

from __future__ import annotations

from tests.unit.synthetic import START, Phase, run_engine, triton_model
from tritonguard.core.model_config import instance_group_snippet, parse_model_config


def _groups(*groups: dict[str, object]) -> dict[str, object]:
    return {"max_batch_size": 8, "instance_group": list(groups)}


def test_the_kind_is_the_one_every_group_has() -> None:
    """One kind across the groups is the model's; mixed, unset or no groups is unknown."""
    assert parse_model_config(_groups({"count": 2, "kind": "KIND_CPU"})).instance_kind == (
        "KIND_CPU"
    )
    both = _groups({"count": 1, "kind": "KIND_GPU", "gpus": [0]}, {"count": 1, "kind": "KIND_GPU"})
    assert parse_model_config(both).instance_kind == "KIND_GPU"
    mixed = _groups({"count": 1, "kind": "KIND_GPU"}, {"count": 1, "kind": "KIND_CPU"})
    assert parse_model_config(mixed).instance_kind is None
    assert parse_model_config(_groups({"count": 1})).instance_kind is None
    assert parse_model_config(_groups({"count": 1, "kind": 3})).instance_kind is None
    assert parse_model_config({"max_batch_size": 8}).instance_kind is None


def test_the_snippet_names_a_known_kind_and_leaves_an_unknown_one_to_triton() -> None:
    """Known: ``kind:`` is written; unknown: no ``kind:`` line, so Triton picks one itself."""
    assert instance_group_snippet(3, "KIND_CPU") == (
        "instance_group [\n  {\n    count: 3\n    kind: KIND_CPU\n  }\n]"
    )
    assert instance_group_snippet(3, None) == "instance_group [\n  {\n    count: 3\n  }\n]"


def test_too_few_instances_on_a_cpu_model_suggests_a_cpu_instance() -> None:
    """A saturated CPU instance: the fix adds a second of KIND_CPU, not a GPU one."""
    iv = 5.0
    series = triton_model(
        [
            Phase(24, rps=30, infer_ms=20, queue_ms=2),
            Phase(24, rps=48, infer_ms=20, queue_ms=150, pending=10),
        ],
        interval=iv,
    )
    config = {
        "max_batch_size": 0,
        "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
    }
    events = run_engine(series, interval=iv, configs={"resnet": config})
    opened = [e for e in events if e.event == "opened" and e.at >= START + 24 * iv]
    assert opened and opened[0].cause == "too_few_instances", [e.cause for e in opened]
    assert opened[0].fix is not None
    assert "kind: KIND_CPU" in opened[0].fix.config_snippet
    assert "KIND_GPU" not in opened[0].fix.config_snippet
