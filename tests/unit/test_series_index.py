"""Family index: each subject's and pod's series, in family order, as series come and go."""

from __future__ import annotations

from tritonguard.core.samples import Sample, make_labels
from tritonguard.core.series_store import SeriesStore

SUCCESS = "nv_inference_request_success"


def _labels(pod: str, model: str, version: str = "1") -> tuple[tuple[str, str], ...]:
    return make_labels({"namespace": "prod", "pod": pod, "model": model, "version": version})


def test_buckets_follow_the_family_order_and_aggregate_pods() -> None:
    """A subject's bucket, and the model's across its pods, hold the family's series in order."""
    store = SeriesStore()
    for k, (pod, version) in enumerate([("a", "1"), ("b", "1"), ("a", "2")]):
        store.add(Sample(SUCCESS, _labels(pod, "m", version), 1.0, float(k)), float(k))
    index = store.index(SUCCESS)
    family = list(store.family(SUCCESS))
    assert index.by_subject[("prod", "a", "m")] == [family[0], family[2]]
    assert index.by_subject[("prod", "", "m")] == family
    assert index.aggregates == {("prod", "", "m"): 3}
    assert [s for _, s in index.by_pod["b"]] == [family[1]]


def test_series_added_or_expired_after_the_first_lookup_are_kept_in_step() -> None:
    """A series stored after the index was built joins it; one the store drops leaves it."""
    store = SeriesStore(retention_s=100.0)
    store.add(Sample(SUCCESS, _labels("a", "m"), 1.0, 0.0), 0.0)
    index = store.index(SUCCESS)
    store.add(Sample(SUCCESS, _labels("b", "m"), 1.0, 50.0), 50.0)
    assert [s.labels for s in index.by_subject[("prod", "", "m")]] == [
        _labels("a", "m"),
        _labels("b", "m"),
    ]
    store.expire(120.0)
    assert ("prod", "a", "m") not in index.by_subject
    assert "a" not in index.by_pod
    assert [s.labels for s in index.by_subject[("prod", "", "m")]] == [_labels("b", "m")]
    assert index.aggregates == {("prod", "", "m"): 1}
    store.expire(200.0)
    assert index.by_subject == {} and index.aggregates == {} and index.by_pod == {}
