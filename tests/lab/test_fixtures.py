"""Recorded lab traces: every scenario is present and each label file matches its trace."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from tritonguard.core.exposition import decode_payload, parse_exposition
from tritonguard.core.findings import CAUSES
from tritonguard.core.samples import label

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
LABEL_FILES = sorted(TRACES.glob("*.labels.json"))
HEALTHY = {"healthy_steady", "healthy_ramp", "healthy_warmup_deploy"}


def test_every_cause_and_healthy_control_is_recorded() -> None:
    """Each cause of the catalogue has a trace, plus the healthy controls and held-out variants."""
    names = {p.name.removesuffix(".labels.json") for p in LABEL_FILES}
    assert set(CAUSES) | HEALTHY <= names
    assert {f"{c}_holdout" for c in CAUSES} <= names


@pytest.mark.parametrize("labels_path", LABEL_FILES, ids=lambda p: p.name)
def test_label_file_matches_its_trace(labels_path: Path) -> None:
    """The labelled model/pod exist in the trace, and the onset lies inside it after a baseline."""
    meta = json.loads(labels_path.read_text())
    assert meta["cause"] in (*CAUSES, None)
    assert (meta["cause"] is None) == (meta["scenario"] in HEALTHY)
    trace = labels_path.with_name(labels_path.name.replace(".labels.json", ".om.gz"))
    text = decode_payload(trace.read_bytes(), source=str(trace))
    assert text.rstrip().endswith("# EOF")
    samples = parse_exposition(text, source=str(trace)).samples
    times = [s.timestamp for s in samples if s.timestamp is not None]
    assert len(times) == len(samples)
    assert min(times) + 30 < meta["onset"] < max(times) - 30
    served = [
        s
        for s in samples
        if s.name == "nv_inference_request_success"
        and label(s.labels, "model") == meta["model"]
        and label(s.labels, "namespace") == meta["namespace"]
        and label(s.labels, "pod") == meta["pod"]
    ]
    assert served and max(s.value for s in served) > 0
    rounds = sorted(set(times))
    gaps = sorted({round(b - a) for a, b in pairwise(rounds)})
    assert gaps[0] >= meta["scrape_interval_s"] - 1
