"""Each change action puts its way back on file right before the call that changes the server.

A recording stand-in for Triton and Kubernetes logs every call in order, and the context's
``intend`` hook logs into the same list: the undo must come before the change, name the
state read just before it, and be absent where nothing changes (already in place, restores).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from tests.playbook_harness import incident
from tritonguard.actions.registry import ActionContext, ActionFailed, UndoStep, get
from tritonguard.clients.ports import Hpa, ScaledObject, Workload, WorkloadKind
from tritonguard.core.guards import merge_bounds

CONFIG: dict[str, Any] = {
    "name": "resnet",
    "max_batch_size": 8,
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["4"]}],
    "dynamic_batching": {"max_queue_delay_microseconds": "20000"},
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
}


class Recording:
    """The one log both the stand-ins and the ``intend`` hook write to."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def intend(self, undo: UndoStep) -> None:
        """Log the undo, as the executor would write it (its hook)."""
        self.calls.append(("intend", undo))

    def names(self) -> list[str]:
        """Return the names of the calls, in order."""
        return [name for name, _ in self.calls]


class FakeTriton:
    """Serves one model's config; a load replaces it; every call is logged."""

    def __init__(self, log: Recording, *, loaded: bool = True) -> None:
        self.log = log
        self.config: dict[str, Any] | None = copy.deepcopy(CONFIG) if loaded else None

    async def model_config(self, model: str) -> dict[str, Any]:
        """Return the live config, or fail like Triton for a model that is not loaded."""
        self.log.calls.append(("model_config", model))
        if self.config is None:
            raise RuntimeError(f"HTTP 400: Request for unknown model: '{model}' is not found")
        return copy.deepcopy(self.config)

    async def model_metadata(self, model: str) -> dict[str, Any]:
        """Unused by the change actions."""
        raise AssertionError("not a change call")

    async def load(
        self, model: str, config: dict[str, Any] | None = None, *, timeout_s: float = 120.0
    ) -> None:
        """Load: the config given, else the one served (as from the repository)."""
        self.log.calls.append(("load", config))
        self.config = copy.deepcopy(config) if config is not None else copy.deepcopy(CONFIG)

    async def unload(self, model: str, *, timeout_s: float = 60.0) -> None:
        """Unload the model."""
        self.log.calls.append(("unload", model))
        self.config = None

    async def wait_model_ready(self, model: str, timeout_s: float = 60.0) -> None:
        """Ready at once."""

    async def infer(
        self,
        model: str,
        inputs: list[dict[str, Any]],
        *,
        binary_outputs: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Unused by the change actions."""
        raise AssertionError("not a change call")


class FakeKube:
    """A Deployment with a replica count and, optionally, an HPA over it."""

    def __init__(self, log: Recording, *, replicas: int = 2, hpa_min: int | None = None) -> None:
        self.log = log
        self.replicas = replicas
        self.hpa_min = hpa_min

    async def get_scale(self, kind: WorkloadKind, namespace: str, name: str) -> int:
        """Return the count."""
        return self.replicas

    async def set_scale(self, kind: WorkloadKind, namespace: str, name: str, replicas: int) -> int:
        """Set the count."""
        self.log.calls.append(("set_scale", replicas))
        self.replicas = replicas
        return replicas

    async def find_hpa_for(self, kind: WorkloadKind, namespace: str, name: str) -> Hpa | None:
        """Return the HPA, if there is one."""
        if self.hpa_min is None:
            return None
        return Hpa(namespace, "triton-hpa", kind, name, self.hpa_min, 10, self.replicas, None)

    async def set_hpa_min_replicas(self, namespace: str, name: str, n: int) -> Hpa:
        """Set minReplicas."""
        self.log.calls.append(("set_hpa_min_replicas", n))
        self.hpa_min = n
        hpa = await self.find_hpa_for("Deployment", namespace, "triton")
        assert hpa is not None
        return hpa

    async def read_hpa(self, namespace: str, name: str) -> Hpa:
        """Return the HPA (there must be one)."""
        hpa = await self.find_hpa_for("Deployment", namespace, "triton")
        assert hpa is not None
        return hpa

    async def workload_of_pod(self, namespace: str, pod: str) -> Workload | None:
        """Every pod here belongs to the Deployment ``triton``."""
        return Workload("Deployment", "triton")

    async def read_scaled_object(self, namespace: str, name: str) -> ScaledObject:
        """No KEDA here."""
        raise AssertionError("no ScaledObject here")

    async def set_scaled_object_min(self, namespace: str, name: str, n: int | None) -> ScaledObject:
        """No KEDA here."""
        raise AssertionError("no ScaledObject here")

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """No leases here."""
        return None

    async def try_acquire_lease(self, *args: Any, **kwargs: Any) -> bool:
        """No leases here."""
        return False

    async def renew_lease(self, *args: Any, **kwargs: Any) -> bool:
        """No leases here."""
        return False

    async def release_lease(self, namespace: str, name: str, holder: str) -> bool:
        """No leases here."""
        return False


def context(
    log: Recording,
    *,
    triton: FakeTriton | None = None,
    kube: FakeKube | None = None,
    restoring: bool = False,
) -> ActionContext:
    """Return a live context whose ``intend`` logs into ``log``."""
    return ActionContext(
        subject=incident(model="resnet").subject,
        event=incident(model="resnet"),
        playbook="p",
        bounds=merge_bounds({}),
        dry_run=False,
        triton=triton,
        kube=kube,
        restoring=restoring,
        intend=log.intend,
    )


async def run(name: str, ctx: ActionContext, params: dict[str, Any]) -> Any:
    """Validate ``params`` and run the action."""
    action = get(name)
    return await action.run(ctx, action.params.model_validate(params))


def undo_before(log: Recording, change: str) -> UndoStep:
    """Return the undo intended, asserting it came right before the first ``change`` call."""
    names = log.names()
    assert "intend" in names and change in names, names
    assert names.index("intend") == names.index(change) - 1, names
    undo = log.calls[names.index("intend")][1]
    assert isinstance(undo, UndoStep)
    return undo


@pytest.mark.parametrize(
    ("name", "params"),
    [
        (
            "triton.update_config",
            {"set": {"dynamic_batching.max_queue_delay_microseconds": 500}},
        ),
        (
            "triton.update_config",
            {
                "set": {"dynamic_batching.max_queue_delay_microseconds": 500},
                "restore_on_resolve": True,
            },
        ),
        ("triton.shed_load", {"max_queue_size": 16, "default_timeout_microseconds": 100_000}),
        ("triton.add_warmup", {}),
    ],
    ids=["update_config", "update_config-restore-on-resolve", "shed_load", "add_warmup"],
)
async def test_a_reload_intends_the_whole_previous_config_before_the_load(
    name: str, params: dict[str, Any]
) -> None:
    """The undo on file is the config read just before the load, loaded again in full.

    Even where the step's own undo is a reverse patch (restored on resolve): a load still
    running reads back as the old values, so only the whole config replaces it for sure.
    """
    log = Recording()
    triton = FakeTriton(log)
    await run(name, context(log, triton=triton), {"model": "resnet", **params})
    undo = undo_before(log, "load")
    assert undo.action == "triton.load"
    assert undo.params["config"] == CONFIG and undo.params["model"] == "resnet"
    assert undo.on_resolve is False


async def test_a_reload_with_nothing_to_change_intends_nothing() -> None:
    """Already in place: no load, so no intent (a restart has nothing to put back)."""
    log = Recording()
    patch = {"set": {"dynamic_batching.max_queue_delay_microseconds": 20000}}
    await run("triton.update_config", context(log, triton=FakeTriton(log)), patch)
    assert "load" not in log.names() and "intend" not in log.names()


async def test_a_change_refused_by_its_bounds_intends_nothing() -> None:
    """A bound refuses the value before anything is written: neither intent nor load."""
    log = Recording()
    patch = {"set": {"dynamic_batching.max_queue_delay_microseconds": 10_000_000}}
    with pytest.raises(ActionFailed):
        await run("triton.update_config", context(log, triton=FakeTriton(log)), patch)
    assert "intend" not in log.names() and "load" not in log.names()


@pytest.mark.parametrize("hpa", [None, 2], ids=["workload", "hpa"])
async def test_a_scale_intends_the_count_read_before_the_write(hpa: int | None) -> None:
    """Scaling 2 to 3 (or the HPA's minReplicas 2 to 3): the undo puts back 2, written first."""
    log = Recording()
    kube = FakeKube(log, replicas=2, hpa_min=hpa)
    await run("kubernetes.scale", context(log, kube=kube), {"name": "triton", "add": 1})
    if hpa is None:
        undo = undo_before(log, "set_scale")
        assert (undo.action, undo.params["replicas"]) == ("kubernetes.scale", 2)
    else:
        undo = undo_before(log, "set_hpa_min_replicas")
        assert (undo.action, undo.params["min_replicas"]) == ("kubernetes.hpa_min", 2)


async def test_an_unload_intends_loading_the_config_it_served() -> None:
    """Undone by loading the live config again, not the repository's files."""
    log = Recording()
    result = await run("triton.unload", context(log, triton=FakeTriton(log)), {"model": "resnet"})
    undo = undo_before(log, "unload")
    assert undo == result.undo
    assert undo.action == "triton.load" and undo.params["config"] == CONFIG


async def test_a_load_with_a_replacement_config_intends_the_config_it_replaces() -> None:
    """A config override is a change like any reload: the previous config is the way back."""
    log = Recording()
    new = {**CONFIG, "max_batch_size": 4}
    result = await run(
        "triton.load", context(log, triton=FakeTriton(log)), {"model": "resnet", "config": new}
    )
    undo = undo_before(log, "load")
    assert undo == result.undo and undo.params["config"] == CONFIG


@pytest.mark.parametrize(
    ("loaded", "restoring", "config"),
    [(True, False, None), (False, False, CONFIG), (True, True, CONFIG)],
    ids=["no-override", "not-loaded", "restoring"],
)
async def test_a_load_with_nothing_to_put_back_intends_nothing(
    loaded: bool, restoring: bool, config: dict[str, Any] | None
) -> None:
    """A reload from the files, a model not served before, or a load that is itself an undo."""
    log = Recording()
    ctx = context(log, triton=FakeTriton(log, loaded=loaded), restoring=restoring)
    result = await run("triton.load", ctx, {"model": "resnet", "config": config})
    assert "intend" not in log.names() and result.undo is None
    calls: Sequence[str] = log.names()
    assert "load" in calls
