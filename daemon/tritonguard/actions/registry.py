"""Action registry: actions register by decorator with a pydantic model of their parameters."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from tritonguard.clients.ports import KubeApi, SlackApi, TritonApi
from tritonguard.core.config_patch import Bound
from tritonguard.core.findings import IncidentEvent, Subject


class ActionFailed(RuntimeError):
    """An action could not do its job; the message is one line saying why."""


class ActionParams(BaseModel):
    """Base of every action's parameter model: unknown parameters are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class UndoStep:
    """How to undo an action: another action with parameters (JSON-serialisable, so it persists)."""

    action: str
    params: dict[str, Any]
    on_resolve: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form stored in the audit trail."""
        return {"action": self.action, "params": self.params, "on_resolve": self.on_resolve}


@dataclass(slots=True)
class ActionResult:
    """What an action did: a human-readable detail, and how to undo it."""

    detail: dict[str, Any] = field(default_factory=dict)
    undo: UndoStep | None = None


async def _no_sleep(seconds: float) -> None:
    return None


def _no_intent(undo: UndoStep) -> None:
    return None


@dataclass(slots=True)
class ActionContext:
    """Everything an action may use; the dispatcher builds one per step.

    Clients are optional so that a dry-run (``tritonguard test``, replay) needs none of them;
    ``static_configs`` stands in for ``GET .../config`` when planning without a server.
    """

    subject: Subject
    event: IncidentEvent
    playbook: str
    bounds: Mapping[str, Bound]
    dry_run: bool = True
    triton: TritonApi | None = None
    kube: KubeApi | None = None
    slack: SlackApi | None = None
    slack_channel: str = "#tritonguard"
    feature_value: Callable[[Subject, str], float | None] = lambda s, n: None
    sleep: Callable[[float], Awaitable[None]] = _no_sleep
    static_configs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Set while undoing: values the server had before are put back without bound checks.
    restoring: bool = False
    # A change action calls this with its undo right before the call that changes the server.
    # The executor writes it to disk first, so a daemon that dies before the call returns
    # leaves the way back on file for the next start (docs/reliability.md, "A change in
    # flight across restarts"). Planning, rollbacks and restores get the no-op.
    intend: Callable[[UndoStep], None] = _no_intent
    # Why ``triton`` is None when the daemon knows (discovery withholds a stale namespace's
    # endpoints), so the step's failure says what to check rather than only that none is known.
    triton_withheld: str | None = None

    def need_triton(self) -> TritonApi:
        """Return the Triton client or fail with a reason the audit trail can show."""
        if self.triton is None:
            where = self.subject.key()
            if self.triton_withheld is not None:
                raise ActionFailed(
                    f"no Triton endpoint for {where}: {self.triton_withheld}, so its endpoints "
                    "are withheld from actions until the watch is current again; nothing was "
                    f"changed. Check that the daemon can reach the Kubernetes API and may "
                    f"list and watch pods in {self.subject.namespace} (its log, /readyz)"
                )
            raise ActionFailed(f"no Triton endpoint known for {where}")
        return self.triton

    async def read_config(self, model: str) -> dict[str, Any] | None:
        """Return the model's config from the server or the static fixtures; None if unknown."""
        if self.triton is not None:
            return await self.triton.model_config(model)
        return self.static_configs.get(model)


P = TypeVar("P", bound=ActionParams)
RunFn = Callable[[ActionContext, Any], Awaitable[ActionResult]]
PlanFn = Callable[[ActionContext, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class RegisteredAction:
    """One action: its name, parameter model, how to run it and how to plan it in dry-run."""

    name: str
    params: type[ActionParams]
    run: RunFn
    plan: PlanFn | None
    reloads_model: bool
    kind: Literal["change", "check", "notify"]
    doc: str


_REGISTRY: dict[str, RegisteredAction] = {}


def action(
    name: str,
    params: type[P],
    *,
    reloads_model: bool = False,
    kind: Literal["change", "check", "notify"] = "change",
    plan: Callable[[ActionContext, P], Awaitable[dict[str, Any]]] | None = None,
) -> Callable[
    [Callable[[ActionContext, P], Awaitable[ActionResult]]],
    Callable[[ActionContext, P], Awaitable[ActionResult]],
]:
    """Register an async action under ``name`` with its parameter model.

    ``reloads_model`` marks actions that reload the model on the server: each such run counts
    toward the cooldown of every playbook on that model, which is what stops reload loops.
    """

    def register(
        fn: Callable[[ActionContext, P], Awaitable[ActionResult]],
    ) -> Callable[[ActionContext, P], Awaitable[ActionResult]]:
        if name in _REGISTRY and _REGISTRY[name].run is not fn:
            raise ValueError(f"action {name!r} is registered twice")
        _REGISTRY[name] = RegisteredAction(
            name=name,
            params=params,
            run=fn,
            plan=plan,
            reloads_model=reloads_model,
            kind=kind,
            doc=(fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "",
        )
        return fn

    return register


def load_all() -> dict[str, RegisteredAction]:
    """Import every module of this package (each registers its action) and return the registry."""
    pkg = importlib.import_module("tritonguard.actions")
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name != "registry":
            importlib.import_module(f"tritonguard.actions.{info.name}")
    return dict(_REGISTRY)


def get(name: str) -> RegisteredAction:
    """Return a registered action; KeyError names the known ones."""
    actions = load_all()
    if name not in actions:
        raise KeyError(f"unknown action {name!r}; known: {', '.join(sorted(actions))}")
    return actions[name]


def catalog() -> dict[str, type[BaseModel]]:
    """Return action name → parameter model, what the playbook loader validates against."""
    return {name: a.params for name, a in load_all().items()}


def schemas() -> dict[str, dict[str, Any]]:
    """Return action name → JSON Schema of its parameters."""
    return {name: a.params.model_json_schema() for name, a in load_all().items()}


class BoundsExceeded(ActionFailed):
    """A numeric change would leave its bound: the action is refused, nothing is changed."""
