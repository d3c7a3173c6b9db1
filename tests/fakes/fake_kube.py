"""A fake Kubernetes API server on loopback that speaks the real REST paths, for tests and the lab.

No API server can run on the machines where tritonguard is developed, so this module serves the
subset of the Kubernetes API that tritonguard uses, with the real URL layout, JSON shapes and
semantics: legacy discovery, ``apps/v1`` Deployments and StatefulSets with the ``scale``
subresource, ``autoscaling/v2`` HorizontalPodAutoscalers, ``core/v1`` Pods (list, label and
field selectors, streaming watch), Events and Namespaces, and ``coordination.k8s.io/v1`` Leases.
Writes bump a cluster-wide ``resourceVersion``; a ``PUT`` with a stale one gets ``409 Conflict``;
errors are ``Status`` objects. ``kubectl`` asks for server-side ``Table`` output and gets it.

It is not a cluster: there is no scheduler and no admission. A tiny controller does what
tritonguard's tests need: scaling a Deployment or StatefulSet creates or deletes its pods (so a
watch sees them come and go), and an HPA keeps its target within ``[minReplicas, maxReplicas]``.

Tests seed and inspect state with plain methods (``add_deployment``, ``add_pod``,
``set_pod_phase``, ``add_hpa``, ``get_object``), read ``requests``, and inject faults (a delay
on every response, ``500``/``503`` for the next *k* requests, dropped connections). Use it as an
async context manager, or from synchronous code with :meth:`FakeKube.run_in_thread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiohttp import web

JsonObj = dict[str, Any]

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_BODY = web.RequestKey("body", object)
_RECORD = web.RequestKey("record", dict)
_LOGGED = web.RequestKey("logged", bool)

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives in the API and how it is named."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    scalable: bool = False
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``apiVersion`` of objects of this type (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Unique key of the type in the store."""
        return f"{self.api_version}/{self.plural}"

    @property
    def qualified(self) -> str:
        """``plural.group`` as the real server spells it in messages (``deployments.apps``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        """Lower-case singular name, used by discovery."""
        return self.kind.lower()


PODS = ResourceType("", "v1", "pods", "Pod", short_names=("po",), categories=("all",))
EVENTS = ResourceType("", "v1", "events", "Event", short_names=("ev",))
NAMESPACES = ResourceType(
    "", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",)
)
DEPLOYMENTS = ResourceType(
    "apps",
    "v1",
    "deployments",
    "Deployment",
    short_names=("deploy",),
    scalable=True,
    categories=("all",),
)
STATEFULSETS = ResourceType(
    "apps",
    "v1",
    "statefulsets",
    "StatefulSet",
    short_names=("sts",),
    scalable=True,
    categories=("all",),
)
HPAS = ResourceType(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    short_names=("hpa",),
    categories=("all",),
)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")

RESOURCES: tuple[ResourceType, ...] = (
    PODS,
    EVENTS,
    NAMESPACES,
    DEPLOYMENTS,
    STATEFULSETS,
    HPAS,
    LEASES,
)
_BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}
# Kubernetes serves autoscaling/v1 too; kubectl and the python client only need v2 here.
_GROUP_VERSIONS: dict[str, list[str]] = {}
for _r in RESOURCES:
    if _r.group and _r.version not in _GROUP_VERSIONS.setdefault(_r.group, []):
        _GROUP_VERSIONS[_r.group].append(_r.version)


@dataclass(frozen=True)
class RequestRecord:
    """One request the fake served, for assertions in tests."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    status: int
    accept: str = ""


@dataclass
class _Faults:
    """Injected misbehaviour; every field is read on each request."""

    delay_s: float = 0.0
    fail_next: int = 0
    fail_status: int = 503
    drop_next: int = 0


@dataclass
class _Change:
    """One entry of the watch log: what happened to which object at which resourceVersion."""

    rv: int
    key: str
    namespace: str
    type: str
    obj: JsonObj
    old: JsonObj | None = field(default=None)


