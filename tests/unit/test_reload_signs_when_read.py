"""The reload signs are read only for a subject whose findings could use them.

Nearly every subject of a fleet is quiet at nearly every scrape: no symptom, no fast-path
reading and no spikes recurring often enough to be a period. model_reload and
node_contention are the only readers of the reload signs, and both need one of those, so a
quiet subject skips the signs (a tenth of a healthy fleet's evaluation).
"""

from __future__ import annotations

import pytest

from tests.unit.synthetic import Phase, run_engine, triton_model
from tritonguard.core import derive
from tritonguard.core.features import FeatureReader, SubjectKey
from tritonguard.core.reload_signs import reload_events
from tritonguard.core.thresholds import Thresholds

Calls = list[tuple[SubjectKey, float]]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Record each subject and time the reload signs are read for, and read them as before."""
    seen: Calls = []

    def counted(
        reader: FeatureReader,
        key: SubjectKey,
        now: float,
        t: Thresholds,
        healthy_compute_us: float | None = None,
        *,
        per_request: list[tuple[float, float]] | None = None,
    ) -> list[tuple[float, str]]:
        seen.append((key, now))
        return reload_events(reader, key, now, t, healthy_compute_us, per_request=per_request)

    monkeypatch.setattr(derive, "reload_events", counted)
    return seen


def test_a_steady_healthy_model_never_reads_its_reload_signs(calls: Calls) -> None:
    """Three minutes of steady traffic at steady latency: no evaluation reads the signs."""
    series = triton_model([Phase(36, rps=20)], interval=5.0)
    events = run_engine(series, interval=5.0)
    assert events == []
    assert calls == []


def test_a_slowdown_reads_the_signs_from_its_first_abnormal_reading(calls: Calls) -> None:
    """Compute quadruples after two healthy minutes: the signs are read while it is slow.

    A slowdown at steady load is what node_contention reads them for (a reload just before
    it vetoes contention), so from the first slow scrape on they are in hand.
    """
    series = triton_model([Phase(24, rps=20), Phase(12, rps=20, infer_ms=40.0)], interval=5.0)
    run_engine(series, interval=5.0)
    onset = 1_700_000_000.0 + 24 * 5.0
    read = sorted(at for _, at in calls)
    assert read, "a subject with a symptom reads its reload signs"
    assert min(read) > onset - 5.0, "not while it was healthy"
    assert max(read) >= onset + 11 * 5.0 - 5.0, "and on to the end of the slowdown"
