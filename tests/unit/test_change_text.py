"""The one-line form every change takes: shortened values, the first leaves, the rest counted."""

from __future__ import annotations

from tritonguard.core.change_text import changes_line, leaves_line, show
from tritonguard.core.config_changes import ConfigChange
from tritonguard.core.config_patch import Change
from tritonguard.core.rollout_changes import RolloutChange


def test_values_are_shortened_to_their_width_and_absence_reads_none() -> None:
    """A long value is cut with an ellipsis at the width asked; None is ``(none)``."""
    assert show(None) == "(none)"
    assert show("x" * 40) == "x" * 40
    assert show("x" * 41) == "x" * 37 + "..."
    assert len(show("y" * 100, width=60)) == 60


def test_word_lists_are_joined_only_when_asked() -> None:
    """Args read as the shell shows them; a config's emptied list stays ``[]``."""
    assert show(["tritonserver", "--log-verbose=1"], words=True) == "tritonserver --log-verbose=1"
    assert show([]) == "[]"


def test_past_the_first_three_leaves_the_rest_are_counted() -> None:
    """Five parts: three shown, ``and 2 more``; three parts: no count."""
    assert leaves_line(["a", "b", "c", "d", "e"]) == "a; b; c; and 2 more"
    assert leaves_line(["a", "b", "c"]) == "a; b; c"


def test_config_and_rollout_summaries_share_the_shape() -> None:
    """A model-config change and a rollout's template diff read alike, each at its width."""
    leaves = tuple(Change(f"k{i}", "v" * 50, i) for i in range(4))
    config = ConfigChange("m", 0.0, 1.0, leaves, {}, {})
    rollout = RolloutChange("ns", "Deployment", "d", 2, "d-2", 0.0, 0.0, leaves, 1, "d-1")
    assert config.summary() == changes_line(leaves)
    assert config.summary().endswith("; and 1 more")
    assert ("v" * 37 + "...") in config.summary()
    assert rollout.diff_text() == changes_line(leaves, width=60, words=True)
    assert ("v" * 50) in rollout.diff_text()
