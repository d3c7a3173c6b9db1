"""Bounded patches of Triton model configs: set/add/remove, int64-as-string, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from tritonguard.core.config_patch import (
    DEFAULT_BOUNDS,
    Bound,
    BoundError,
    ConfigPatch,
    PatchError,
    apply_patch,
    parse_path,
    reverse_patch,
)

CONFIG: dict[str, Any] = {
    "name": "resnet",
    "max_batch_size": 8,
    "dynamic_batching": {"max_queue_delay_microseconds": "100000", "preferred_batch_size": [8]},
    "instance_group": [{"count": 2, "kind": "KIND_GPU"}],
}


def test_set_keeps_triton_int64_string_form_and_reports_the_change() -> None:
    """Triton writes uint64 fields as strings; a patch writes the new value the same way."""
    new, changes = apply_patch(
        CONFIG, ConfigPatch(set={"dynamic_batching.max_queue_delay_microseconds": 500})
    )
    assert new["dynamic_batching"]["max_queue_delay_microseconds"] == "500"
    assert [c.as_dict() for c in changes] == [
        {"path": "dynamic_batching.max_queue_delay_microseconds", "old": "100000", "new": "500"}
    ]
    assert CONFIG["dynamic_batching"]["max_queue_delay_microseconds"] == "100000"


def test_add_to_indexed_field_and_bound_with_wildcard() -> None:
    """``instance_group[0].count`` +1 is covered by the ``instance_group[*].count`` bound."""
    new, _ = apply_patch(CONFIG, ConfigPatch(add={"instance_group[0].count": 1}))
    assert new["instance_group"][0]["count"] == 3
    with pytest.raises(BoundError, match="below its bound min=1"):
        apply_patch(CONFIG, ConfigPatch(add={"instance_group[0].count": -2}))


def test_set_creates_missing_objects_for_queue_policy() -> None:
    """A queue policy that does not exist yet is created under dynamic_batching."""
    new, changes = apply_patch(
        CONFIG,
        ConfigPatch(set={"dynamic_batching.default_queue_policy.max_queue_size": 64}),
    )
    assert new["dynamic_batching"]["default_queue_policy"] == {"max_queue_size": 64}
    assert len(changes) == 1


def test_numeric_change_without_any_bound_is_refused() -> None:
    """A field no bound covers cannot be changed to a number: typos never reach a server."""
    with pytest.raises(BoundError, match="has no bound"):
        apply_patch(CONFIG, ConfigPatch(set={"dynamic_batching.priority_levels": 9}))


def test_playbook_bounds_override_defaults() -> None:
    """A narrower bound from the playbook wins over the default one."""
    bounds = {**DEFAULT_BOUNDS, "dynamic_batching.max_queue_delay_microseconds": Bound(0, 1000)}
    with pytest.raises(BoundError, match="above its bound max=1000"):
        apply_patch(
            CONFIG,
            ConfigPatch(set={"dynamic_batching.max_queue_delay_microseconds": 5000}),
            bounds,
        )


def test_remove_and_errors_name_the_path() -> None:
    """Removing works; adding to a missing field or a malformed path raises a clear PatchError."""
    new, changes = apply_patch(CONFIG, ConfigPatch(remove=("dynamic_batching",)))
    assert "dynamic_batching" not in new and changes
    with pytest.raises(PatchError, match="field 'nope' is not in the configuration"):
        apply_patch(CONFIG, ConfigPatch(add={"nope.count": 1}))
    with pytest.raises(PatchError, match="index \\[3\\] does not exist"):
        apply_patch(CONFIG, ConfigPatch(add={"instance_group[3].count": 1}))
    with pytest.raises(PatchError, match="bad configuration path"):
        parse_path("a..b")


def test_renaming_the_model_is_refused() -> None:
    """A patch must not change the model's name (the load would target another model)."""
    with pytest.raises(PatchError, match="rename"):
        apply_patch(CONFIG, ConfigPatch(set={"name": "other"}))


SHED = ConfigPatch(
    set={
        "dynamic_batching.default_queue_policy.timeout_action": "REJECT",
        "dynamic_batching.default_queue_policy.max_queue_size": 64,
        "dynamic_batching.max_queue_delay_microseconds": 500,
    }
)


def test_reverse_patch_restores_only_the_changed_paths_on_a_later_config() -> None:
    """Undoing a shed keeps a change made since (instances) and drops the created policy."""
    shed, changes = apply_patch(CONFIG, SHED)
    reverse = reverse_patch(CONFIG, changes)
    assert reverse is not None
    assert reverse.remove == ("dynamic_batching.default_queue_policy",)
    assert reverse.set == {"dynamic_batching.max_queue_delay_microseconds": "100000"}
    later, _ = apply_patch(shed, ConfigPatch(add={"instance_group[0].count": 1}))
    restored, _ = apply_patch(later, reverse, check_bounds=False)
    assert restored["dynamic_batching"] == CONFIG["dynamic_batching"]
    assert restored["instance_group"][0]["count"] == CONFIG["instance_group"][0]["count"] + 1


def test_reverse_patch_gives_up_where_paths_cannot_say_what_to_undo() -> None:
    """A removed field or a new list entry is undone by reloading the whole previous config."""
    _, removed = apply_patch(CONFIG, ConfigPatch(remove=("dynamic_batching",)))
    assert reverse_patch(CONFIG, removed) is None
    _, appended = apply_patch(
        CONFIG, ConfigPatch(set={"dynamic_batching.preferred_batch_size": [8, 16]})
    )
    assert reverse_patch(CONFIG, appended) is None


def test_a_restore_is_not_held_to_the_bounds_of_new_values() -> None:
    """Putting back the server's own value works even where a playbook bound would refuse it."""
    tight = {"dynamic_batching.max_queue_delay_microseconds": Bound(0, 1000)}
    lowered, changes = apply_patch(
        CONFIG, ConfigPatch(set={"dynamic_batching.max_queue_delay_microseconds": 500}), tight
    )
    reverse = reverse_patch(CONFIG, changes)
    assert reverse is not None
    with pytest.raises(BoundError):
        apply_patch(lowered, reverse, tight)
    restored, _ = apply_patch(lowered, reverse, tight, check_bounds=False)
    assert restored["dynamic_batching"]["max_queue_delay_microseconds"] == "100000"
