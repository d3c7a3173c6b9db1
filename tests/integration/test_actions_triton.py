"""Playbook actions against a real tritonserver: reloads, dry-run, rollback, guards, restarts."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.playbook_harness import StaticFeatures, handle, stage
from tritonguard.actions.registry import catalog
from tritonguard.clients.triton_api import TritonClient, TritonError
from tritonguard.core.config_changes import ChangeTimeline, ConfigChange
from tritonguard.core.findings import Fix, IncidentEvent, Subject
from tritonguard.core.guards import GuardSettings
from tritonguard.core.playbook_decisions import successors
from tritonguard.core.playbook_model import Playbook, load_playbooks_text
from tritonguard.lab.repository import Behaviour, DynamicBatching, ModelSpec, write_model
from tritonguard.lab.triton_server import TritonServer
from tritonguard.runtime.audit_store import AuditStore
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_executor import ExecutorEnv
from tritonguard.runtime.playbook_stage import PlaybookStage
from tritonguard.settings import Settings, TargetSettings

pytestmark = pytest.mark.live

TOKEN = "s3cret-token"
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """One real Triton (explicit mode, repository API behind an access token) per module."""
    repo = tmp_path_factory.mktemp("repo")
    for name in ("batchy", "shed", "warm", "guarded", "cold", "reverted"):
        write_model(
            repo, ModelSpec(name=name, dynamic_batching=DynamicBatching(max_queue_delay_us=20000))
        )
    write_model(
        repo,
        ModelSpec(
            name="slowq",
            dynamic_batching=DynamicBatching(max_queue_delay_us=50000),
            behaviour=Behaviour(accel_ms=2.0),
        ),
    )
    with TritonServer(repo, access_token=TOKEN) as srv:
        yield srv


@pytest.fixture
async def triton(server: TritonServer) -> AsyncIterator[TritonClient]:
    """Yield a client that sends the access token."""
    async with TritonClient(server.http_url, access_token=TOKEN) as client:
        yield client


def book(text: str) -> Playbook:
    """Load one playbook from YAML text, validated against the real action catalogue."""
    return load_playbooks_text(text, "test.yaml", catalog())[0]


def event(model: str, at: float = 1000.0) -> IncidentEvent:
    """Return an incident on ``model`` as the engine would emit it."""
    return IncidentEvent(
        event="opened",
        incident_id=f"inc-{model}-{next(_ids)}",
        cause="batching_delay",
        subject=Subject("", model),
        at=at,
        confidence=0.9,
        summary="queue wait dominates",
        evidence={},
        fix=Fix("lower max_queue_delay_microseconds"),
        opened_at=at,
    )


def dispatcher(
    books: list[Playbook],
    triton: TritonClient,
    store: AuditStore,
    *,
    dry_run: bool = False,
    value: float | None = None,
    budget: int = 20,
) -> PlaybookStage:
    """Return the playbook stage wired to the real server; ``value`` is every feature's value."""
    env = ExecutorEnv(
        triton_for=lambda s: triton,
        features=StaticFeatures(value),
        sleep=_no_wait,
        clock=lambda: 1000.0,
    )
    return stage(
        books,
        store,
        settings=GuardSettings(dry_run=dry_run, action_budget_per_hour=budget),
        env=env,
    )


async def _no_wait(seconds: float) -> None:
    return None


LOWER_DELAY = """
name: lower-delay
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 10m}
steps:
  - action: triton.update_config
    params:
      model: "{{ model }}"
      set: {dynamic_batching.max_queue_delay_microseconds: 500}
"""


async def delay(triton: TritonClient, model: str) -> int:
    """Return the live max_queue_delay_microseconds of ``model``."""
    config = await triton.model_config(model)
    return int(config["dynamic_batching"]["max_queue_delay_microseconds"])


async def set_delay(triton: TritonClient, model: str, value: int) -> None:
    """Put the model back to a known delay through the real repository API."""
    config = await triton.model_config(model)
    config["dynamic_batching"]["max_queue_delay_microseconds"] = value
    await triton.load(model, config)


