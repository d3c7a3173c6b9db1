"""Flight recorder: bounded ring and captures, whatever the fleet and the incident's length."""

from __future__ import annotations

from pathlib import Path

from tritonguard.core.findings import Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.samples import Sample, make_labels
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.flight_recorder import SAMPLE_BYTES, FlightRecorder


def _opened(incident_id: str) -> IncidentEvent:
    """Return an incident opening on the recorded subject."""
    return IncidentEvent(
        event="opened",
        incident_id=incident_id,
        cause="batching_delay",
        subject=Subject("prod", "m", "p"),
        at=0.0,
        confidence=0.9,
        summary="",
        evidence={"x": Evidence(1.0, "ratio", 30, "x")},
        fix=Fix(""),
        opened_at=0.0,
    )


def test_ring_and_captures_share_one_memory_bound(tmp_path: Path) -> None:
    """However many samples arrive, ring plus captures hold at most the bound's worth."""
    bound = 2_000 * SAMPLE_BYTES
    recorder = FlightRecorder(tmp_path, AuditStore(), pre_s=1e9, max_bytes=bound)
    labels = make_labels({"model": "m", "namespace": "prod", "pod": "p"})
    recorder.on_event(_opened("a"))
    recorder.on_event(_opened("b"))
    for t in range(50):
        batch = [
            Sample("nv_inference_request_success", labels, float(i), float(t)) for i in range(300)
        ]
        recorder.observe(batch, float(t))
        assert recorder.held() * SAMPLE_BYTES <= bound
    assert recorder.dropped > 0
