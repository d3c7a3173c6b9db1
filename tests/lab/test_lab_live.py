"""Live tests of the fault lab against a real tritonserver (marked ``live``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tritonguard.core.exposition import parse_exposition
from tritonguard.core.samples import label
from tritonguard.lab.exporters import CFS_PERIOD_S, LabExporters, process_tree
from tritonguard.lab.loadgen import LoadGenerator, LoadSpec, Segment
from tritonguard.lab.repository import Behaviour, DynamicBatching, ModelSpec, write_model
from tritonguard.lab.triton_server import TritonServer

pytestmark = pytest.mark.live


def _metric(url: str, name: str, model: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    exp = parse_exposition(text, source=url)
    return sum(s.value for s in exp.samples if s.name == name and label(s.labels, "model") == model)


def _stat_fields(pid: int) -> list[str] | None:
    """Return the fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    return stat[stat.rfind(")") + 2 :].split()


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_server_starts_ready_and_stops_without_leftovers(tmp_path: Path) -> None:
    """The real server gets ready with a lab model; after stop its process group is gone."""
    write_model(tmp_path, ModelSpec("m", behaviour=Behaviour(accel_ms=1)))
    server = TritonServer(tmp_path)
    with server:
        pid = server.pid
        assert pid is not None
        assert server.is_ready()
        assert _group_alive(pid)  # tritonserver and its python stub
    assert server.pid is None
    assert not _group_alive(pid)
    assert "successfully loaded 'm'" in server.log_path.read_text()


async def test_accelerator_time_shows_in_compute_infer(tmp_path: Path) -> None:
    """accel_ms of the model config is real time that Triton reports as compute_infer."""
    write_model(tmp_path, ModelSpec("slow", behaviour=Behaviour(accel_ms=40)))
    write_model(tmp_path, ModelSpec("fast", behaviour=Behaviour(accel_ms=2)))
    async with TritonServer(tmp_path) as server, LoadGenerator(server.http_url) as gen:
        for model in ("slow", "fast"):
            stats = await gen.run(LoadSpec(model, concurrency=1, duration_s=2.0))
            assert stats.succeeded > 5
        per_exec = {}
        for model in ("slow", "fast"):
            infer = _metric(server.metrics_url, "nv_inference_compute_infer_duration_us", model)
            execs = _metric(server.metrics_url, "nv_inference_exec_count", model)
            per_exec[model] = infer / execs / 1000
    assert 38 <= per_exec["slow"] < 60
    assert per_exec["fast"] < 15


async def test_retry_client_amplifies_load_under_overload(tmp_path: Path) -> None:
    """Short client timeouts with immediate retries send more attempts than requests (499s)."""
    write_model(
        tmp_path,
        ModelSpec("busy", max_batch_size=0, input_dims=(1, 16), behaviour=Behaviour(accel_ms=50)),
    )
    async with TritonServer(tmp_path) as server, LoadGenerator(server.http_url) as gen:
        spec = LoadSpec(
            "busy", schedule=(Segment(0, 40.0),), duration_s=4.0, timeout_s=0.3, retries=3
        )
        stats = await gen.run(spec)
        exposition = await asyncio.to_thread(
            lambda: urllib.request.urlopen(gen.metrics_url, timeout=5).read().decode()
        )
    assert stats.amplification > 1.5
    assert stats.attempts["499"] > 0
    parsed = parse_exposition(exposition, source="ingress")
    counted = {label(s.labels, "status"): s.value for s in parsed.samples}
    assert counted["499"] == stats.attempts["499"]
    assert sum(counted.values()) == sum(stats.attempts.values())


def _hashing_model(tmp_path: Path, *, accel_ms: int, instances: int) -> tuple[Path, Path]:
    """Write model "work" (hashes 20 MB an execution, then ``accel_ms`` on the accelerator).

    Returns its repository and the ledger directory its stubs report device time in.
    """
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    repo = tmp_path / "repo"
    spec = ModelSpec(
        "work",
        max_batch_size=4,
        instance_count=instances,
        dynamic_batching=DynamicBatching(100),
        behaviour=Behaviour(accel_ms=accel_ms, cpu_bytes=20_000_000, ledger_dir=str(ledger)),
    )
    write_model(repo, spec)
    return repo, ledger