async def test_update_config_lowers_queue_delay_on_live_server(triton: TritonClient) -> None:
    """The playbook reloads the model with the patch and the config read back shows it."""
    await set_delay(triton, "batchy", 20000)
    store = AuditStore()
    records = await handle(dispatcher([book(LOWER_DELAY)], triton, store), event("batchy"))
    assert [r.status for r in records] == ["ran"]
    assert records[0].detail["changes"] == [
        {"path": "dynamic_batching.max_queue_delay_microseconds", "old": 20000, "new": 500}
    ]
    assert await delay(triton, "batchy") == 500
    assert await triton.model_ready("batchy")
    undo = store.pending_undos(store.decisions()[0].incident_id)
    assert [u.action for u in undo] == ["triton.load"]
    assert undo[0].params["config"]["dynamic_batching"]["max_queue_delay_microseconds"] == 20000


async def test_dry_run_changes_nothing_on_the_server(triton: TritonClient) -> None:
    """In dry-run the change is planned from the live config but the config stays identical."""
    await set_delay(triton, "batchy", 20000)
    before = await triton.model_config("batchy")
    store = AuditStore()
    records = await handle(
        dispatcher([book(LOWER_DELAY)], triton, store, dry_run=True), event("batchy")
    )
    assert [r.status for r in records] == ["planned"]
    assert records[0].detail["changes"][0]["new"] == 500
    assert await triton.model_config("batchy") == before
    assert store.decisions()[0].dry_run is True


async def test_unhelpful_fix_is_rolled_back(triton: TritonClient) -> None:
    """A verify that fails puts the previous config back on the server."""
    await set_delay(triton, "batchy", 20000)
    text = (
        LOWER_DELAY
        + """
verify:
  wait: 30s
  checks: [{feature: queue_share, below: 0.3}]
"""
    )
    disp = dispatcher([book(text)], triton, AuditStore(), value=0.8)
    records = await handle(disp, event("batchy"))
    assert [(r.action, r.status) for r in records] == [
        ("triton.update_config", "ran"),
        ("verify", "failed"),
        ("triton.load", "rolled_back"),
    ]
    assert "queue_share=0.8 is not below 0.3" in records[1].reason
    assert await delay(triton, "batchy") == 20000


async def test_helpful_fix_passes_verify_and_stays(triton: TritonClient) -> None:
    """When verify sees the feature within bounds the change is kept."""
    await set_delay(triton, "batchy", 20000)
    text = LOWER_DELAY + "verify: {wait: 1s, checks: [{feature: queue_share, below: 0.3}]}\n"
    disp = dispatcher([book(text)], triton, AuditStore(), value=0.1)
    records = await handle(disp, event("batchy"))
    assert [r.status for r in records] == ["ran", "ran"]
    assert await delay(triton, "batchy") == 500


async def test_bounds_block_the_change_and_leave_the_server_alone(triton: TritonClient) -> None:
    """A value outside guards.bounds is refused before any reload."""
    await set_delay(triton, "batchy", 20000)
    bounds = "bounds: {dynamic_batching.max_queue_delay_microseconds: {max: 50000}}"
    text = LOWER_DELAY.replace("500}", "900000}").replace("10m}", f"10m, {bounds}}}")
    records = await handle(dispatcher([book(text)], triton, AuditStore()), event("batchy"))
    assert [(r.status, r.guard) for r in records] == [("skipped", "bounds")]
    assert "above its bound max=50000" in records[0].reason
    assert await delay(triton, "batchy") == 20000


async def test_shed_load_sets_reject_policy_and_restores_it_on_resolve(
    triton: TritonClient,
) -> None:
    """A REJECT queue policy is loaded, then the previous config comes back on resolve."""
    before = await triton.model_config("shed")
    text = """
name: shed
when: {causes: [batching_delay]}
guards: {dry_run: false}
steps:
  - action: triton.shed_load
    params: {max_queue_size: 4, default_timeout_microseconds: 200000}
"""
    disp = dispatcher([book(text)], triton, AuditStore())
    opened = event("shed")
    assert [r.status for r in await handle(disp, opened)] == ["ran"]
    policy = (await triton.model_config("shed"))["dynamic_batching"]["default_queue_policy"]
    assert policy["timeout_action"] == "REJECT"
    assert int(policy["max_queue_size"]) == 4
    assert int(policy["default_timeout_microseconds"]) == 200000
    records = await handle(disp, _resolved(opened))
    assert [(r.action, r.status, r.phase) for r in records] == [
        ("triton.update_config", "ran", "restore")
    ]
    assert (await triton.model_config("shed"))["dynamic_batching"] == before["dynamic_batching"]


