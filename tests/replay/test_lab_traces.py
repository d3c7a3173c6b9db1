"""Replay of traces recorded from a real Triton: every cause found in time, healthy runs quiet.

Each trace is replayed natively and as other servers would show the same run: scraped every
15 s and 30 s, with Triton's own series only, and without summary latencies. A case is judged
with ``benchmarks.detection_eval``: the labelled cause must be the first incident on its model,
at or after the onset and within 60 s plus one scrape interval. Where a variant hides the
mechanism (declared below, with the reason), the engine must stay silent: a skip never hides a
wrong answer, and a wrong cause always fails.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.detection_eval import score, traces
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.replay import drive
from tritonguard.sources.replay import load_trace

TRACES = Path(__file__).parent.parent / "fixtures" / "traces"
VARIANTS = ("native", "15s", "30s", "triton-only", "no-summaries")

_ALIASED = "reloads every 15-20 s alias away at scrapes this coarse: each scrape holds one"
_SHORT = "the 45 s fault phase holds a single 30 s rate interval"
# What a variant hides from the engine. These cases must end silent or right, never wrong.
CANNOT_SEE: dict[tuple[str, str], str] = {
    ("batching_delay", "30s"): (
        "one or two scrapes per window cannot show whether queueing is steady (a batcher) or "
        "in bursts (reloads); the daemon, which reads the model config, sees the queue match "
        "max_queue_delay_microseconds"
    ),
    ("model_reload", "15s"): _ALIASED,
    ("model_reload", "30s"): _ALIASED,
    ("model_reload_holdout", "15s"): _ALIASED,
    ("model_reload_holdout", "30s"): _ALIASED,
    ("cpu_bottleneck_holdout", "30s"): _SHORT,
    ("node_contention_holdout", "30s"): _SHORT,
    ("too_many_instances_holdout", "30s"): _SHORT,
    ("cpu_bottleneck_ramp", "30s"): (
        "the ramp crosses capacity 55 s after the onset: the fault phase left holds one 30 s "
        "rate interval"
    ),
    ("cpu_bottleneck_holdout", "triton-only"): (
        "a 0.5-core container limit on a host with spare cores shows only in cAdvisor"
    ),
    ("cpu_bottleneck_ramp", "triton-only"): (
        "a 1-core container limit on a 2-core host shows only in cAdvisor"
    ),
    ("memory_copy_holdout", "triton-only"): (
        "conversions inside compute_infer show only as DCGM PCIe bytes"
    ),
}
CASES = [(name, variant) for name, _ in traces([TRACES]) for variant in VARIANTS]


def test_fixture_set_covers_the_catalogue() -> None:
    """The recorded fixtures hold every cause of the catalogue and the three healthy controls."""
    from tritonguard.core.findings import CAUSES

    labels = [json.loads(p.read_text()) for p in TRACES.glob("*.labels.json")]
    assert set(CAUSES) <= {lb.get("cause") for lb in labels}
    healthy = {lb["scenario"] for lb in labels if lb.get("cause") is None}
    assert {"healthy_steady", "healthy_ramp", "healthy_warmup_deploy"} <= healthy


def test_every_declared_blind_spot_is_a_case() -> None:
    """A declaration names a real trace and variant, so none silently stops applying."""
    assert set(CANNOT_SEE) <= set(CASES)


@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_the_right_cause_first_in_time_or_silence_where_the_variant_hides_it(
    name: str, variant: str
) -> None:
    """The labelled cause opens first, after onset, within the deadline; healthy runs open nothing.

    Where the variant hides the mechanism, silence is the right answer too; a wrong cause, an
    incident before the onset or a late diagnosis fails in every case.
    """
    result = score(name, TRACES, variant)
    blind = CANNOT_SEE.get((name, variant))
    allowed = ("right", "silent") if blind else ("right",)
    assert result.verdict in allowed, f"{result.line()} (blind spot: {blind or 'none'})"


def test_cold_start_when_the_pods_other_exporters_are_seen_before_triton() -> None:
    """A daemon reading Prometheus often sees a pod's cAdvisor before its first Triton scrape.

    Prometheus scrapes each job at its own offset. The pod's Triton counters then first appear
    a scrape after the pod does; they are not a model that was just born, so the later deploy
    is one reload (cold_start), not two (model_reload churn). This is how the Prometheus e2e
    run read cold_start as model_reload.
    """
    samples = sorted(load_trace(TRACES / "cold_start.om.gz"), key=lambda s: s.timestamp or 0.0)
    label = json.loads((TRACES / "cold_start.labels.json").read_text())
    first_t = samples[0].timestamp or 0.0
    exporter = [s for s in samples if s.name.startswith("container_")]
    assert exporter, "the trace carries the pod's cAdvisor series"
    early = [
        dataclasses.replace(s, timestamp=first_t - 1.0)
        for s in exporter
        if s.timestamp == exporter[0].timestamp
    ]
    engine = Engine()
    events: list[IncidentEvent] = []
    for _, evs in drive(engine, early + samples):
        events.extend(evs)
    opened = [e for e in events if e.event == "opened" and e.subject.model == label["model"]]
    assert opened and opened[0].cause == "cold_start", [(e.cause, e.at) for e in opened]


def test_reload_churn_opens_on_the_scrape_that_confirms_its_second_reload() -> None:
    """Reloads counted from finished bursts need no second evaluation to open.

    The repository is rewritten every 15 s at a 2 s scrape. The second reload's cold burst
    counts once a warm scrape follows it; that scrape is the confirmation a second
    evaluation would give, so the incident opens on the evaluation that first reads the
    churn (before: one scrape later, +24 s).
    """
    label = json.loads((TRACES / "model_reload.labels.json").read_text())
    engine = Engine()
    first_read: float | None = None
    opened: list[IncidentEvent] = []
    for t, evs in drive(engine, load_trace(TRACES / "model_reload.om.gz")):
        opened += [e for e in evs if e.event == "opened" and e.subject.model == label["model"]]
        reading = [
            f
            for d in engine.last_diagnoses.values()
            if d.subject.model == label["model"]
            for f in d.findings
            if f.cause == "model_reload" and f.confidence >= engine.t.open_confidence
        ]
        if first_read is None and reading:
            assert all(f.settled for f in reading)
            first_read = t
    assert opened and opened[0].cause == "model_reload", [(e.cause, e.at) for e in opened]
    assert first_read is not None
    assert opened[0].at == first_read
    assert opened[0].at - label["onset"] <= 22.5
