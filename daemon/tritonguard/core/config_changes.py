"""What changed before an incident: each subject's model-config changes, diffed, kept briefly.

The daemon reads every model's config from Triton's repository API now and then, and again
as soon as an incident opens. When a read differs from the one before, the change happened
between the two reads: ``at_earliest`` is the earlier read, ``at_latest`` the later. An
incident is said to follow a change that may have happened before its onset (``at_earliest``
at or before it) and no longer ago than the baseline looks back (``at_latest`` within
``baseline_lookback_s`` of it): a change older than that is already part of what the model's
baseline calls normal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonguard.core.change_text import changes_line
from tritonguard.core.config_patch import Change, diff

if TYPE_CHECKING:
    from tritonguard.core.config_map_changes import ConfigMapChange
    from tritonguard.core.rollout_changes import RolloutChange

# Changes kept per subject: a rollout is one or two; more within the lookback is churn, and
# the newest ones are what an incident follows.
MAX_PER_SUBJECT = 4
# Triton's own bookkeeping: leaves that differ between reads of one unchanged config.
_NOISE = ("version_policy.latest", "metric_tags")

Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One model-config change on one subject, as two reads of the repository API saw it."""

    model: str
    at_earliest: float
    at_latest: float
    changes: tuple[Change, ...]
    # The whole config before and after the change: ``triton.revert_config`` puts back
    # ``before``'s sections if the server still runs ``after``'s.
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    # What ``before`` is: the subject's own previous read, or for a pod seen for the first
    # time (a rolling update's new pod) the config its peers serve, naming one of them.
    against: str = "previous read"
    # The Deployment or StatefulSet rollout the subject's pod came from, when it began
    # within the baseline's lookback before the incident (rollout_changes.py). A rollout
    # that changed no model config is a change with no ``changes`` of its own.
    rollout: RolloutChange | None = None
    # A ConfigMap the pod mounts (a model repository) whose data changed within the lookback
    # before the incident (config_map_changes.py).
    config_map: ConfigMapChange | None = None

    @classmethod
    def of_rollout(cls, model: str, rollout: RolloutChange) -> ConfigChange:
        """Return a change that is only a rollout: the model's config did not change with it."""
        return cls(model, rollout.at, rollout.at, (), {}, {}, "the previous revision", rollout)

    @classmethod
    def of_config_map(cls, model: str, change: ConfigMapChange) -> ConfigChange:
        """Return a change that is only a mounted ConfigMap's: the model config read the same."""
        return cls(
            model,
            change.at_earliest,
            change.at_latest,
            (),
            {},
            {},
            "the ConfigMap's previous read",
            config_map=change,
        )

    def summary(self) -> str:
        """Return the change in one line: ``path: old → new``, the first few leaves.

        A change that is only a rollout is the rollout's summary, one that is only a mounted
        ConfigMap's that ConfigMap's.
        """
        if not self.changes and self.rollout is not None:
            return self.rollout.summary()
        if not self.changes and self.config_map is not None:
            return self.config_map.summary()
        return changes_line(self.changes)

    def as_dict(self, onset: float | None = None) -> dict[str, Any]:
        """Return the JSON form; with ``onset``, how long before it the change was read."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "model": self.model,
            "at_earliest": round(self.at_earliest, 3),
            "at_latest": round(self.at_latest, 3),
            "summary": self.summary(),
            "against": self.against,
            "changes": [c.as_dict() for c in self.changes],
        }
        if onset is not None:
            out["seen_before_onset_s"] = round(onset - self.at_latest, 3)
        if self.rollout is not None:
            out["rollout"] = self.rollout.as_dict(onset)
        if self.config_map is not None:
            out["config_map"] = self.config_map.as_dict(onset)
        return out

    @property
    def kind(self) -> str:
        """Return what changed first: ``model_config``, else ``rollout``, else ``config_map``."""
        if self.changes:
            return "model_config"
        if self.rollout is not None:
            return "rollout"
        return "config_map" if self.config_map is not None else "model_config"


def config_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Return the leaves that differ, without the ones Triton rewrites by itself."""
    return [c for c in diff(before, after) if not c.path.startswith(_NOISE)]


class ChangeTimeline:
    """The last config read per subject, and the changes between reads."""

    def __init__(self) -> None:
        self._last: dict[Key, tuple[float, Mapping[str, Any]]] = {}
        self._changes: dict[Key, deque[ConfigChange]] = {}
        # Pods by (namespace, model), to compare a new pod's first read with its peers'.
        self._peers: dict[tuple[str, str], set[Key]] = {}

    def read(
        self, key: Key, config: Mapping[str, Any], at: float, *, newborn: bool = False
    ) -> ConfigChange | None:
        """Take one config read; return the change it shows, or None.

        The first read of a ``newborn`` subject (a pod or model that appeared while the
        daemon watched) is compared with the config the same model's other pods serve: a
        rolling update's new pod comes up with the new config, and its own history has
        nothing to compare with. Pods already there when the daemon started may differ on
        purpose (a canary), so theirs are not.
        """
        last = self._last.get(key)
        if last is not None and at < last[0]:
            return None  # asked before the read already taken: it cannot be the newer state
        self._last[key] = (at, config)
        peers = self._peers.setdefault((key[0], key[2]), set())
        if last is None:
            reference = self._peer_reference(key, peers) if newborn else None
            peers.add(key)
            if reference is None:
                return None
            peer, (last_at, before) = reference
            against = f"pod {peer[1]} (the same model's config before this pod started)"
        else:
            (last_at, before), against = last, "previous read"
        changes = config_diff(before, config)
        if not changes:
            return None
        change = ConfigChange(key[2], last_at, at, tuple(changes), before, config, against)
        self._changes.setdefault(key, deque(maxlen=MAX_PER_SUBJECT)).append(change)
        return change

    def read_at(self, key: Key) -> float | None:
        """Return when the subject's config was last read, or None if never."""
        last = self._last.get(key)
        return None if last is None else last[0]

    def _peer_reference(
        self, key: Key, peers: set[Key]
    ) -> tuple[Key, tuple[float, Mapping[str, Any]]] | None:
        """Return the peer whose config most peers serve (the newest read among equals)."""
        reads = [(k, self._last[k]) for k in peers if k != key and k in self._last]
        if not reads or not key[1]:
            return None

        def shared(read: tuple[Key, tuple[float, Mapping[str, Any]]]) -> tuple[int, float]:
            config = read[1][1]
            return sum(1 for _, (_, other) in reads if other == config), read[1][0]

        return max(reads, key=shared)

    def preceding(self, key: Key, onset: float, lookback_s: float) -> ConfigChange | None:
        """Return the newest change the incident at ``onset`` may follow, or None."""
        for change in reversed(self._changes.get(key, ())):
            if change.at_earliest <= onset and change.at_latest >= onset - lookback_s:
                return change
        return None

    def forget(self, key: Key) -> None:
        """Drop a subject that is gone."""
        self._last.pop(key, None)
        self._changes.pop(key, None)
        peers = self._peers.get((key[0], key[2]))
        if peers is not None:
            peers.discard(key)
            if not peers:
                del self._peers[(key[0], key[2])]

    def __len__(self) -> int:
        return len(self._last)