SHED = """
name: shed
when: {causes: [batching_delay]}
guards: {dry_run: false}
steps:
  - action: triton.shed_load
    params: {max_queue_size: 4, default_timeout_microseconds: 200000}
"""


async def test_restore_on_resolve_keeps_changes_made_while_shedding(
    triton: TritonClient,
) -> None:
    """Only the shed's paths are put back: an instance added meanwhile stays on the server."""
    before = await triton.model_config("shed")
    disp = dispatcher([book(SHED)], triton, AuditStore())
    opened = event("shed")
    assert [r.status for r in await handle(disp, opened)] == ["ran"]
    # Meanwhile someone (another playbook, an operator) adds an instance.
    grown = await triton.model_config("shed")
    grown["instance_group"][0]["count"] = int(grown["instance_group"][0]["count"]) + 1
    await triton.load("shed", grown)
    records = await handle(disp, _resolved(opened))
    assert [(r.action, r.status) for r in records] == [("triton.update_config", "ran")]
    after = await triton.model_config("shed")
    assert after["dynamic_batching"] == before["dynamic_batching"]
    assert int(after["instance_group"][0]["count"]) == int(before["instance_group"][0]["count"]) + 1
    await triton.load("shed", before)


async def test_restore_waits_while_the_subject_is_handed_to_another_cause(
    triton: TritonClient,
) -> None:
    """An incident resolving as another opens on the pod keeps its shed until that one resolves."""
    before = await triton.model_config("shed")
    disp = dispatcher([book(SHED)], triton, AuditStore())
    first = event("shed")
    assert [r.status for r in await handle(disp, first)] == ["ran"]
    resolved = _resolved(first)
    successor = IncidentEvent(
        event="opened",
        incident_id=f"inc-shed-{next(_ids)}",
        cause="too_few_instances",
        subject=first.subject,
        at=resolved.at,
        confidence=0.9,
        summary="every instance busy",
        evidence={},
        fix=Fix("add an instance"),
        opened_at=resolved.at,
    )
    assert successors([resolved, successor]) == {first.incident_id: successor}
    handed = (await disp.run_step([resolved, successor], resolved.at))[first.incident_id]
    assert [(r.action, r.status) for r in handed] == [("triton.update_config", "deferred")]
    assert successor.incident_id in handed[0].reason
    policy = (await triton.model_config("shed"))["dynamic_batching"]["default_queue_policy"]
    assert policy["timeout_action"] == "REJECT"  # still shedding: the overload goes on
    records = await handle(disp, _resolved(successor))
    assert [(r.action, r.status) for r in records] == [("triton.update_config", "ran")]
    assert (await triton.model_config("shed"))["dynamic_batching"] == before["dynamic_batching"]


def _resolved(opened: IncidentEvent) -> IncidentEvent:
    return IncidentEvent(
        event="resolved",
        incident_id=opened.incident_id,
        cause=opened.cause,
        subject=opened.subject,
        at=opened.at + 100,
        confidence=opened.confidence,
        summary=opened.summary,
        evidence={},
        fix=opened.fix,
        opened_at=opened.opened_at,
    )


async def test_warmup_sends_real_inference_requests(triton: TritonClient) -> None:
    """Warm-up requests are shaped from metadata and show up in the model's statistics."""

    def count(stats: dict[str, Any]) -> int:
        return int(stats["model_stats"][0]["inference_count"])

    before = count(await triton.model_stats("warm"))
    text = """
name: warm
when: {causes: [batching_delay]}
guards: {dry_run: false}
steps:
  - action: triton.warmup
    params: {requests: 5, batch_size: 2}
"""
    records = await handle(dispatcher([book(text)], triton, AuditStore()), event("warm"))
    assert records[0].status == "ran", records[0].reason
    assert records[0].detail["requests"] == 5
    assert count(await triton.model_stats("warm")) - before == 10


