"""Shard settings: the index from a StatefulSet ordinal, a Lease per shard, clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonguard.settings import SettingsError, load_settings


def test_an_explicit_index_names_its_own_lease() -> None:
    """Shard 2 of 3 campaigns on the configured lease name suffixed by its index."""
    s = load_settings(overrides={"shard": {"count": 3, "index": 2}})
    assert (s.shard.shard.index, s.shard.shard.count) == (2, 3)
    assert s.kube.lease_name == "tritonguard-leader-shard-2"


def test_the_index_comes_from_the_statefulset_ordinal_of_the_identity() -> None:
    """Without an index, ``tritonguard-1`` is shard 1: the StatefulSet names its pods so."""
    s = load_settings(
        overrides={"shard": {"count": 2}, "kube": {"identity": "tritonguard-1", "lease_name": "tg"}}
    )
    assert s.shard.index == 1
    assert s.kube.lease_name == "tg-shard-1"


def test_ordinals_past_the_count_are_further_replicas_of_the_same_shards() -> None:
    """Of 3 shards, ``tritonguard-5`` is shard 2's second replica, on shard 2's Lease."""
    s = load_settings(overrides={"shard": {"count": 3}, "kube": {"identity": "tritonguard-5"}})
    assert s.shard.index == 2
    assert s.kube.lease_name == "tritonguard-leader-shard-2"


def test_settings_validated_again_keep_one_suffix() -> None:
    """Re-validating resolved settings (a copy, a reload) does not suffix the lease twice."""
    s = load_settings(overrides={"shard": {"count": 2, "index": 0}})
    again = type(s).model_validate(s.model_dump())
    assert again.kube.lease_name == "tritonguard-leader-shard-0"


def test_unsharded_settings_keep_the_lease_name() -> None:
    """One shard (the default) changes nothing: one Lease, every subject."""
    s = load_settings()
    assert s.kube.lease_name == "tritonguard-leader"
    assert not s.shard.shard.sharded


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            {"shard": {"count": 2}, "kube": {"identity": "tritonguard-main"}},
            "ends in no StatefulSet ordinal; set shard.index",
        ),
        ({"shard": {"count": 2, "index": 2}}, "shard.index is 2 but shard.count is 2"),
        ({"shard": {"count": 1, "index": 1}}, "set shard.count to the number of shards"),
        ({"shard": {"count": 0}}, "shard.count"),
        ({"shard": {"count": 2, "index": -1}}, "shard.index"),
    ],
)
def test_an_impossible_shard_is_refused_at_start(overrides: dict[str, object], says: str) -> None:
    """Settings that cannot name one shard are refused with what to set, before anything runs."""
    with pytest.raises(SettingsError, match=says):
        load_settings(overrides=overrides)


def test_the_config_file_sets_the_shard_and_its_error_names_the_line(tmp_path: Path) -> None:
    """A shard count in the config file works; an out-of-range one is refused naming the file."""
    path = tmp_path / "config.yaml"
    path.write_text("shard:\n  count: 4\n  index: 3\n")
    assert load_settings(path).kube.lease_name == "tritonguard-leader-shard-3"
    path.write_text("shard:\n  count: 5000\n")
    with pytest.raises(SettingsError, match=rf"{path}:2: shard.count"):
        load_settings(path)
