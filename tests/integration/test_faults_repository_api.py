"""Triton's repository API failing during a reload: the previous config stays or comes back.

A real tritonserver serves every model; a transparent fault proxy sits in front of it and
counts the load requests, answering some itself (a 500 the server never saw) or holding
Triton's answer past the client's timeout (Triton reloaded, the daemon never heard). Triton
itself refuses a config it cannot load (400) or validate (500), and a model whose initialize()
blocks stays LOADING. Each time the real server ends with the previous config, the audit trail
says so in one line, and a new incident inside the cooldown does not reload again.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import waiting
from tests.fault_servers import Answer, Fault, FaultProxy, HoldAnswer
from tests.playbook_harness import StaticFeatures, handle, stage
from tests.stalling_repo import install, load_started
from tritonguard.actions.registry import catalog
from tritonguard.clients.triton_api import TritonClient
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.lab.repository import DynamicBatching, ModelSpec
from tritonguard.lab.triton_server import TritonServer
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage

pytestmark = pytest.mark.live

DELAY_US = 20_000
# Long enough for a real Python-backend reload (about 2 s here) on a busy machine.
READY_TIMEOUT_S = 8.0
MODELS = ("gpu_kind", "batch_too_big", "proxy_500", "answer_lost", "stuck", "held", "neighbour")
LOAD_PATH = r"/v2/repository/models/[^/]+/load"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Server:
    """The real Triton and where each model's stall file would go."""

    triton: TritonServer
    stall_dir: Path

    def stall_file(self, model: str) -> Path:
        """Return the file whose existence makes the model's loads hang."""
        return self.stall_dir / f"stall-{model}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real Triton in explicit mode serving every model of this module (max batch 8)."""
    repo = tmp_path_factory.mktemp("repo")
    stall_dir = tmp_path_factory.mktemp("stall")
    for name in MODELS:
        spec = ModelSpec(name=name, dynamic_batching=DynamicBatching(max_queue_delay_us=DELAY_US))
        install(repo, spec, stall_dir / f"stall-{name}")
    with TritonServer(repo) as triton:
        yield Server(triton, stall_dir)


@pytest.fixture
async def proxy(server: Server) -> AsyncIterator[FaultProxy]:
    """Yield a fault proxy in front of the real server (transparent until a rule is armed)."""
    async with FaultProxy(server.triton.http_url) as p:
        yield p


@pytest.fixture
async def direct(server: Server) -> AsyncIterator[TritonClient]:
    """Yield a client straight to the server: the test's own view of the truth."""
    async with TritonClient(server.triton.http_url) as client:
        yield client


def playbook(model: str, change: str) -> str:
    """Return a playbook that reloads ``model`` with ``change`` (YAML flow mapping)."""
    return f"""
name: reload
when: {{causes: [batching_delay]}}
guards: {{dry_run: false, cooldown: 10m}}
steps:
  - action: triton.update_config
    params:
      model: {model}
      set: {change}
      ready_timeout: {READY_TIMEOUT_S}s
"""


def incident(model: str, at: float) -> IncidentEvent:
    """Return an incident opening on ``model`` at ``at``."""
    return IncidentEvent(
        event="opened",
        incident_id=f"inc-{model}-{next(_ids)}",
        cause="batching_delay",
        subject=Subject("", model),
        at=at,
        confidence=0.9,
        summary="requests wait in the batcher",
        evidence={},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=at,
    )


def reloader(model: str, change: str, triton: TritonClient, clock: list[float]) -> PlaybookStage:
    """Return the playbook stage acting on the server through ``triton``.

    ``model`` may be a template: ``"{{ model }}"`` reloads the incident's model.
    """
    books = load_playbooks_text(playbook(model, change), "reload.yaml", catalog())
    env = ExecutorEnv(
        triton_for=lambda s: triton, features=StaticFeatures(), clock=lambda: clock[0]
    )
    return stage(books, AuditStore(), settings=GuardSettings(dry_run=False), env=env)