async def test_repository_api_needs_the_access_token(server: TritonServer) -> None:
    """Without the token the restricted repository API refuses, with a one-line reason."""
    async with TritonClient(server.http_url) as anonymous:
        with pytest.raises(TritonError) as err:
            await anonymous.load("batchy")
    assert "\n" not in str(err.value)
    assert err.value.status is not None and err.value.status >= 400


async def test_cooldown_and_budget_hold_across_a_restart(
    triton: TritonClient, tmp_path: Path
) -> None:
    """A new dispatcher on the same SQLite file still honours cooldown and the hourly budget."""
    db = tmp_path / "audit.sqlite3"
    text = LOWER_DELAY.replace("lower-delay", "guarded")
    await set_delay(triton, "guarded", 20000)
    first = dispatcher([book(text)], triton, AuditStore(db), budget=2)
    assert [r.status for r in await handle(first, event("guarded"))] == ["ran"]
    first.store.close()
    await set_delay(triton, "guarded", 20000)

    restarted = dispatcher([book(text)], triton, AuditStore(db), budget=2)
    again = await handle(restarted, event("guarded"))
    assert [(r.status, r.guard) for r in again] == [("skipped", "cooldown")]
    assert await delay(triton, "guarded") == 20000
    # A second model spends the last unit of budget; a third is refused by the budget.
    other = text.replace("cooldown: 10m", "cooldown: 1s")
    second = dispatcher([book(other)], triton, restarted.store, budget=2)
    assert [r.status for r in await handle(second, event("batchy"))] == ["ran"]
    third = await handle(second, event("shed"))
    assert [(r.status, r.guard) for r in third] == [("skipped", "budget")]


async def mean_queue_us(triton: TritonClient, model: str, requests: int) -> float:
    """Send requests one at a time (batches never fill) and return Triton's mean queue time."""

    def queue(stats: dict[str, Any]) -> tuple[int, int]:
        q = stats["model_stats"][0]["inference_stats"]["queue"]
        return int(q["count"]), int(q["ns"])

    inputs = [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]
    before = queue(await triton.model_stats(model))
    for _ in range(requests):
        await triton.infer(model, inputs, binary_outputs=["OUTPUT0"])
    after = queue(await triton.model_stats(model))
    return (after[1] - before[1]) / 1000 / max(1, after[0] - before[0])


async def test_lowering_the_batch_delay_cuts_real_queue_time_and_verify_passes(
    triton: TritonClient,
) -> None:
    """On a real server at low traffic, queue time falls from ≈ the delay to ≈ 0 after the fix.

    The verify step's wait is when traffic flows: it sends requests and measures Triton's own
    queue statistics, which stand in for the engine's feature of the same name.
    """
    before_us = await mean_queue_us(triton, "slowq", 10)
    assert before_us > 40_000  # every request waits out max_queue_delay (50 ms)
    measured: dict[str, float] = {}

    async def traffic_during_wait(seconds: float) -> None:
        measured["mean_queue_us"] = await mean_queue_us(triton, "slowq", 10)

    text = LOWER_DELAY.replace("lower-delay", "slowq") + (
        "verify: {wait: 5s, checks: [{feature: mean_queue_us, below: 5000}]}\n"
    )

    class Measured(StaticFeatures):
        def feature_value(self, subject: Subject, name: str, now: float) -> float | None:
            return measured.get(name)

    disp = stage(
        [book(text)],
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=ExecutorEnv(
            triton_for=lambda s: triton,
            features=Measured(),
            sleep=traffic_during_wait,
            clock=lambda: 1000.0,
        ),
    )
    records = await handle(disp, event("slowq"))
    assert [(r.action, r.status) for r in records] == [
        ("triton.update_config", "ran"),
        ("verify", "ran"),
    ]
    assert measured["mean_queue_us"] < before_us / 10
    print(f"mean queue time: {before_us:.0f} us before, {measured['mean_queue_us']:.0f} us after")


