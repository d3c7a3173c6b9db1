"""The daemon's scrape path read straight into the store gives the store the sample path gives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from tests.fixtures_prometheus import MetricsServer
from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeResult, ScrapeTarget
from tritonguard.core.engine import Engine
from tritonguard.core.metric_names import is_consumed, is_counter
from tritonguard.core.samples import Labels
from tritonguard.core.series_store import SeriesStore
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, TargetSettings
from tritonguard.sources.scrape import CUT_MID_LINE, ScrapeSource, target_labels

CAPTURE_2 = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
CAPTURE_50 = Path(__file__).parents[2] / "benchmarks" / "data" / "triton_50_models.prom"
KUBE = 'kube_pod_info{namespace="ml",pod="t-0",node="n1",created_by_kind="ReplicaSet"} 1\n'
POLLS = 5


class RecordingScraper(MetricsScraper):
    """A real scraper that keeps what each fan-out returned, for the reference to read."""

    def __init__(self) -> None:
        super().__init__(timeout_s=5.0, jitter_s=0.0)
        self.rounds: list[list[ScrapeResult]] = []

    async def scrape_all(self, targets: Sequence[ScrapeTarget]) -> list[ScrapeResult]:
        """Scrape as usual; remember the results."""
        results = await super().scrape_all(targets)
        self.rounds.append(results)
        return results


def _advanced(text: str, k: int) -> str:
    """Return ``text`` at its ``k``-th scrape: every counter grown, gauges as they were."""
    out = []
    for line in text.split("\n"):
        head, _, raw = line.rpartition(" ")
        if line and line[0] != "#" and is_counter(head.partition("{")[0]):
            out.append(f"{head} {int(float(raw)) + 7 * k}")
        else:
            out.append(line)
    return "\n".join(out)


def _snapshot(store: SeriesStore) -> dict[str, object]:
    """Everything the engine reads from a store: each family's series in order, and the times."""
    names = sorted({s.name for s in store._series.values()})
    return {
        "series": [
            (
                s.name,
                s.labels,
                s.counter,
                [repr(x) for x in s.times],
                [repr(x) for x in s.values],
                list(s.resets),
                s.born,
                s.last_raw,
            )
            for name in names
            for s in store.family(name)
        ],
        "points": store.points,
        "ingested": store.samples_ingested,
        "newest": store.newest,
        "exporters": {k: list(v) for k, v in store._exporter_scrapes.items()},
        "targets": {k: list(v) for k, v in store._scrapes.items()},
    }


async def test_store_read_straight_from_scrapes_equals_the_sample_path() -> None:
    """Five polls of four real HTTP targets build the same store either way.

    The 50-model capture advances every poll; a second Triton's discovery labels change
    (node n1, then n2) and it is then no longer listed; a third serves a garbled
    exposition once and a body cut mid-line once, each dropped with the sample path's
    error; an honor_labels exporter keeps its own pod labels. The fast path hands on no
    samples, counts what it stored, and still makes the 50 models known for config reads.
    """
    capture_50 = CAPTURE_50.read_text()
    capture_2 = CAPTURE_2.read_text()
    poll = {"k": 0}

    def flaky() -> str:
        k = poll["k"]
        if k == 1:
            return "nv_inference_count{model= 3\n"
        if k == 2:
            return _advanced(capture_2, k)[:-40]  # ends inside a line
        return _advanced(capture_2, k)

    servers = {
        "t50": await MetricsServer(render=lambda: _advanced(capture_50, poll["k"])).start(),
        "t2": await MetricsServer(render=lambda: _advanced(capture_2, poll["k"])).start(),
        "flaky": await MetricsServer(render=flaky).start(),
        "kube": await MetricsServer(render=lambda: KUBE).start(),
    }
    targets = [
        TargetSettings(
            name="t50",
            metrics_url=servers["t50"].url,
            namespace="ml",
            pod="t-0",
            triton_url="http://127.0.0.1:9",
        ),
        TargetSettings(name="t2", metrics_url=servers["t2"].url, namespace="ml", pod="t-1"),
        TargetSettings(name="flaky", metrics_url=servers["flaky"].url, namespace="ml", pod="t-2"),
        TargetSettings(name="kube", metrics_url=servers["kube"].url, honor_labels=True),
    ]
    asked: set[tuple[str, str]] = set()

    async def fetch(target: TargetSettings, model: str) -> Mapping[str, Any] | None:
        asked.add((target.name, model))
        return None

    scraper = RecordingScraper()
    source = ScrapeSource(targets, scraper, keep=is_consumed)
    settings = Settings(targets=targets, listen="127.0.0.1:0")
    app = DaemonApp(settings, sources=[source], config_fetcher=fetch, registry=CollectorRegistry())
    reference = Engine(settings.engine_config())
    sample_path = ScrapeSource([], MetricsScraper(timeout_s=1.0), keep=is_consumed)
    plans: list[list[tuple[TargetSettings, Labels]]] = []
    errors: list[list[tuple[str, str | None]]] = []
    stored = 0
    try:
        for k in range(POLLS):
            poll["k"] = k
            listed = targets if k < 3 else [t for t in targets if t.name != "t2"]
            node: dict[str, Labels] = {"t2": (("node", "n1" if k < 2 else "n2"),)}
            source.replace_targets(listed, node)
            plans.append([(t, target_labels(t) + node.get(t.name, ())) for t in listed])
            result = await app.poll(source)
            assert result.samples == [] and result.stored > 0
            stored += result.stored
            errors.append([(s.target, s.error) for s in result.statuses])
        await app._refresh_configs()  # the config loop's body, once, without the loop
    finally:
        await source.close()
        for server in servers.values():
            await server.stop()

    for k, (plan, results) in enumerate(zip(plans, scraper.rounds, strict=True)):
        expected = []
        samples = []
        for (target, labels), scraped in zip(plan, results, strict=True):
            converted, status = sample_path.convert(target, scraped, labels=labels)
            samples.extend(converted)
            expected.append((status.target, status.error))
        reference.ingest(samples, results[0].timestamp)
        assert errors[k] == expected
    assert _snapshot(app.engine.store) == _snapshot(reference.store)
    flaky_errors = [dict(e)["flaky"] for e in errors]
    assert flaky_errors[0] is None and flaky_errors[3] is None
    assert (flaky_errors[1] or "").startswith("bad exposition:")
    assert flaky_errors[2] == CUT_MID_LINE
    assert stored == app.engine.store.samples_ingested
    assert app.registry.get_sample_value(
        "tritonguard_samples_ingested_total", {"source": "scrape"}
    ) == float(stored)
    assert len({model for name, model in asked if name == "t50"}) == 50