def essentials(config: dict[str, Any]) -> tuple[int, str, list[Any]]:
    """Return what the playbooks here change: the delay, the instance kind, preferred sizes."""
    batching = config["dynamic_batching"]
    return (
        int(batching["max_queue_delay_microseconds"]),
        str(config["instance_group"][0]["kind"]),
        [int(x) for x in batching.get("preferred_batch_size", [])],
    )


def loads(proxy: FaultProxy) -> int:
    """Return how many load requests reached the proxy."""
    return sum(1 for s in proxy.seen if s.method == "POST" and s.path.endswith("/load"))


@pytest.mark.parametrize(
    ("model", "change", "fault", "why", "said", "load_requests"),
    [
        pytest.param(
            "gpu_kind",
            '{"instance_group[0].kind": KIND_GPU}',
            None,
            "HTTP 400: load failed for model 'gpu_kind'",
            "the server kept its previous config",
            1,
            id="400-from-triton",
        ),
        pytest.param(
            "batch_too_big",
            "{dynamic_batching.preferred_batch_size: [16]}",
            None,
            "HTTP 500: failed to load 'batch_too_big'",
            "the server kept its previous config",
            1,
            id="500-from-triton",
        ),
        pytest.param(
            "proxy_500",
            "{dynamic_batching.max_queue_delay_microseconds: 500}",
            Answer(500, {"error": "upstream connect error or disconnect/reset before headers"}),
            "HTTP 500: upstream connect error",
            "the server kept its previous config",
            1,
            id="500-before-triton",
        ),
        pytest.param(
            "answer_lost",
            "{dynamic_batching.max_queue_delay_microseconds: 500}",
            HoldAnswer(READY_TIMEOUT_S + 5.0),
            "timed out",
            "the previous config was loaded again",
            2,
            id="timeout-after-triton-reloaded",
        ),
    ],
)
async def test_a_failed_reload_leaves_the_previous_config_and_says_so(  # noqa: PLR0917 - one case's columns
    server: Server,
    proxy: FaultProxy,
    direct: TritonClient,
    model: str,
    change: str,
    fault: Fault | None,
    why: str,
    said: str,
    load_requests: int,
) -> None:
    """The reload fails; the server ends with its previous config; one audited line says so.

    A refusal the server answered is checked by reading the config back; a load whose answer
    never came may have happened (here Triton did reload), so the previous config is loaded
    again. A second incident on the model inside the cooldown does not reload it.
    """
    before = essentials(await direct.model_config(model))
    if fault is not None:
        proxy.add("POST", LOAD_PATH, fault)
    clock = [1000.0]
    async with TritonClient(proxy.url) as via_proxy:
        on = reloader(model, change, via_proxy, clock)
        records = await handle(on, incident(model, clock[0]))
        clock[0] += 60.0
        again = await handle(on, incident(model, clock[0]))
    assert essentials(await direct.model_config(model)) == before
    assert await direct.model_ready(model)
    assert [(r.action, r.status) for r in records] == [("triton.update_config", "failed")]
    reason = records[0].reason
    assert why in reason and said in reason, reason
    assert "\n" not in reason
    assert [(r.status, r.guard) for r in again] == [("skipped", "cooldown")]
    assert loads(proxy) == load_requests  # the change once, and the restore when needed