class ApiError(Exception):
    """A failed request, rendered as a Kubernetes ``Status`` object."""

    def __init__(
        self, code: int, reason: str, message: str, details: JsonObj | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> JsonObj:
        """Return the ``Status`` body the real API server would send."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def _age(ts: str | None) -> str:
    """Render an age the way kubectl does (``45s``, ``3m``, ``2h``, ``5d``)."""
    when = _parse_time(ts or "")
    if when is None:
        return "<unknown>"
    secs = max(0, int((datetime.now(UTC) - when).total_seconds()))
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60}m"
    if secs < 172800:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch (``null`` deletes, objects merge, the rest replaces)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: JsonObj, ops: Any) -> JsonObj:
    """Apply an RFC 6902 JSON patch (``add``, ``remove``, ``replace``, ``test``)."""
    if not isinstance(ops, list):
        raise ApiError(
            400,
            "BadRequest",
            "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        )
    doc: Any = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(422, "Invalid", f"invalid json patch operation {op!r}")
        parts = _pointer(str(op["path"]))
        if not parts:
            raise ApiError(422, "Invalid", "json patch on the whole document is not supported")
        parent: Any = doc
        for p in parts[:-1]:
            try:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            except (KeyError, IndexError, ValueError) as exc:
                raise ApiError(
                    422, "Invalid", f"json patch path {op['path']!r} does not exist"
                ) from exc
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(idx, op.get("value"))
            elif kind == "remove":
                parent.pop(idx)
            elif kind == "replace":
                parent[idx] = op.get("value")
            elif kind == "test" and parent[idx] != op.get("value"):
                raise ApiError(422, "Invalid", f"json patch test failed at {op['path']!r}")
        elif isinstance(parent, dict):
            if kind in ("add", "replace"):
                if kind == "replace" and last not in parent:
                    raise ApiError(
                        422, "Invalid", f"json patch replace of missing path {op['path']!r}"
                    )
                parent[last] = op.get("value")
            elif kind == "remove":
                if last not in parent:
                    raise ApiError(
                        422, "Invalid", f"json patch remove of missing path {op['path']!r}"
                    )
                del parent[last]
            elif kind == "test" and parent.get(last) != op.get("value"):
                raise ApiError(422, "Invalid", f"json patch test failed at {op['path']!r}")
        else:
            raise ApiError(422, "Invalid", f"json patch path {op['path']!r} is not a container")
    if not isinstance(doc, dict):
        raise ApiError(422, "Invalid", "json patch must leave an object")
    return doc


def _split_selector(selector: str) -> list[str]:
    """Split on the commas that are not inside a set ``(x,y)``."""
    parts: list[str] = []
    depth = 0
    buf = ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(buf)
            buf = ""
        else:
            buf += ch
    parts.append(buf)
    return [p.strip() for p in parts if p.strip()]


def _label_term(raw: str) -> tuple[str, str, frozenset[str]]:
    """Parse one requirement into ``(key, operator, values)``."""
    for word, op in ((" notin ", "notin"), (" in ", "in")):
        if word in raw:
            k, _, vals = raw.partition(word)
            return k.strip(), op, frozenset(v.strip() for v in vals.strip().strip("()").split(","))
    if "!=" in raw:
        k, _, v = raw.partition("!=")
        return k.strip(), "notin", frozenset([v.strip()])
    if "=" in raw:
        k, _, v = raw.replace("==", "=").partition("=")
        return k.strip(), "in", frozenset([v.strip()])
    if raw.startswith("!"):
        return raw[1:].strip(), "absent", frozenset()
    return raw, "exists", frozenset()


def _label_holds(labels: dict[str, str], term: tuple[str, str, frozenset[str]]) -> bool:
    key, op, values = term
    if op == "in":
        return labels.get(key) in values
    if op == "notin":
        return labels.get(key) not in values
    if op == "absent":
        return key not in labels
    return key in labels


def parse_label_selector(selector: str) -> Callable[[dict[str, str]], bool]:
    """Compile a label selector (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``)."""
    terms = [_label_term(raw) for raw in _split_selector(selector)]
    return lambda labels: all(_label_holds(labels, t) for t in terms)


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def parse_field_selector(selector: str) -> Callable[[JsonObj], bool]:
    """Compile a field selector (``metadata.name=x,status.phase!=Running``)."""
    terms: list[tuple[str, bool, str]] = []
    for raw in (p.strip() for p in selector.split(",")):
        if "!=" in raw:
            k, _, v = raw.partition("!=")
            terms.append((k.strip(), False, v.strip()))
        elif raw:
            k, _, v = raw.replace("==", "=").partition("=")
            terms.append((k.strip(), True, v.strip()))
    return lambda o: all((str(_dig(o, k) or "") == v) == eq for k, eq, v in terms)


def _labels(obj: JsonObj) -> dict[str, str]:
    labels = obj.get("metadata", {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _selector_string(match_labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def _pod_ready(pod: JsonObj) -> bool:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


# --- server-side printing (kubectl asks for ``as=Table``) -------------------------------------


def _col(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> JsonObj:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def _table_columns(rtype: ResourceType) -> list[JsonObj]:
    name = _col("Name", fmt="name")
    if rtype is PODS:
        return [
            name,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "string"),
            _col("Age"),
            _col("IP", priority=1),
            _col("Node", priority=1),
        ]
    if rtype is DEPLOYMENTS:
        return [
            name,
            _col("Ready"),
            _col("Up-to-date", "integer"),
            _col("Available", "integer"),
            _col("Age"),
        ]
    if rtype is STATEFULSETS:
        return [name, _col("Ready"), _col("Age")]
    if rtype is HPAS:
        return [
            name,
            _col("Reference"),
            _col("Targets"),
            _col("MinPods", "integer"),
            _col("MaxPods", "integer"),
            _col("Replicas", "integer"),
            _col("Age"),
        ]
    if rtype is LEASES:
        return [name, _col("Holder"), _col("Age")]
    if rtype is EVENTS:
        return [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Message"),
            name,
        ]
    return [name, _col("Status"), _col("Age")]


def _table_cells(rtype: ResourceType, obj: JsonObj) -> list[Any]:
    md = obj.get("metadata", {})
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    age = _age(md.get("creationTimestamp"))
    name = md.get("name", "")
    if rtype is PODS:
        ready = "1/1" if _pod_ready(obj) else "0/1"
        phase = "Terminating" if md.get("deletionTimestamp") else status.get("phase", "Unknown")
        return [
            name,
            ready,
            phase,
            "0",
            age,
            status.get("podIP", "<none>"),
            spec.get("nodeName", "<none>"),
        ]
    if rtype is DEPLOYMENTS:
        return [
            name,
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0),
            age,
        ]
    if rtype is STATEFULSETS:
        return [name, f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", age]
    if rtype is HPAS:
        ref = spec.get("scaleTargetRef", {})
        return [
            name,
            f"{ref.get('kind')}/{ref.get('name')}",
            "<unknown>",
            spec.get("minReplicas", 1),
            spec.get("maxReplicas", 0),
            status.get("currentReplicas", 0),
            age,
        ]
    if rtype is LEASES:
        return [name, spec.get("holderIdentity", ""), age]
    if rtype is EVENTS:
        inv = obj.get("involvedObject", {})
        return [
            _age(obj.get("lastTimestamp") or md.get("creationTimestamp")),
            obj.get("type", ""),
            obj.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
            obj.get("message", ""),
            name,
        ]
    return [name, status.get("phase", "Active"), age]


def _table(rtype: ResourceType, objs: list[JsonObj], rv: str, include: str) -> JsonObj:
    rows = []
    for obj in objs:
        row: JsonObj = {"cells": _table_cells(rtype, obj)}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": _table_columns(rtype),
        "rows": rows,
    }


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


# --- the server --------------------------------------------------------------------------------


class FakeKube:
    """A fake Kubernetes API server: real paths and shapes, in-memory state, injectable faults."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._want_port = port
        self.port = 0
        self.requests: list[RequestRecord] = []
        self.faults = _Faults()
        self.new_pod_phase = "Running"
        self.hpa_controller = True
        self.watch_log_size = 2000
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str, str], JsonObj] = {}
        self._log: list[_Change] = []
        self._rv = 1000
        self._oldest_rv = self._rv
        self._uid_seq = itertools.count(1)
        self._pod_seq = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._closing = False
        for ns in ("default", "kube-system"):
            self._put(NAMESPACES, "", self._new_meta(ns, "", {}), event=False)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the running server (``http://127.0.0.1:PORT``)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start serving on the configured (or a free) port."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._closing = False
        app = web.Application(middlewares=[self._middleware], client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._want_port or self.port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop serving and end open watches; state is kept, so :meth:`start` resumes it."""
        self._closing = True
        self._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeKube:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @contextlib.contextmanager
    def run_in_thread(self) -> Iterator[FakeKube]:
        """Serve from a private event loop in a background thread (for synchronous tests)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def _run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()

        thread = threading.Thread(target=_run, name="fake-kube", daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Kubernetes API server did not start within 10 s")
        try:
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()

    def kubeconfig(self, namespace: str = "default") -> str:
        """Return a kubeconfig (YAML is a superset of JSON) pointing at this server, no auth."""
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [
                    {
                        "name": "fake",
                        "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                    }
                ],
                "current-context": "fake",
            },
            indent=2,
        )

    # -- fault injection --------------------------------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Delay every response by ``seconds`` (a slow or overloaded API server)."""
        self.faults.delay_s = seconds

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (500 or 503) and a Status body."""
        self.faults.fail_next = count
        self.faults.fail_status = status

    def drop_next(self, count: int) -> None:
        """Close the connection without answering for the next ``count`` requests."""
        self.faults.drop_next = count

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older resourceVersions get 410."""
        with self._lock:
            self._log.clear()
            self._oldest_rv = self._rv

    # -- seeding and inspection -------------------------------------------------------------

    def add_namespace(self, name: str) -> JsonObj:
        """Create a namespace (``default`` and ``kube-system`` exist from the start)."""
        with self._lock:
            existing = self._objects.get((NAMESPACES.key, "", name))
            if existing is not None:
                return copy.deepcopy(existing)
            return copy.deepcopy(self._put(NAMESPACES, "", self._new_meta(name, "", {})))

    def add_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int = 1,
        labels: dict[str, str] | None = None,
        *,
        kind: str = "Deployment",
    ) -> JsonObj:
        """Create a Deployment (or ``kind="StatefulSet"``) whose pods carry ``labels``."""
        rtype = STATEFULSETS if kind == "StatefulSet" else DEPLOYMENTS
        labels = dict(labels or {"app": name})
        obj = self._new_meta(name, namespace, labels)
        obj["spec"] = {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/tritonserver"}]},
            },
        }
        if rtype is STATEFULSETS:
            obj["spec"]["serviceName"] = name
        with self._lock:
            self.add_namespace(namespace)
            stored = self._create(rtype, namespace, obj)
            self._reconcile(rtype, namespace, name)
            return copy.deepcopy(self._objects[(rtype.key, namespace, name)] or stored)

    def add_statefulset(
        self, namespace: str, name: str, replicas: int = 1, labels: dict[str, str] | None = None
    ) -> JsonObj:
        """Create a StatefulSet whose pods carry ``labels``."""
        return self.add_deployment(namespace, name, replicas, labels, kind="StatefulSet")

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str] | None = None,
        *,
        phase: str = "Running",
        ready: bool | None = None,
        node: str = "gpu-node-1",
    ) -> JsonObj:
        """Create a pod directly (not owned by a workload)."""
        with self._lock:
            self.add_namespace(namespace)
            return copy.deepcopy(
                self._create(
                    PODS,
                    namespace,
                    self._pod(namespace, name, labels or {}, phase=phase, ready=ready, node=node),
                )
            )

    def set_pod_phase(
        self, namespace: str, name: str, phase: str, ready: bool | None = None
    ) -> JsonObj:
        """Change a pod's phase (and Ready condition; Running means ready unless told)."""
        with self._lock:
            pod = self._require(PODS, namespace, name)
            pod["status"] = self._pod_status(phase, ready, pod["status"].get("podIP"))
            stored = self._update(PODS, namespace, pod)
            self._refresh_workload_status(namespace)
            return copy.deepcopy(stored)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod (a workload with too few pods gets a replacement, as a ReplicaSet would)."""
        with self._lock:
            pod = self._require(PODS, namespace, name)
            self._delete(PODS, namespace, name)
            owner = (pod["metadata"].get("annotations") or {}).get("fake.kube/owner")
            if owner:
                kind, _, oname = owner.partition("/")
                self._reconcile(
                    STATEFULSETS if kind == "StatefulSet" else DEPLOYMENTS, namespace, oname
                )

    def add_hpa(
        self,
        namespace: str,
        name: str,
        target_name: str,
        *,
        target_kind: str = "Deployment",
        min_replicas: int = 1,
        max_replicas: int = 10,
        current_replicas: int | None = None,
        desired_replicas: int | None = None,
    ) -> JsonObj:
        """Create an autoscaling/v2 HPA for a workload; status defaults to the target's replicas."""
        obj = self._new_meta(name, namespace, {})
        obj["spec"] = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target_name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        }
        with self._lock:
            self.add_namespace(namespace)
            target = self._objects.get(
                (
                    (STATEFULSETS if target_kind == "StatefulSet" else DEPLOYMENTS).key,
                    namespace,
                    target_name,
                )
            )
            cur = current_replicas
            if cur is None:
                cur = int(target["spec"]["replicas"]) if target else 0
            obj["status"] = {
                "currentReplicas": cur,
                "desiredReplicas": cur if desired_replicas is None else desired_replicas,
            }
            return copy.deepcopy(self._create(HPAS, namespace, obj))

    def set_hpa_status(self, namespace: str, name: str, *, current: int, desired: int) -> JsonObj:
        """Set an HPA's observed current/desired replicas (e.g. desired > current: HPA lag)."""
        with self._lock:
            hpa = self._require(HPAS, namespace, name)
            hpa["status"] = {
                **hpa.get("status", {}),
                "currentReplicas": current,
                "desiredReplicas": desired,
            }
            return copy.deepcopy(self._update(HPAS, namespace, hpa))

    def get_object(self, kind: str, namespace: str, name: str) -> JsonObj | None:
        """Return a copy of a stored object by kind (``Deployment``, ``Pod``, ...), or None."""
        rtype = self._type_of_kind(kind)
        with self._lock:
            obj = self._objects.get((rtype.key, namespace if rtype.namespaced else "", name))
            return copy.deepcopy(obj) if obj else None

    def list_objects(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> list[JsonObj]:
        """Return copies of stored objects of a kind, optionally filtered."""
        rtype = self._type_of_kind(kind)
        match = parse_label_selector(label_selector)
        with self._lock:
            return [
                copy.deepcopy(o)
                for (k, ns, _), o in sorted(self._objects.items())
                if k == rtype.key and (namespace is None or ns == namespace) and match(_labels(o))
            ]

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """Return ``spec.replicas`` of a workload (raises KeyError if it does not exist)."""
        obj = self.get_object(kind, namespace, name)
        if obj is None:
            raise KeyError(f"{kind} {namespace}/{name} does not exist")
        return int(obj["spec"]["replicas"])

    @property
    def resource_version(self) -> int:
        """The current cluster-wide resourceVersion."""
        return self._rv

    # -- store internals (call with the lock held) ------------------------------------------

    @staticmethod
    def _type_of_kind(kind: str) -> ResourceType:
        for r in RESOURCES:
            if kind in (r.kind, r.plural, r.singular, *r.short_names):
                return r
        raise KeyError(f"unknown kind {kind!r}")

    def _new_meta(self, name: str, namespace: str, labels: dict[str, str]) -> JsonObj:
        md: JsonObj = {"name": name, "labels": dict(labels)}
        if namespace:
            md["namespace"] = namespace
        return {"metadata": md}

    def _stamp(self, rtype: ResourceType, namespace: str, obj: JsonObj, *, new: bool) -> JsonObj:
        obj["kind"] = rtype.kind
        obj["apiVersion"] = rtype.api_version
        md = obj.setdefault("metadata", {})
        if rtype.namespaced:
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        if new:
            md["uid"] = str(uuid.UUID(int=next(self._uid_seq) + (1 << 62)))
            md["creationTimestamp"] = _now_iso()
            md["generation"] = 1
        self._rv += 1
        md["resourceVersion"] = str(self._rv)
        return obj

    def _put(
        self, rtype: ResourceType, namespace: str, obj: JsonObj, *, event: bool = True
    ) -> JsonObj:
        name = obj["metadata"]["name"]
        self._stamp(rtype, namespace, obj, new=True)
        if rtype is NAMESPACES:
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        self._objects[(rtype.key, namespace, name)] = obj
        if event:
            self._record(rtype, namespace, "ADDED", obj, None)
        return obj

    def _create(self, rtype: ResourceType, namespace: str, obj: JsonObj) -> JsonObj:
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = f"{md['generateName']}{uuid.uuid4().hex[:5]}"
        name = md.get("name")
        if not name:
            raise ApiError(
                422,
                "Invalid",
                f'{rtype.kind} "" is invalid: metadata.name: Required value: name or '
                "generateName is required",
                {
                    "kind": rtype.kind,
                    "group": rtype.group,
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                },
            )
        if rtype.namespaced and (NAMESPACES.key, "", namespace) not in self._objects:
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        if (rtype.key, namespace, name) in self._objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{rtype.qualified} "{name}" already exists',
                {"name": name, "group": rtype.group, "kind": rtype.plural},
            )
        self._validate(rtype, obj)
        if rtype in (DEPLOYMENTS, STATEFULSETS):
            obj.pop("status", None)
        return self._put(rtype, namespace, obj)

    def _update(self, rtype: ResourceType, namespace: str, obj: JsonObj) -> JsonObj:
        name = obj["metadata"]["name"]
        old = self._objects[(rtype.key, namespace, name)]
        self._validate(rtype, obj)
        md = obj["metadata"]
        for keep in ("uid", "creationTimestamp", "generation"):
            if keep in old["metadata"]:
                md[keep] = old["metadata"][keep]
        if obj.get("spec") != old.get("spec"):
            md["generation"] = int(old["metadata"].get("generation", 1)) + 1
        self._stamp(rtype, namespace, obj, new=False)
        self._objects[(rtype.key, namespace, name)] = obj
        self._record(rtype, namespace, "MODIFIED", obj, old)
        return obj

    def _delete(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj:
        old = self._objects.pop((rtype.key, namespace, name))
        gone = copy.deepcopy(old)
        self._rv += 1
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._record(rtype, namespace, "DELETED", gone, old)
        return gone

    def _require(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj:
        obj = self._objects.get((rtype.key, namespace, name))
        if obj is None:
            raise ApiError(
                404,
                "NotFound",
                f'{rtype.qualified} "{name}" not found',
                {"name": name, "group": rtype.group, "kind": rtype.plural},
            )
        return copy.deepcopy(obj)

    def _record(
        self, rtype: ResourceType, namespace: str, kind: str, obj: JsonObj, old: JsonObj | None
    ) -> None:
        self._log.append(
            _Change(
                self._rv,
                rtype.key,
                namespace,
                kind,
                copy.deepcopy(obj),
                copy.deepcopy(old) if old else None,
            )
        )
        if len(self._log) > self.watch_log_size:
            drop = len(self._log) - self.watch_log_size
            self._oldest_rv = self._log[drop - 1].rv
            del self._log[:drop]
        self._wake()

    def _wake(self) -> None:
        loop, changed = self._loop, self._changed
        if loop is None or changed is None or loop.is_closed():
            return

        def _fire() -> None:
            assert self._changed is not None
            self._changed.set()
            self._changed = asyncio.Event()

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _fire()
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_fire)

    def _validate(self, rtype: ResourceType, obj: JsonObj) -> None:
        causes: list[JsonObj] = []
        spec = obj.get("spec") or {}
        if rtype in (DEPLOYMENTS, STATEFULSETS):
            r = spec.get("replicas", 1)
            if not isinstance(r, int) or isinstance(r, bool) or r < 0:
                causes.append(
                    {
                        "field": "spec.replicas",
                        "message": f"Invalid value: {r!r}: must be greater than or equal to 0",
                    }
                )
        if rtype is HPAS:
            lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
            if not isinstance(lo, int) or lo < 1:
                causes.append(
                    {
                        "field": "spec.minReplicas",
                        "message": f"Invalid value: {lo!r}: must be greater than or equal to 1",
                    }
                )
            if not isinstance(hi, int) or (isinstance(lo, int) and hi < lo):
                causes.append(
                    {
                        "field": "spec.maxReplicas",
                        "message": f"Invalid value: {hi!r}: must be greater than or equal to "
                        "`minReplicas`",
                    }
                )
            if not (spec.get("scaleTargetRef") or {}).get("name"):
                causes.append({"field": "spec.scaleTargetRef.name", "message": "Required value"})
        if rtype is LEASES:
            d = spec.get("leaseDurationSeconds")
            if d is not None and (not isinstance(d, int) or d <= 0):
                causes.append(
                    {
                        "field": "spec.leaseDurationSeconds",
                        "message": f"Invalid value: {d!r}: must be greater than 0",
                    }
                )
        if rtype is EVENTS:
            inv = obj.get("involvedObject") or {}
            ns = obj.get("metadata", {}).get("namespace")
            if inv.get("namespace") and ns and inv["namespace"] != ns:
                causes.append(
                    {
                        "field": "involvedObject.namespace",
                        "message": "does not match event.namespace",
                    }
                )
            if not inv.get("kind") or not inv.get("name"):
                causes.append({"field": "involvedObject", "message": "Required value"})
        if causes:
            name = obj.get("metadata", {}).get("name", "")
            detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
            raise ApiError(
                422,
                "Invalid",
                f'{rtype.kind}.{rtype.group or "core"} "{name}" is invalid: {detail}',
                {
                    "name": name,
                    "group": rtype.group,
                    "kind": rtype.kind,
                    "causes": [{"reason": "FieldValueInvalid", **c} for c in causes],
                },
            )

    # -- the tiny controller ----------------------------------------------------------------

    def _pod_status(self, phase: str, ready: bool | None, ip: str | None) -> JsonObj:
        is_ready = (phase == "Running") if ready is None else ready
        n = next(self._pod_seq)
        return {
            "phase": phase,
            "podIP": ip or f"10.244.{n // 250}.{n % 250 + 2}",
            "startTime": _now_iso(),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if is_ready else "False",
                    "lastTransitionTime": _now_iso(),
                },
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": is_ready,
                    "restartCount": 0,
                    "image": "nvcr.io/nvidia/tritonserver",
                    "imageID": "",
                    "started": phase == "Running",
                    "state": {"running": {"startedAt": _now_iso()}}
                    if phase == "Running"
                    else {"waiting": {"reason": "ContainerCreating"}},
                },
            ],
        }

    def _pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str],
        *,
        phase: str,
        ready: bool | None,
        node: str,
        owner: JsonObj | None = None,
    ) -> JsonObj:
        pod = self._new_meta(name, namespace, labels)
        if owner is not None:
            pod["metadata"]["ownerReferences"] = [owner["ref"]]
            pod["metadata"]["annotations"] = {"fake.kube/owner": owner["id"]}
        pod["spec"] = {
            "nodeName": node,
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/tritonserver"}],
        }
        pod["status"] = self._pod_status(phase, ready, None)
        return pod

    def _owned_pods(self, namespace: str, owner_id: str) -> list[JsonObj]:
        return [
            o
            for (k, ns, _), o in sorted(
                self._objects.items(), key=lambda kv: str(kv[1]["metadata"]["uid"])
            )
            if k == PODS.key
            and ns == namespace
            and (o["metadata"].get("annotations") or {}).get("fake.kube/owner") == owner_id
        ]

    def _reconcile(self, rtype: ResourceType, namespace: str, name: str) -> None:
        """Create or delete pods so a workload has ``spec.replicas`` of them, then set status."""
        wl = self._objects.get((rtype.key, namespace, name))
        if wl is None:
            return
        owner_id = f"{rtype.kind}/{name}"
        want = int(wl["spec"].get("replicas", 1))
        labels = dict((wl["spec"].get("template", {}).get("metadata") or {}).get("labels") or {})
        pods = self._owned_pods(namespace, owner_id)
        if rtype is DEPLOYMENTS:
            tmpl_hash = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:10]
            labels["pod-template-hash"] = tmpl_hash
            ref = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{name}-{tmpl_hash}",
                "uid": wl["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        else:
            ref = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": name,
                "uid": wl["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        owner = {"ref": ref, "id": owner_id}
        if rtype is STATEFULSETS:
            have = {p["metadata"]["name"] for p in pods}
            for i in range(want):
                pod_name = f"{name}-{i}"
                if pod_name not in have:
                    self._create(
                        PODS,
                        namespace,
                        self._pod(
                            namespace,
                            pod_name,
                            {**labels, "apps.kubernetes.io/pod-index": str(i)},
                            phase=self.new_pod_phase,
                            ready=None,
                            node=f"gpu-node-{i % 3 + 1}",
                            owner=owner,
                        ),
                    )
            for p in pods:
                idx = int(p["metadata"]["name"].rsplit("-", 1)[1])
                if idx >= want:
                    self._delete(PODS, namespace, p["metadata"]["name"])
        else:
            for _ in range(want - len(pods)):
                suffix = uuid.uuid4().hex[:5]
                self._create(
                    PODS,
                    namespace,
                    self._pod(
                        namespace,
                        f"{ref['name']}-{suffix}",
                        labels,
                        phase=self.new_pod_phase,
                        ready=None,
                        node=f"gpu-node-{next(self._pod_seq) % 3 + 1}",
                        owner=owner,
                    ),
                )
            # A ReplicaSet scales down the newest pods first.
            for p in reversed(pods[want:] if len(pods) > want else []):
                self._delete(PODS, namespace, p["metadata"]["name"])
        self._refresh_workload_status(namespace, only=(rtype, name))

    def _refresh_workload_status(
        self, namespace: str, only: tuple[ResourceType, str] | None = None
    ) -> None:
        targets = (
            [only]
            if only
            else [
                (r, n)
                for (k, ns, n) in list(self._objects)
                for r in (DEPLOYMENTS, STATEFULSETS)
                if k == r.key and ns == namespace
            ]
        )
        for rtype, name in targets:
            wl = self._objects.get((rtype.key, namespace, name))
            if wl is None:
                continue
            pods = self._owned_pods(namespace, f"{rtype.kind}/{name}")
            ready = sum(1 for p in pods if _pod_ready(p))
            status = {
                "observedGeneration": wl["metadata"].get("generation", 1),
                "replicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": len(pods),
                "currentReplicas": len(pods),
            }
            if wl.get("status") != status:
                new = copy.deepcopy(wl)
                new["status"] = status
                self._stamp(rtype, namespace, new, new=False)
                self._objects[(rtype.key, namespace, name)] = new
                self._record(rtype, namespace, "MODIFIED", new, wl)
            self._sync_hpas(namespace, rtype.kind, name)

    def _sync_hpas(self, namespace: str, kind: str, name: str) -> None:
        """Mirror an HPA controller: keep the target within bounds and report its replicas."""
        if not self.hpa_controller:
            return
        for (k, ns, hname), hpa in list(self._objects.items()):
            ref = hpa.get("spec", {}).get("scaleTargetRef", {}) if k == HPAS.key else {}
            if ns != namespace or ref.get("kind") != kind or ref.get("name") != name:
                continue
            rtype = STATEFULSETS if kind == "StatefulSet" else DEPLOYMENTS
            wl = self._objects.get((rtype.key, namespace, name))
            if wl is None:
                continue
            cur = int(wl["spec"].get("replicas", 1))
            lo, hi = int(hpa["spec"].get("minReplicas", 1)), int(hpa["spec"]["maxReplicas"])
            desired = min(max(cur, lo), hi)
            if desired != cur:
                new_wl = copy.deepcopy(wl)
                new_wl["spec"]["replicas"] = desired
                self._update(rtype, namespace, new_wl)
                self._reconcile(rtype, namespace, name)
                return
            status = {**hpa.get("status", {}), "currentReplicas": cur, "desiredReplicas": desired}
            if hpa.get("status") != status:
                new_hpa = copy.deepcopy(hpa)
                new_hpa["status"] = status
                self._stamp(HPAS, namespace, new_hpa, new=False)
                self._objects[(HPAS.key, namespace, hname)] = new_hpa
                self._record(HPAS, namespace, "MODIFIED", new_hpa, hpa)

    def _after_write(self, rtype: ResourceType, namespace: str, name: str) -> None:
        if rtype in (DEPLOYMENTS, STATEFULSETS):
            self._reconcile(rtype, namespace, name)
        elif rtype is HPAS:
            ref = self._objects[(rtype.key, namespace, name)]["spec"]["scaleTargetRef"]
            self._sync_hpas(namespace, ref.get("kind", ""), ref.get("name", ""))

    # -- HTTP -------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        record = dict(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            content_type=request.headers.get("Content-Type", ""),
            body=body,
            accept=request.headers.get("Accept", ""),
        )
        if self.faults.delay_s:
            await asyncio.sleep(self.faults.delay_s)
        if self.faults.drop_next > 0:
            self.faults.drop_next -= 1
            self.requests.append(RequestRecord(**record, status=0))
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        if self.faults.fail_next > 0:
            self.faults.fail_next -= 1
            code = self.faults.fail_status
            err = ApiError(
                code,
                "ServiceUnavailable" if code == 503 else "InternalError",
                "the server is currently unable to handle the request"
                if code == 503
                else "an error on the server has prevented the request from succeeding",
            )
            self.requests.append(RequestRecord(**record, status=code))
            return web.json_response(err.status(), status=code)
        request[_BODY] = body
        request[_RECORD] = record
        try:
            resp: web.StreamResponse = await handler(request)
        except ApiError as err:
            resp = web.json_response(err.status(), status=err.code)
        if not request.get(_LOGGED):
            self.requests.append(RequestRecord(**record, status=resp.status))
        return resp

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return web.json_response(
                {
                    "paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]
                    + [f"/apis/{g}/{v}" for g, vs in _GROUP_VERSIONS.items() for v in vs]
                }
            )
        if parts[0] in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        if parts == ["version"]:
            return web.json_response(SERVER_VERSION)
        if parts[0] == "api":
            if len(parts) == 1:
                return web.json_response(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
                        ],
                    }
                )
            return await self._resource_request(request, "", parts[1], parts[2:])
        if parts[0] == "apis":
            if len(parts) == 1:
                return web.json_response(
                    {
                        "kind": "APIGroupList",
                        "apiVersion": "v1",
                        "groups": [self._group(g) for g in _GROUP_VERSIONS],
                    }
                )
            if len(parts) == 2:
                if parts[1] not in _GROUP_VERSIONS:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                return web.json_response(
                    {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])}
                )
            return await self._resource_request(request, parts[1], parts[2], parts[3:])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    @staticmethod
    def _group(group: str) -> JsonObj:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _GROUP_VERSIONS[group]]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def _resource_list(group: str, version: str) -> JsonObj:
        resources: list[JsonObj] = []
        for r in RESOURCES:
            if r.group != group or r.version != version:
                continue
            entry: JsonObj = {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": _ALL_VERBS,
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            resources.append(entry)
            resources.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
            if r.scalable:
                resources.append(
                    {
                        "name": f"{r.plural}/scale",
                        "singularName": "",
                        "namespaced": True,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    async def _resource_request(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        if (group and version not in _GROUP_VERSIONS.get(group, [])) or (
            not group and version != "v1"
        ):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if request.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            return web.json_response(self._resource_list(group, version))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rtype = _BY_PATH.get((group, version, rest[0]))
        if rtype is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if rtype.namespaced and namespace is None and len(rest) > 1:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        ns = namespace or ""
        method = request.method
        q = request.query
        body: Any = request[_BODY]
        if name is None:
            if method == "GET" and q.get("watch") in ("true", "1"):
                return await self._watch(request, rtype, namespace)
            if method == "GET":
                return self._list(request, rtype, namespace)
            if method == "POST":
                self._check_body(rtype, ns, body, None)
                with self._lock:
                    created = self._create(rtype, ns, copy.deepcopy(body))
                    self._after_write(rtype, ns, created["metadata"]["name"])
                    out = self._objects.get((rtype.key, ns, created["metadata"]["name"]), created)
                return web.json_response(out, status=201)
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
        if sub == "scale":
            if not rtype.scalable:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._scale(request, rtype, ns, name, body)
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self._lock:
            if method == "GET":
                obj = self._require(rtype, ns, name)
                if _wants_table(request):
                    obj = _table(
                        rtype,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        q.get("includeObject", "Metadata"),
                    )
                return web.json_response(obj)
            if method == "DELETE":
                self._require(rtype, ns, name)
                gone = self._delete(rtype, ns, name)
                if rtype is PODS:
                    owner = (gone["metadata"].get("annotations") or {}).get("fake.kube/owner", "")
                    if owner:
                        kind, _, oname = owner.partition("/")
                        self._reconcile(
                            STATEFULSETS if kind == "StatefulSet" else DEPLOYMENTS, ns, oname
                        )
                return web.json_response(gone)
            current = self._require(rtype, ns, name)
            if method == "PUT":
                self._check_body(rtype, ns, body, name)
                new = copy.deepcopy(body)
                self._check_rv(rtype, name, current, new)
            elif method == "PATCH":
                new = self._apply_patch(request, current, body)
            else:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            new.setdefault("metadata", {})["name"] = name
            if sub == "status":
                new = {**current, "status": new.get("status", current.get("status"))}
            elif rtype not in (EVENTS, LEASES, NAMESPACES) and "status" in current:
                # The main resource ignores status changes, as the real server does.
                new["status"] = current["status"]
            self._update(rtype, ns, new)
            self._after_write(rtype, ns, name)
            return web.json_response(self._objects[(rtype.key, ns, name)])

    def _check_body(self, rtype: ResourceType, ns: str, body: Any, name: str | None) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        md = body.get("metadata") or {}
        if rtype.namespaced and md.get("namespace") and md["namespace"] != ns:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the "
                "request",
            )
        if name is not None and md.get("name") and md["name"] != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({md['name']}) does not match the name on the URL "
                f"({name})",
            )
        if body.get("kind") and body["kind"] != rtype.kind:
            raise ApiError(
                400,
                "BadRequest",
                f"{rtype.plural} in version {rtype.version!r} cannot be handled as a "
                f"{rtype.kind}: kind {body['kind']!r} does not match",
            )

    @staticmethod
    def _check_rv(rtype: ResourceType, name: str, current: JsonObj, new: JsonObj) -> None:
        sent = str((new.get("metadata") or {}).get("resourceVersion") or "")
        if sent and sent != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
                {"name": name, "group": rtype.group, "kind": rtype.plural},
            )

    def _apply_patch(self, request: web.Request, current: JsonObj, body: Any) -> JsonObj:
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/json-patch+json":
            return json_patch(current, body)
        if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            # Strategic merge is treated as a merge patch: the resources served here have no
            # list fields that tritonguard patches by key.
            if not isinstance(body, dict):
                raise ApiError(
                    400, "BadRequest", "the body of the request was in an unknown format"
                )
            patched = merge_patch(current, body)
            sent = str((body.get("metadata") or {}).get("resourceVersion") or "")
            if sent and sent != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled: the object has been modified; please apply "
                    "your changes to the latest version and try again",
                )
            return dict(patched)
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json-patch+json, application/merge-patch+json, "
            f"application/strategic-merge-patch+json (got {ctype!r})",
        )

    def _scale_of(self, rtype: ResourceType, wl: JsonObj) -> JsonObj:
        md = wl["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: md[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in md
            },
            "spec": {"replicas": wl["spec"].get("replicas", 1)},
            "status": {
                "replicas": (wl.get("status") or {}).get("replicas", 0),
                "selector": _selector_string(wl["spec"]["selector"].get("matchLabels", {})),
            },
        }

    def _scale(
        self, request: web.Request, rtype: ResourceType, ns: str, name: str, body: Any
    ) -> web.StreamResponse:
        with self._lock:
            wl = self._require(rtype, ns, name)
            scale = self._scale_of(rtype, wl)
            if request.method == "GET":
                return web.json_response(scale)
            if request.method == "PUT":
                if not isinstance(body, dict):
                    raise ApiError(
                        400, "BadRequest", "the body of the request was in an unknown format"
                    )
                self._check_rv(rtype, name, wl, body)
                new_scale = body
            elif request.method == "PATCH":
                new_scale = self._apply_patch(request, scale, body)
            else:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            replicas = (new_scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                    f"{replicas!r}: must be greater than or equal to 0",
                    {
                        "name": name,
                        "group": "autoscaling",
                        "kind": "Scale",
                        "causes": [{"reason": "FieldValueInvalid", "field": "spec.replicas"}],
                    },
                )
            if replicas != wl["spec"].get("replicas"):
                wl["spec"]["replicas"] = replicas
                self._update(rtype, ns, wl)
                self._reconcile(rtype, ns, name)
            return web.json_response(self._scale_of(rtype, self._objects[(rtype.key, ns, name)]))

    def _select(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> Callable[[JsonObj], bool]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""))
        return lambda o: (
            (namespace is None or o.get("metadata", {}).get("namespace", "") == namespace)
            and labels(_labels(o))
            and fields(o)
        )

    def _list(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        match = self._select(request, rtype, namespace)
        with self._lock:
            items = [
                copy.deepcopy(o)
                for (k, _, _), o in sorted(self._objects.items())
                if k == rtype.key and match(o)
            ]
            rv = str(self._rv)
        if _wants_table(request):
            return web.json_response(
                _table(rtype, items, rv, request.query.get("includeObject", "Metadata"))
            )
        for item in items:
            # Items in a list carry no kind/apiVersion, as on the real server.
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return web.json_response(
            {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": rv},
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        match = self._select(request, rtype, namespace)
        table = _wants_table(request)
        include = request.query.get("includeObject", "Metadata")
        since = request.query.get("resourceVersion", "")
        try:
            timeout = float(request.query.get("timeoutSeconds", "1800"))
        except ValueError as exc:
            raise ApiError(400, "BadRequest", "timeoutSeconds must be an integer") from exc
        deadline = time.monotonic() + timeout
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        # A watch stays open, so it is logged when it starts rather than when it ends.
        self.requests.append(RequestRecord(**request[_RECORD], status=200))
        request[_LOGGED] = True

        async def send(kind: str, obj: JsonObj) -> None:
            if table and kind != "ERROR":
                obj = _table(rtype, [obj], obj["metadata"]["resourceVersion"], include)
            await resp.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

        with self._lock:
            if since in ("", "0"):
                initial = [
                    copy.deepcopy(o)
                    for (k, _, _), o in sorted(self._objects.items())
                    if k == rtype.key and match(o)
                ]
                last = self._rv
            elif not since.isdigit():
                raise ApiError(400, "BadRequest", f"invalid resource version {since!r}")
            elif int(since) < self._oldest_rv:
                initial, last = [], -1
            else:
                initial, last = [], int(since)
        if last < 0:
            gone = ApiError(
                410, "Expired", f"too old resource version: {since} ({self._oldest_rv})"
            )
            await send("ERROR", gone.status())
            return resp
        try:
            for obj in initial:
                await send("ADDED", obj)
            while not self._closing:
                changed = self._changed
                with self._lock:
                    todo = [c for c in self._log if c.rv > last and c.key == rtype.key]
                for change in todo:
                    last = change.rv
                    now_match = match(change.obj)
                    was_match = change.old is not None and match(change.old)
                    if change.type == "DELETED":
                        if was_match:
                            await send("DELETED", change.obj)
                    elif now_match:
                        await send(
                            "ADDED" if change.type == "ADDED" or not was_match else "MODIFIED",
                            change.obj,
                        )
                    elif was_match:
                        # The object left the selection: watchers see it go away.
                        await send("DELETED", change.obj)
                left = deadline - time.monotonic()
                if left <= 0 or changed is None:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout=left)
        except ConnectionError:
            return resp  # the watcher went away (kubectl killed, client closed)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
        return resp
