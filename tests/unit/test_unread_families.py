"""Families under a consumed prefix that no feature reads, and unread quantiles, are not stored."""

from __future__ import annotations

import pytest

from tests.unit.test_ingest_path import CAPTURE_50, TARGET
from tritonguard.core import scrape_ingest, series_store
from tritonguard.core.features import FeatureReader
from tritonguard.core.metric_names import (
    CONSUMED_PREFIXES,
    READ_QUANTILES,
    UNREAD_FAMILIES,
    is_consumed,
    is_counter,
)
from tritonguard.core.samples import Labels, label
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore
from tritonguard.core.thresholds import Thresholds


def _busy(text: str, scrape: int) -> str:
    """Return the capture at a later scrape of steady traffic: counters grow, quantiles move."""
    out = []
    for index, line in enumerate(text.split("\n")):
        if not line or line[0] == "#":
            out.append(line)
            continue
        head, _, raw = line.rpartition(" ")
        value = float(raw)
        if is_counter(head.partition("{")[0]):
            value += scrape * (index % 7 + 1) * 11
        else:
            value *= 1.0 + 0.01 * (scrape % 3)
        out.append(f"{head} {value}")
    return "\n".join(out)


def test_read_families_stay_consumed_and_unread_ones_are_not() -> None:
    """Quantiles, buckets and the counters are read; the summaries' counts and sums are not."""
    for name in (
        "nv_inference_count",
        "nv_inference_exec_count",
        "nv_inference_request_summary_us",
        "nv_inference_compute_infer_summary_us",
        "nv_inference_queue_duration_histogram_us_bucket",
        "nv_inference_compute_input_duration_us",
    ):
        assert is_consumed(name), name
    assert "nv_inference_request_summary_us_count" in UNREAD_FAMILIES
    assert not any(is_consumed(name) for name in UNREAD_FAMILIES)


def test_features_of_the_capture_are_the_same_without_the_unread_families(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every feature of the capture's 50 models is the same with or without what none reads.

    Eight scrapes of steady traffic; the store keeps 1,000 series fewer without the unread
    families, and 500 fewer again without the summary quantiles no feature reads (0.9, 0.95
    and 0.999 of three summaries, and the queue's median: ten a model).
    """
    text = CAPTURE_50.read_text()
    scrapes = [(100.0 + 10.0 * k, _busy(text, k)) for k in range(8)]
    narrow = SeriesStore()
    ingest = TargetIngest(narrow, extra_labels=TARGET)
    for t, scrape in scrapes:
        ingest.ingest(scrape, t)

    # The store as it was when every family under a consumed prefix was kept.
    def prefixed(name: str) -> bool:
        return name.startswith(CONSUMED_PREFIXES)

    def every_series(_name: str, _labels: Labels) -> bool:
        return True

    monkeypatch.setattr(series_store, "is_consumed", prefixed)
    monkeypatch.setattr(scrape_ingest, "is_consumed", prefixed)
    monkeypatch.setattr(series_store, "is_read", every_series)
    monkeypatch.setattr(scrape_ingest, "is_read", every_series)
    wide = SeriesStore()
    wide_ingest = TargetIngest(wide, extra_labels=TARGET)
    for t, scrape in scrapes:
        wide_ingest.ingest(scrape, t)
    assert len(wide) - len(narrow) == 1000 + 500
    kept = {
        (name, label(s.labels, "quantile")) for name in READ_QUANTILES for s in narrow.family(name)
    }
    assert kept == {(name, q) for name, qs in READ_QUANTILES.items() for q in qs}
    now = scrapes[-1][0]
    thresholds = Thresholds()
    narrow_reader = FeatureReader(narrow, thresholds, now)
    wide_reader = FeatureReader(wide, thresholds, now)
    subjects = narrow_reader.model_subjects()
    assert len(subjects) == 50 and subjects == wide_reader.model_subjects()
    busy = 0
    for key in subjects:
        features = narrow_reader.compute(key).as_dict()
        assert features == wide_reader.compute(key).as_dict(), key
        busy += bool(features["request_rate"]) and features["input_share"] is not None
    assert busy == 50  # every model had traffic, so the rates and shares were computed