async def test_a_load_stuck_in_initialize_is_replaced_by_the_previous_config(
    server: Server, proxy: FaultProxy, direct: TritonClient
) -> None:
    """A new config whose model hangs in initialize(): the old model serves, and stays.

    The load hangs past ``ready_timeout``; the old model stays ready meanwhile.
    The daemon sends the previous config after it and records why in one line. When the
    stuck initialize() finally returns, Triton runs the two loads in turn: the server ends
    with the previous config, not the change the audit trail calls failed.
    """
    model = "stuck"
    stall = server.stall_file(model)
    before = essentials(await direct.model_config(model))
    clock = [1000.0]
    stall.touch()
    try:
        async with TritonClient(proxy.url) as via_proxy:
            change = "{dynamic_batching.max_queue_delay_microseconds: 500}"
            on = reloader(model, change, via_proxy, clock)
            work = asyncio.ensure_future(handle(on, incident(model, clock[0])))
            await waiting.wait_for(lambda: load_started(stall), 30.0, poll_s=0.05)
            # Stuck: the old model is still the one ready, with the old config.
            assert await direct.model_ready(model)
            assert essentials(await direct.model_config(model)) == before
            records = await asyncio.wait_for(work, 4 * READY_TIMEOUT_S + 30)
            clock[0] += 60.0
            again = await handle(on, incident(model, clock[0]))
    finally:
        stall.unlink(missing_ok=True)
    # Once initialize() returns, Triton finishes the stuck load, then the queued restore.
    await waiting.wait_for(lambda: _settled_on(direct, model, before), 60.0, poll_s=0.2)
    assert await direct.model_ready(model)
    assert [(r.action, r.status) for r in records] == [("triton.update_config", "failed")]
    reason = records[0].reason
    assert "timed out" in reason and "the previous config was sent again" in reason, reason
    assert "\n" not in reason
    assert [(r.status, r.guard) for r in again] == [("skipped", "cooldown")]
    assert loads(proxy) == 2


async def _settled_on(
    client: TritonClient, model: str, expected: tuple[int, str, list[Any]]
) -> bool:
    """Whether the model is ready with ``expected`` and stays so for two seconds."""
    for _ in range(4):
        if essentials(await client.model_config(model)) != expected:
            return False
        await asyncio.sleep(0.5)
    return True


async def test_a_stuck_reload_does_not_hold_up_other_calls_to_the_same_server(
    server: Server,
) -> None:
    """While one model's load hangs, the daemon's clients still read and reload the others.

    Triton serves each connection on one worker thread and a load holds its thread until
    the model is loaded; a call on a kept-alive connection of that thread waits behind it.
    The daemon reads model configs with one client and acts with another, as it does per
    target: the reader's config read and the neighbour's reload both finish while the first
    load is stuck, because every call goes on a connection of its own.
    """
    url = server.triton.http_url
    stall = server.stall_file("held")
    clock = [1000.0]
    change = "{dynamic_batching.max_queue_delay_microseconds: 500}"
    async with (
        TritonClient(url, timeout_s=READY_TIMEOUT_S) as reader,
        TritonClient(url, timeout_s=READY_TIMEOUT_S) as acting,
    ):
        before = essentials(await reader.model_config("neighbour"))
        held_before = essentials(await reader.model_config("held"))
        on = reloader('"{{ model }}"', change, acting, clock)
        stall.touch()
        try:
            stuck = on.step([incident("held", clock[0])], clock[0])
            await waiting.wait_for(lambda: load_started(stall), 30.0, poll_s=0.05)
            read_started = time.monotonic()
            read = essentials(await reader.model_config("neighbour"))
            read_s = time.monotonic() - read_started
            records = await handle(on, incident("neighbour", clock[0]))
            still_stuck = not any(w.task.done() for w in stuck.started)
            held = await asyncio.wait_for(stuck.records(), 4 * READY_TIMEOUT_S + 30)
        finally:
            stall.unlink(missing_ok=True)
        after = essentials(await reader.model_config("neighbour"))
        await waiting.wait_for(lambda: _settled_on(reader, "held", held_before), 60.0, poll_s=0.2)
    assert read == before and read_s < 2.0, read_s
    assert [(r.action, r.status) for r in records] == [("triton.update_config", "ran")], records
    assert still_stuck, "the neighbour's reload must finish while the other load hangs"
    assert after[0] == 500 != before[0]
    assert [(r.action, r.status) for rs in held.values() for r in rs] == [
        ("triton.update_config", "failed")
    ]