ADD_WARMUP = """
name: add-warmup
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 0s}
steps:
  - action: triton.add_warmup
    params: {count: 4, batch_size: 64}
"""


async def test_add_warmup_writes_model_warmup_from_the_inputs_and_reloads(
    triton: TritonClient,
) -> None:
    """model_warmup is built from the live inputs, loaded, read back; a second run is a no-op."""
    before = await triton.model_config("cold")
    assert not before.get("model_warmup")
    store = AuditStore()
    records = await handle(dispatcher([book(ADD_WARMUP)], triton, store), event("cold"))
    assert [r.status for r in records] == ["ran"], records
    after = await triton.model_config("cold")
    [sample] = after["model_warmup"]
    inputs = {i["name"]: i for i in before["input"]}
    assert set(sample["inputs"]) == set(inputs)
    for name, spec in sample["inputs"].items():
        assert spec["data_type"] == inputs[name]["data_type"]
        assert [int(d) for d in spec["dims"]] == [int(d) for d in inputs[name]["dims"]]
    # batch_size 64 is capped at the model's max_batch_size so Triton accepts the sample.
    assert int(sample["batch_size"]) == int(before["max_batch_size"])
    assert int(sample["count"]) == 4
    assert await triton.model_ready("cold")
    again = await handle(dispatcher([book(ADD_WARMUP)], triton, AuditStore()), event("cold"))
    assert again[0].detail["note"] == "model_warmup already configured"


async def test_a_shed_stays_when_its_subject_stops_reporting_until_fresh_data_shows_recovery(
    triton: TritonClient,
) -> None:
    """Closing an incident because its target went silent lifts nothing on the real server.

    The engine closes an incident whose subject stopped reporting for the retention, without
    recovery evidence. The REJECT policy stays, the restore is recorded as deferred; only when
    fresh data shows the subject back and healthy does the previous config come back.
    """
    before = await triton.model_config("shed")
    features = StaticFeatures()
    on = stage(
        [book(SHED)],
        AuditStore(),
        settings=GuardSettings(dry_run=False),
        env=ExecutorEnv(triton_for=lambda s: triton, features=features, clock=lambda: 1000.0),
    )
    opened = event("shed")
    assert [r.status for r in await handle(on, opened)] == ["ran"]
    silent = _resolved(opened)
    silent.recovered = False
    deferred = await handle(on, silent)
    assert [(r.action, r.status, r.phase) for r in deferred] == [
        ("triton.update_config", "deferred", "restore")
    ]
    assert "without recovery evidence" in deferred[0].reason
    policy = (await triton.model_config("shed"))["dynamic_batching"]["default_queue_policy"]
    assert policy["timeout_action"] == "REJECT"
    assert await on.run_step([], 1200.0) == {}  # still silent: nothing is restored
    features.back = True
    restored = (await on.run_step([], 1300.0))[opened.incident_id]
    assert [(r.action, r.status, r.phase) for r in restored] == [
        ("triton.update_config", "ran", "restore")
    ]
    assert (await triton.model_config("shed"))["dynamic_batching"] == before["dynamic_batching"]
    assert await on.run_step([], 1400.0) == {}  # restored once


async def test_a_playbook_removed_while_its_shed_is_on_still_gets_the_shed_lifted(
    triton: TritonClient,
) -> None:
    """Reloading playbooks without the one that shed does not strand its restore on the server."""
    before = await triton.model_config("shed")
    disp = dispatcher([book(SHED)], triton, AuditStore())
    opened = event("shed")
    assert [r.status for r in await handle(disp, opened)] == ["ran"]
    disp.playbooks = []  # a reload dropped the playbook
    records = await handle(disp, _resolved(opened))
    assert [(r.playbook, r.action, r.status) for r in records] == [
        ("shed", "triton.update_config", "ran")
    ]
    assert (await triton.model_config("shed"))["dynamic_batching"] == before["dynamic_batching"]


