"""Unit tests for the lab's model repository and config generation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonguard.lab.repository import (
    LAB_MODEL_SOURCE,
    Behaviour,
    DynamicBatching,
    ModelSpec,
    QueuePolicy,
    config_json,
    write_model,
)


def test_config_renders_batching_policy_instances_and_parameters() -> None:
    """The pbtxt carries every option a scenario deploys, with behaviour as string parameters."""
    spec = ModelSpec(
        "ranker",
        max_batch_size=16,
        instance_count=3,
        dynamic_batching=DynamicBatching(
            150_000, (8, 16), QueuePolicy(max_queue_size=64, default_timeout_us=500_000)
        ),
        behaviour=Behaviour(accel_ms=6.5, cpu_bytes=1000, ledger_dir="/tmp/l"),
    )
    text = spec.render_config()
    assert 'name: "ranker"' in text
    assert "max_batch_size: 16" in text
    assert "instance_group [ { count: 3 kind: KIND_CPU } ]" in text
    assert "max_queue_delay_microseconds: 150000" in text
    assert "preferred_batch_size: [ 8, 16 ]" in text
    assert "timeout_action: REJECT" in text
    assert "max_queue_size: 64" in text
    assert 'key: "accel_ms" value: { string_value: "6.5" }' in text
    assert 'key: "cpu_bytes" value: { string_value: "1000" }' in text
    # Defaults are not written, so an unchanged behaviour does not change the config.
    assert "copy_passes" not in text
    assert "model_warmup" not in text


def test_warmup_block_uses_model_dims_and_zero_data() -> None:
    """model_warmup is rendered per the Triton schema with the model's own dims."""
    text = ModelSpec("m", input_dims=(3, 4), warmup_count=5, warmup_batch_size=2).render_config()
    assert "model_warmup [" in text
    assert "count: 5" in text
    assert "batch_size: 2" in text
    assert "dims: [ 3, 4 ] zero_data: true" in text


def test_unbatched_model_needs_a_full_shape() -> None:
    """max_batch_size 0 with a variable dim is refused before Triton would refuse it."""
    with pytest.raises(ValueError, match="full shape"):
        ModelSpec("m", max_batch_size=0, input_dims=(-1,)).render_config()


def test_config_json_matches_pbtxt_fields() -> None:
    """The JSON config for the repository load API carries the same settings as the pbtxt."""
    spec = ModelSpec(
        "m",
        version=2,
        instance_count=4,
        dynamic_batching=DynamicBatching(2000, (4,)),
        warmup_count=1,
        behaviour=Behaviour(cold_execs=3),
    )
    cfg = config_json(spec)
    json.dumps(cfg)
    assert cfg["instance_group"] == [{"count": 4, "kind": "KIND_CPU"}]
    assert cfg["version_policy"] == {"specific": {"versions": [2]}}
    assert cfg["dynamic_batching"] == {
        "max_queue_delay_microseconds": 2000,
        "preferred_batch_size": [4],
    }
    assert cfg["parameters"] == {"cold_execs": {"string_value": "3"}}
    assert isinstance(cfg["model_warmup"], list)


@pytest.mark.parametrize("atomic", [True, False])
def test_write_model_installs_config_and_model(tmp_path: Path, atomic: bool) -> None:
    """write_model lays out config.pbtxt and <version>/model.py, leaving no temp files."""
    spec = ModelSpec("m", version=3, behaviour=Behaviour(accel_ms=1))
    model_dir = write_model(tmp_path, spec, atomic=atomic)
    assert (model_dir / "config.pbtxt").read_text() == spec.render_config()
    assert (model_dir / "3" / "model.py").read_text() == LAB_MODEL_SOURCE.read_text()
    assert not list(tmp_path.rglob("*.tmp"))


def test_with_changes_only_the_given_fields() -> None:
    """A redeploy copy changes what it names and nothing else."""
    spec = ModelSpec("m", instance_count=1, behaviour=Behaviour(accel_ms=5))
    changed = spec.with_(instance_count=4)
    assert changed.instance_count == 4
    assert changed.behaviour == spec.behaviour
    assert spec.instance_count == 1
