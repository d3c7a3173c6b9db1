"""The features Prometheus mode's settings and the sources the daemon builds from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings
from tritonguard.sources.recorded_features import RecordedFeatureSource


def test_the_features_mode_needs_a_prometheus_url() -> None:
    """Without prometheus_url there is nothing to read the features from: refused, with why."""
    with pytest.raises(ValueError, match="set prometheus_url"):
        Settings(prometheus_mode="features")
    assert Settings().prometheus_mode == "raw"


def test_the_features_mode_reads_only_the_recorded_features(tmp_path: Path) -> None:
    """A daemon in the features mode scrapes no target and reads no raw series.

    Its one source queries every recorded feature and the confidences, capped at the
    configured response size; the targets stay for the actions' Triton endpoints.
    """
    target = TargetSettings(
        name="t0",
        metrics_url="http://127.0.0.1:9/metrics",
        triton_url="http://127.0.0.1:9",
        namespace="prod",
        pod="triton-0",
    )
    s = Settings(
        prometheus_url="http://127.0.0.1:9",
        prometheus_mode="features",
        prometheus_interval_s=10.0,
        prometheus_timeout_s=20.0,
        targets=[target],
        audit_db_path=tmp_path / "audit.sqlite3",
    )
    app = DaemonApp(s)
    (source,) = app.sources
    assert isinstance(source, RecordedFeatureSource)
    assert app.features_source is source and app.recorded is not None
    assert "request_rate" in source.features and source.features[-1] == "cause_confidence"
    assert source.deadline_s == 20.0 and source.max_age_s == 30.0
    assert app.known_targets() == [target]
    raw = DaemonApp(s.model_copy(update={"prometheus_mode": "raw"}))
    assert raw.features_source is None and raw.recorded is None
    assert not any(isinstance(x, RecordedFeatureSource) for x in raw.sources)
