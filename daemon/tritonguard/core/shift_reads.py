"""Which models' configs to read again now: those whose latency just began to shift.

The daemon reads every config at start, when a model first appears and then every
``model_config_refresh_s`` (5 min by default, since a fleet has thousands of them). A
deploy that changes a config in place through the repository API leaves Triton's counters
running, so nothing in the metrics says "read me". Yet the config in force is evidence the
causes weigh as soon as the latency shifts: the instance count that tells executions that
share a device from one that runs alone, the batcher's delay that a queue may be waiting
on. So a subject whose latency is up asks for a read when it has had none within the current
window: on the evaluation its symptom first shows, and again each window while it lasts. A
symptom may begin before the change that matters (a noisy minute before a deploy), and the
read it asked for then shows the config the deploy replaced; one read per window bounds the
reads to the subjects in trouble, at most one per window each.
"""

from __future__ import annotations

import math

from tritonguard.core.features import SubjectKey

# Reads asked for in one evaluation. A bad config rolled out to a fleet shifts every pod at
# once; the rest ask at the next evaluations (a subject not asked for is not marked).
MAX_PER_EVALUATION = 64


class ShiftReads:
    """When each subject whose latency is up last asked for a config read."""

    def __init__(self) -> None:
        self._asked: dict[SubjectKey, float] = {}

    def want(
        self,
        key: SubjectKey,
        *,
        shifting: bool,
        read_at: float | None,
        now: float,
        window_s: float,
        room: bool,
    ) -> bool:
        """Return whether to read ``key``'s config at ``now``; remember that it asked.

        ``shifting``: its latency is up now (on the full window or the fast path);
        ``read_at``: its newest config read, which within ``window_s`` of ``now`` already
        shows the config in force, as an ask within it will; ``room``: this evaluation may
        ask for more.
        """
        if not shifting:
            self._asked.pop(key, None)
            return False
        last = max(read_at or -math.inf, self._asked.get(key, -math.inf))
        if last >= now - window_s or not room:
            return False
        self._asked[key] = now
        return True

    def forget(self, key: SubjectKey) -> None:
        """Drop a subject no longer in view."""
        self._asked.pop(key, None)
