"""One family's series by subject and by pod, kept up to date as the store adds and drops them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tritonguard.core.samples import label
from tritonguard.core.targets import target_of

if TYPE_CHECKING:
    from tritonguard.core.series_store import Series

SubjectKey = tuple[str, str, str]  # (namespace, pod, model)


class FamilyIndex:
    """A family's series by (namespace, pod, model) and by pod, each bucket in family order.

    Every evaluation reads each subject's series of a few dozen families; finding them by
    scanning the family's labels would cost a pass over the whole fleet per evaluation.
    Buckets keep the family's own order (the order series were stored in), so sums over a
    bucket add in the same order as sums over a filtered family.
    """

    __slots__ = ("aggregates", "by_pod", "by_subject", "derived")

    def __init__(self, series: Iterable[Series] = ()) -> None:
        # A reader's structure built from the whole family (node-exporter's CPUs by node),
        # kept across evaluations and dropped whenever the family gains or loses a series.
        self.derived: object | None = None
        self.by_subject: dict[SubjectKey, list[Series]] = {}
        # (namespace, "", model) keys that sum a model over its pods, with how many pod
        # series each holds (a key goes when its last pod series does).
        self.aggregates: dict[SubjectKey, int] = {}
        # By the pod ``target_of`` names, each series with its namespace.
        self.by_pod: dict[str, list[tuple[str, Series]]] = {}
        for s in series:
            self.add(s)

    def add(self, series: Series) -> None:
        """Index a series the store just took in."""
        self.derived = None
        ns, pod = target_of(series.labels)
        model = label(series.labels, "model")
        self.by_subject.setdefault((ns, pod, model), []).append(series)
        if pod:
            # The same series also count toward the model across its pods.
            agg = (ns, "", model)
            self.by_subject.setdefault(agg, []).append(series)
            self.aggregates[agg] = self.aggregates.get(agg, 0) + 1
        self.by_pod.setdefault(pod, []).append((ns, series))

    def drop(self, gone: Sequence[Series]) -> None:
        """Forget series the store let go, in one pass over the buckets they were in."""
        self.derived = None
        subjects: set[SubjectKey] = set()
        pods: set[str] = set()
        for series in gone:
            ns, pod = target_of(series.labels)
            model = label(series.labels, "model")
            subjects.add((ns, pod, model))
            pods.add(pod)
            if pod:
                agg = (ns, "", model)
                subjects.add(agg)
                left = self.aggregates[agg] - 1
                if left:
                    self.aggregates[agg] = left
                else:
                    del self.aggregates[agg]
        ids = {id(s) for s in gone}
        for key in subjects:
            kept = [s for s in self.by_subject[key] if id(s) not in ids]
            if kept:
                self.by_subject[key] = kept
            else:
                del self.by_subject[key]
        for pod in pods:
            held = [(ns, s) for ns, s in self.by_pod[pod] if id(s) not in ids]
            if held:
                self.by_pod[pod] = held
            else:
                del self.by_pod[pod]
