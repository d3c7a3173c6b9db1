"""`tritonguard diagnose URL` against a real Triton: the breakdown and the finding, or exit 2."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.fixtures_prometheus import closed_port_url
from tritonguard.lab.loadgen import LoadGenerator, LoadSpec, Segment
from tritonguard.lab.repository import Behaviour, DynamicBatching, ModelSpec, write_model
from tritonguard.lab.triton_server import TritonServer

pytestmark = pytest.mark.live


async def _diagnose(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tritonguard.cli.main",
        "diagnose",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_diagnose_explains_a_waiting_batcher(tmp_path: Path) -> None:
    """Low traffic into a 150 ms batching window: diagnose names batching_delay and the fix.

    The JSON report also lists the sources the diagnosis was made without.
    """
    spec = ModelSpec(
        "ranker",
        max_batch_size=16,
        dynamic_batching=DynamicBatching(150_000, (16,)),
        behaviour=Behaviour(accel_ms=4),
    )
    write_model(tmp_path, spec)
    async with TritonServer(tmp_path) as server, LoadGenerator(server.http_url) as gen:
        load = gen.run(
            LoadSpec("ranker", shape=(1, 16), schedule=(Segment(0, 6.0),), duration_s=40)
        )
        diag = _diagnose(
            server.metrics_url,
            "--triton-url",
            server.http_url,
            "--duration",
            "35s",
            "--interval",
            "1",
            "--format",
            "json",
        )
        (code, out, err), _ = await asyncio.gather(diag, load)
    assert code == 0, err
    report = json.loads(out)
    model = next(m for m in report["models"] if m["model"] == "ranker")
    assert model["features"]["queue_share"] > 0.5
    causes = [f["cause"] for f in model["findings"]]
    # Without a healthy baseline the symptom is the absolute queue time; the mechanism is clear.
    assert causes and causes[0] == "batching_delay", model
    assert "max_queue_delay_microseconds" in model["findings"][0]["fix"]["config_snippet"]
    # Named, so not unexplained; and the report says which sources it watched without (no
    # exporter was given: no DCGM, no cAdvisor), whatever the finding.
    assert model["unexplained"] is None
    missing = [m["source"] for m in model["missing_sources"]]
    assert any(m.startswith("DCGM") for m in missing) and any(
        m.startswith("cAdvisor") for m in missing
    )


async def test_diagnose_unreachable_server_exits_2() -> None:
    """No successful scrape: one line on stderr saying what to check, exit 2."""
    code, _, err = await _diagnose(closed_port_url(), "--duration", "2s", "--interval", "1")
    assert code == 2
    assert "no successful scrape" in err and len(err.strip().splitlines()) == 1