REVERT = """
name: revert-the-deploy
when: {causes: [batching_delay]}
guards: {dry_run: false, cooldown: 10m}
steps:
  - action: triton.revert_config
verify: {wait: 1s, checks: [{feature: queue_share, below: 0.3}]}
"""


async def deployed(triton: TritonClient, model: str, delay_us: int) -> ConfigChange:
    """Deploy a new max_queue_delay through the real API; return the change two reads show."""
    await set_delay(triton, model, 20000)
    timeline = ChangeTimeline()
    key = ("", "", model)
    timeline.read(key, await triton.model_config(model), 900.0)
    await set_delay(triton, model, delay_us)
    change = timeline.read(key, await triton.model_config(model), 990.0)
    assert change is not None
    return change


async def test_revert_config_puts_back_what_the_deploy_changed(triton: TritonClient) -> None:
    """The incident names the deploy's change; revert_config reloads the config from before it.

    Only the sections the change touched are loaded back; the verification passes and the
    undo (should it fail) is the config the revert replaced.
    """
    change = await deployed(triton, "reverted", 150000)
    assert change.summary() == "dynamic_batching.max_queue_delay_microseconds: 20000 → 150000"
    incident = event("reverted")
    incident.change = change
    store = AuditStore()
    records = await handle(dispatcher([book(REVERT)], triton, store, value=0.1), incident)
    assert [(r.action, r.status) for r in records] == [
        ("triton.revert_config", "ran"),
        ("verify", "ran"),
    ]
    assert records[0].detail["reverts"] == change.summary()
    assert await delay(triton, "reverted") == 20000
    undo = store.pending_undos(incident.incident_id)
    assert [u.action for u in undo] == ["triton.load"]
    assert undo[0].params["config"]["dynamic_batching"]["max_queue_delay_microseconds"] == 150000


async def test_revert_config_refuses_when_the_config_moved_on_since(triton: TritonClient) -> None:
    """Someone changed the same leaves again since the deploy: nothing is reloaded."""
    change = await deployed(triton, "reverted", 150000)
    await set_delay(triton, "reverted", 70000)
    before = await triton.model_config("reverted")
    incident = event("reverted")
    incident.change = change
    records = await handle(dispatcher([book(REVERT)], triton, AuditStore()), incident)
    assert [(r.action, r.status) for r in records] == [("triton.revert_config", "failed")]
    assert "changed again since" in records[0].reason
    assert await triton.model_config("reverted") == before


async def test_revert_config_without_a_known_change_changes_nothing(triton: TritonClient) -> None:
    """An incident that followed no config change has nothing to revert: the step fails, said why."""
    await set_delay(triton, "reverted", 20000)
    before = await triton.model_config("reverted")
    records = await handle(dispatcher([book(REVERT)], triton, AuditStore()), event("reverted"))
    assert [r.status for r in records] == ["failed"]
    assert "no model-config change is known" in records[0].reason
    assert await triton.model_config("reverted") == before


async def test_an_incident_opening_rereads_the_config_and_names_the_deploy(
    server: TritonServer, triton: TritonClient
) -> None:
    """The daemon reads configs again as an incident opens, before its playbooks run.

    The periodic read saw the old config; a deploy then raised the delay on the real server.
    Dispatching the opening makes the daemon read the config again, so the incident its
    playbooks and Slack receive already names the change.
    """
    await set_delay(triton, "reverted", 20000)
    target = TargetSettings(
        name="t0",
        metrics_url=server.metrics_url,
        triton_url=server.http_url,
        namespace="prod",
        pod="triton-0",
        access_token=TOKEN,
    )
    app = DaemonApp(Settings(targets=[target], listen="127.0.0.1:0"))
    app._models = {"t0": {"reverted"}}  # as the first scrape makes it
    await app._refresh_configs()  # the periodic read, once
    await set_delay(triton, "reverted", 150000)
    incident = event("reverted", at=app.clock())
    incident.subject = Subject("prod", "reverted", "triton-0")
    await app.dispatch([incident], app.clock())
    await app._close_clients()
    assert incident.change is not None
    assert incident.change.summary() == (
        "dynamic_batching.max_queue_delay_microseconds: 20000 → 150000"
    )