async def test_exporters_report_real_cpu_and_device_time(tmp_path: Path) -> None:
    """The container CPU series follow real CPU use; GPU util the real accelerator time."""
    repo, ledger = _hashing_model(tmp_path, accel_ms=20, instances=1)
    async with TritonServer(repo) as server:
        exporters = LabExporters(pid=lambda: server.pid, ledger_dir=ledger, cpu_quota_cores=0.05)
        async with exporters, LoadGenerator(server.http_url) as gen:
            await gen.run(LoadSpec("work", concurrency=1, duration_s=3.0))
            text = exporters.exposition()
    samples = {s.name: s.value for s in parse_exposition(text, source="exporters").samples}
    # ~12 ms hashing + 20 ms sleep per execution back to back: a busy but not saturated CPU.
    assert samples["container_cpu_usage_seconds_total"] > 0.3
    assert samples["container_cpu_cfs_throttled_periods_total"] > 0
    assert (
        samples["container_cpu_cfs_periods_total"]
        >= samples["container_cpu_cfs_throttled_periods_total"]
    )
    assert samples["container_spec_cpu_quota"] == 5000
    # 20 ms of device time per ~35 ms execution, one client: the device is partly busy.
    assert 15 < samples["DCGM_FI_DEV_GPU_UTIL"] <= 100
    assert samples["kube_pod_info"] == 1
    ledger_busy = sum(float(json.loads(p.read_text())["busy_s"]) for p in ledger.glob("*.json"))
    assert ledger_busy > 1.0


async def test_large_inputs_reach_the_server_under_the_suite_warning_filters(
    tmp_path: Path,
) -> None:
    """A 12 MB input is served under the suite's own warning filters, not failed unsent.

    tritonclient hands aiohttp such a body as raw bytes, and aiohttp warns of that with a
    ResourceWarning, which the suite otherwise turns into an error: memory_copy's client
    then failed every large request before sending it, and the live runs saw no traffic.
    """
    repo = tmp_path / "repo"
    write_model(repo, ModelSpec("big", max_batch_size=1, input_dims=(-1,)))
    async with TritonServer(repo) as server, LoadGenerator(server.http_url) as gen:
        stats = await gen.run(LoadSpec("big", shape=(1, 3_000_000), concurrency=1, duration_s=2.0))
    assert stats.succeeded > 0
    assert stats.attempts == {"200": stats.succeeded}


async def test_enforced_quota_caps_the_server_cpu_and_resumes_it(tmp_path: Path) -> None:
    """An enforced quota holds the server's CPU to it by stopping its tree, and resumes it.

    Two clients back to back on two instances hashing 20 MB an execution want well over
    0.2 of a core; enforced, the tree's use over the run stays near 0.2 (a quarter above it
    at most, for the sampling's lag), the throttled periods include the stops, and every
    process of the tree runs again once the exporters stop.
    """
    repo, ledger = _hashing_model(tmp_path, accel_ms=2, instances=2)
    quota = 0.2
    async with TritonServer(repo) as server:
        pid = server.pid
        assert pid is not None
        exporters = LabExporters(
            pid=lambda: server.pid,
            ledger_dir=ledger,
            cpu_quota_cores=quota,
            enforce_cpu_quota=True,
        )
        async with exporters, LoadGenerator(server.http_url) as gen:
            cpu_before, wall_before = process_tree(pid)[0], time.monotonic()
            await gen.run(LoadSpec("work", concurrency=2, duration_s=4.0))
            cpu_used, wall = process_tree(pid)[0] - cpu_before, time.monotonic() - wall_before
        _, tree = process_tree(pid)
        states = [_state(p) for p in tree]
    assert exporters.stopped_s > 1.0, "the load never went over the quota: the test is vacuous"
    assert cpu_used / wall <= quota * 1.25
    assert exporters.throttled >= round(exporters.stopped_s / CFS_PERIOD_S)
    assert "T" not in states


def _state(pid: int) -> str:
    """One process's state letter from /proc (T: stopped), or "gone" once it has exited."""
    fields = _stat_fields(pid)
    return "gone" if fields is None else fields[0]


def test_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    """A parent killed with SIGKILL (no atexit) still takes its tritonserver down with it."""
    write_model(tmp_path / "repo", ModelSpec("m", behaviour=Behaviour(accel_ms=1)))
    pid_file = tmp_path / "pid"
    code = (
        "import sys, time, pathlib\n"
        "from tritonguard.lab.triton_server import TritonServer\n"
        f"s = TritonServer(pathlib.Path({str(tmp_path / 'repo')!r})).start()\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(s.pid))\n"
        "time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=root)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "server did not start"
            assert parent.poll() is None, "parent exited early"
            time.sleep(0.2)
        server_pid = int(pid_file.read_text())
        assert _group_alive(server_pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while _group_alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(server_pid)
