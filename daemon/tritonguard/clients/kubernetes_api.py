"""Async Kubernetes access for tritonguard: scale, HPA, KEDA, pods, owners, events, leader lease.

A thin layer over the official ``kubernetes`` client. Its calls block, so each one runs in a
worker thread under a deadline; a watch streams from its own thread and can be stopped at any
time. Every failure becomes a :class:`KubernetesError` whose message is one line saying what was
attempted and why it failed (API server down, timeout, 404, 409, 403, invalid), never a
traceback.

Leader election follows client-go's lease lock: a lease held by someone else is taken over only
after its record has stayed unchanged for ``leaseDurationSeconds`` *as measured by the local
monotonic clock since it was first observed*, so clock skew between replicas cannot cause two
leaders.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import urllib3
from kubernetes import client
from kubernetes import config as _kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines as _iter_resp_lines

from tritonguard.clients.kube_reflector import ObjectKind, reflect
from tritonguard.clients.ports import Hpa, KubeApi, ScaledObject, Workload, WorkloadKind
from tritonguard.core.config_map_changes import ConfigMapData
from tritonguard.core.pod_targets import (
    ContainerPort,
    OwnerRef,
    Pod,
    owner_chain,
    replicaset_to_resolve,
    workload_of,
)
from tritonguard.core.rollout_changes import Revision

T = TypeVar("T")
JsonObj = dict[str, Any]

# Parts of the official client that carry no type annotations.
config: Any = _kube_config
iter_resp_lines: Any = _iter_resp_lines

ErrorKind = Literal[
    "down",
    "timeout",
    "not_found",
    "conflict",
    "forbidden",
    "unauthorized",
    "invalid",
    "throttled",
    "server",
    "config",
    "unknown",
]
PodEventType = Literal["ADDED", "MODIFIED", "DELETED"]

_STATUS_KINDS: dict[int, ErrorKind] = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    410: "conflict",
    422: "invalid",
    429: "throttled",
}
_RETRYABLE: frozenset[ErrorKind] = frozenset({"down", "timeout", "server", "throttled"})
_MERGE_PATCH = "application/merge-patch+json"
_EVENTS_GROUP = "events.k8s.io"
# ConfigMaps per list page: at up to 1 MiB each, what one response can hold in memory.
CONFIG_MAP_PAGE = 50


class KubernetesError(Exception):
    """A Kubernetes call failed; ``str()`` is one line naming the call and the reason."""

    def __init__(self, kind: ErrorKind, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status

    @property
    def retryable(self) -> bool:
        """Whether trying again later can help (server down, slow, overloaded)."""
        return self.kind in _RETRYABLE


@dataclass(frozen=True)
class PodEvent:
    """One change seen by :meth:`KubernetesClient.watch_pods`."""

    type: PodEventType
    pod: Pod


@dataclass(frozen=True)
class ConfigMapEvent:
    """One change seen by :meth:`KubernetesClient.watch_config_maps`.

    ``listed`` says it came from a list (the first, or a relist after 410 Gone), not from a
    watch in sync: the change may have happened at any time since the last one seen.
    """

    type: PodEventType
    config_map: ConfigMapData
    listed: bool = False


@dataclass
class _Observed:
    """Client-go's observedRecord/observedTime: when this replica last saw the lease change."""

    resource_version: str
    at: float


@dataclass
class _Failure:
    error: BaseException


_END = object()
_OPENED = object()


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _status_message(body: Any) -> str:
    """Extract ``message`` from a Kubernetes ``Status`` body (or give the body, shortened)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return _one_line(body, 200)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or "")
    return ""


def translate_error(exc: BaseException, what: str, host: str) -> KubernetesError:
    """Turn anything the client, urllib3 or asyncio raised into a one-line KubernetesError."""
    if isinstance(exc, KubernetesError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        kind = _STATUS_KINDS.get(status, "server" if status >= 500 else "unknown")
        detail = _status_message(exc.body) or str(exc.reason or "")
        return KubernetesError(kind, _one_line(f"{what}: HTTP {status} {detail}"), status)
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2, so it is tested first.
    if isinstance(exc, urllib3.exceptions.NewConnectionError | ConnectionRefusedError):
        return KubernetesError(
            "down", f"{what}: Kubernetes API at {host} is unreachable (connection refused)"
        )
    if isinstance(exc, TimeoutError | urllib3.exceptions.TimeoutError):
        return KubernetesError("timeout", f"{what}: Kubernetes API at {host} timed out")
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return KubernetesError(
            "down", _one_line(f"{what}: connection to Kubernetes API at {host} failed: {exc}")
        )
    if isinstance(exc, ValueError):
        return KubernetesError("invalid", _one_line(f"{what}: unexpected response: {exc}"))
    return KubernetesError("unknown", _one_line(f"{what}: {type(exc).__name__}: {exc}"))


def _micro_time(when: datetime) -> str:
    """Render a MicroTime the way the API server does (RFC 3339, microseconds, ``Z``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ports(spec: Mapping[str, Any]) -> tuple[ContainerPort, ...]:
    out: list[ContainerPort] = []
    for c in map(_mapping, _list(spec.get("containers"))):
        for p in map(_mapping, _list(c.get("ports"))):
            number = p.get("containerPort")
            if isinstance(number, int) and not isinstance(number, bool):
                out.append(
                    ContainerPort(str(c.get("name") or ""), str(p.get("name") or ""), number)
                )
    return tuple(out)


def _config_maps(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the ConfigMaps a pod mounts as volumes, directly or inside a projected volume."""
    names: list[str] = []
    for volume in map(_mapping, _list(spec.get("volumes"))):
        sources = [_mapping(volume.get("configMap"))] + [
            _mapping(_mapping(source).get("configMap"))
            for source in _list(_mapping(volume.get("projected")).get("sources"))
        ]
        names += [str(source["name"]) for source in sources if source.get("name")]
    return tuple(dict.fromkeys(names))


def config_map_from_dict(obj: Mapping[str, Any], namespace: str = "") -> ConfigMapData:
    """Build a :class:`ConfigMapData` from its JSON form; one without a name raises ValueError."""
    md = _mapping(obj.get("metadata"))
    name = md.get("name")
    if not name or not isinstance(name, str):
        raise ValueError("a ConfigMap without metadata.name")
    return ConfigMapData(
        namespace=str(md.get("namespace") or namespace),
        name=name,
        resource_version=str(md.get("resourceVersion") or ""),
        data={str(k): str(v) for k, v in _mapping(obj.get("data")).items()},
        binary_data={str(k): str(v) for k, v in _mapping(obj.get("binaryData")).items()},
    )


def pod_from_dict(obj: Mapping[str, Any]) -> Pod:
    """Build a :class:`Pod` from its JSON form (as listed or as sent by a watch).

    Parts of the wrong shape are read as absent; a pod without a name raises ValueError.
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"a pod must be an object, not {type(obj).__name__}")
    md = _mapping(obj.get("metadata"))
    status = _mapping(obj.get("status"))
    spec = _mapping(obj.get("spec"))
    if not md.get("name") or not isinstance(md.get("name"), str):
        raise ValueError("a pod without metadata.name")
    ready = any(
        _mapping(c).get("type") == "Ready" and _mapping(c).get("status") == "True"
        for c in _list(status.get("conditions"))
    )
    owners = tuple(
        OwnerRef(str(o.get("kind") or ""), str(o.get("name") or ""), o.get("controller") is True)
        for o in map(_mapping, _list(md.get("ownerReferences")))
        if o.get("kind") and o.get("name")
    )
    first = next((o for o in owners if o.controller), owners[0] if owners else None)
    labels = {str(k): str(v) for k, v in _mapping(md.get("labels")).items()}
    notes = {str(k): str(v) for k, v in _mapping(md.get("annotations")).items()}
    node, ip = spec.get("nodeName"), status.get("podIP")
    return Pod(
        namespace=str(md.get("namespace", "")),
        name=str(md["name"]),
        phase=str(status.get("phase") or "Unknown"),
        ready=ready,
        labels=labels,
        node=node if isinstance(node, str) else None,
        ip=ip if isinstance(ip, str) and ip else None,
        resource_version=str(md.get("resourceVersion", "")),
        owner_kind=first.kind if first else None,
        owner_name=first.name if first else None,
        uid=str(md.get("uid") or ""),
        annotations=notes,
        ports=_ports(spec),
        owners=owners,
        deleting=bool(md.get("deletionTimestamp")),
        config_maps=_config_maps(spec),
    )


# KEDA's custom resource, and how an HPA it made says so (kedacore/keda: hpa.go).
KEDA_GROUP, KEDA_VERSION, SCALED_OBJECTS = "keda.sh", "v1alpha1", "scaledobjects"
KEDA_NAME_LABEL = "scaledobject.keda.sh/name"
KEDA_PAUSED_ANNOTATIONS = ("autoscaling.keda.sh/paused-replicas", "autoscaling.keda.sh/paused")


def keda_owner(obj: Mapping[str, Any]) -> str | None:
    """Return the ScaledObject that owns an HPA (its ownerReference, else KEDA's label)."""
    md = _mapping(obj.get("metadata"))
    for ref in map(_mapping, _list(md.get("ownerReferences"))):
        api = str(ref.get("apiVersion") or "")
        if ref.get("kind") == "ScaledObject" and api.startswith(KEDA_GROUP + "/"):
            return str(ref.get("name") or "") or None
    label = _mapping(md.get("labels")).get(KEDA_NAME_LABEL)
    return str(label) if label else None


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scaled_object_from_dict(obj: Mapping[str, Any]) -> ScaledObject:
    """Read the parts of a ScaledObject tritonguard uses from its JSON form."""
    md, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
    ref = _mapping(spec.get("scaleTargetRef"))
    notes = _mapping(md.get("annotations"))
    # paused-replicas pauses at any value; paused only when it says true.
    paused = next(
        (
            f"annotation {k}={notes[k]}"
            for k in KEDA_PAUSED_ANNOTATIONS
            if k in notes and (k.endswith("-replicas") or str(notes[k]).lower() == "true")
        ),
        "",
    )
    return ScaledObject(
        namespace=str(md.get("namespace", "")),
        name=str(md.get("name", "")),
        target_kind=str(ref.get("kind") or "Deployment"),
        target_name=str(ref.get("name", "")),
        min_replica_count=_optional_int(spec.get("minReplicaCount")),
        max_replica_count=_optional_int(spec.get("maxReplicaCount")),
        paused=paused,
    )


def _hpa_from_dict(obj: Mapping[str, Any]) -> Hpa:
    md, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    return Hpa(
        namespace=str(md.get("namespace", "")),
        name=str(md.get("name", "")),
        target_kind=str(ref.get("kind", "")),
        target_name=str(ref.get("name", "")),
        min_replicas=int(spec.get("minReplicas") or 1),
        max_replicas=int(spec.get("maxReplicas") or 0),
        current_replicas=status.get("currentReplicas"),
        desired_replicas=status.get("desiredReplicas"),
        scaled_object=keda_owner(obj),
    )


# How the Deployment controller numbers its ReplicaSets (pkg/controller/deployment/util).
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _controller_name(md: Mapping[str, Any], kind: str) -> str | None:
    refs = [_mapping(o) for o in _list(md.get("ownerReferences"))]
    ref = next((o for o in refs if o.get("controller") is True), refs[0] if refs else None)
    if ref is None or ref.get("kind") != kind or not ref.get("name"):
        return None
    return str(ref["name"])


def revision_from_replicaset(obj: Mapping[str, Any]) -> Revision | None:
    """Read a Deployment's ReplicaSet as one of its revisions; None for a bare ReplicaSet."""
    md, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
    deployment = _controller_name(md, "Deployment")
    if deployment is None:
        return None
    number = str(_mapping(md.get("annotations")).get(REVISION_ANNOTATION) or "")
    return Revision(
        kind="Deployment",
        workload=deployment,
        name=str(md.get("name") or ""),
        number=int(number) if number.isdigit() else None,
        created_at=_timestamp(md.get("creationTimestamp")),
        template=_mapping(spec.get("template")),
    )


def revision_from_controller_revision(obj: Mapping[str, Any]) -> Revision | None:
    """Read a StatefulSet's ControllerRevision as one of its revisions (None: another owner).

    The StatefulSet controller stores the pod template as a patch, ``data.spec.template``.
    """
    md = _mapping(obj.get("metadata"))
    statefulset = _controller_name(md, "StatefulSet")
    if statefulset is None:
        return None
    template = dict(_mapping(_mapping(_mapping(obj.get("data")).get("spec")).get("template")))
    template.pop("$patch", None)
    number = obj.get("revision")
    return Revision(
        kind="StatefulSet",
        workload=statefulset,
        name=str(md.get("name") or ""),
        number=number if isinstance(number, int) and not isinstance(number, bool) else None,
        created_at=_timestamp(md.get("creationTimestamp")),
        template=template,
    )


# ``watch_pods``'s namespace meaning every namespace (``discovery.namespaces: ["*"]``).
ALL_NAMESPACES = "*"


def _where(namespace: str) -> str:
    return "all namespaces" if namespace == ALL_NAMESPACES else namespace


def _watch_error(resource: str, namespace: str, obj: Mapping[str, Any]) -> KubernetesError:
    """Turn a watch's ERROR event (a ``Status``) into the error it means."""
    code = obj.get("code")
    return KubernetesError(
        _STATUS_KINDS.get(int(code or 0), "server"),
        _one_line(f"watch {resource} in {_where(namespace)}: {obj.get('message', obj)}"),
        code,
    )


def _retries() -> urllib3.Retry:
    # No retry on refused connections (fail fast when the API server is down); one retry of
    # idempotent calls whose kept-alive connection was closed under them.
    return urllib3.Retry(total=2, connect=0, read=1, status=0, redirect=0, other=0)


@dataclass
class KubernetesClient(KubeApi):
    """Async façade over the official client, bound to one API server.

    Build it with :meth:`for_host` (tests, the lab, an explicit URL) or :meth:`from_environment`
    (in-cluster service account, else kubeconfig). ``timeout_s`` bounds every call.
    """

    api_client: client.ApiClient
    timeout_s: float = 10.0
    monotonic: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    # Told about every pod object skipped as malformed (the caller logs it).
    on_malformed: Callable[[str], None] | None = None
    _observed: dict[tuple[str, str], _Observed] = field(default_factory=dict, init=False)

    @classmethod
    def for_host(
        cls,
        host: str,
        *,
        token: str | None = None,
        verify_ssl: bool = True,
        timeout_s: float = 10.0,
    ) -> KubernetesClient:
        """Connect to an API server by URL (``http://127.0.0.1:PORT`` for the fake)."""
        cfg = client.Configuration()
        cfg.host = host.rstrip("/")
        cfg.verify_ssl = verify_ssl
        if token:
            cfg.api_key = {"authorization": f"Bearer {token}"}
        cfg.retries = _retries()
        return cls(client.ApiClient(cfg), timeout_s=timeout_s)

    @classmethod
    def from_environment(
        cls,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout_s: float = 10.0,
    ) -> KubernetesClient:
        """Use the pod's service account when in a cluster, else a kubeconfig file.

        Raises KubernetesError (kind ``config``) with what to fix when neither is usable.
        """
        cfg = client.Configuration()
        try:
            if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=cfg)
            else:
                config.load_kube_config(
                    config_file=kubeconfig, context=context, client_configuration=cfg
                )
        except Exception as exc:  # the loaders raise ConfigException, OSError, YAML errors...
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise KubernetesError(
                "config",
                _one_line(
                    f"cannot load Kubernetes credentials (in-cluster service account or "
                    f"kubeconfig {where}): {exc}; run inside a pod or pass --kubeconfig"
                ),
            ) from exc
        cfg.retries = _retries()
        return cls(client.ApiClient(cfg), timeout_s=timeout_s)

    @property
    def host(self) -> str:
        """URL of the API server."""
        return str(self.api_client.configuration.host)

    def close(self) -> None:
        """Release pooled connections."""
        api: Any = self.api_client
        with contextlib.suppress(Exception):
            api.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _request_timeout(self) -> tuple[float, float]:
        return (min(3.0, self.timeout_s), self.timeout_s)

    async def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        kwargs.setdefault("_request_timeout", self._request_timeout())
        try:
            # timeout_s bounds the whole call, including urllib3's one retry of an idempotent
            # request; the client's own read timeout then ends the worker thread soon after.
            return await asyncio.wait_for(
                asyncio.to_thread(fn, *args, **kwargs), timeout=self.timeout_s + 0.25
            )
        except Exception as exc:
            raise translate_error(exc, what, self.host) from exc

    def _json(self, model: Any) -> JsonObj:
        """Return the JSON form of a model returned by the client (camelCase keys)."""
        api: Any = self.api_client
        data = api.sanitize_for_serialization(model)
        return data if isinstance(data, dict) else {}

    @property
    def _apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api_client)

    @property
    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @property
    def _coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api_client)

    @property
    def _autoscaling(self) -> client.AutoscalingV2Api:
        return client.AutoscalingV2Api(self.api_client)

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api_client)

    def _scale_methods(self, kind: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
        apps = self._apps
        if kind == "Deployment":
            return apps.read_namespaced_deployment_scale, apps.patch_namespaced_deployment_scale
        if kind == "StatefulSet":
            return (
                apps.read_namespaced_stateful_set_scale,
                apps.patch_namespaced_stateful_set_scale,
            )
        raise KubernetesError("invalid", f"cannot scale a {kind!r}: use Deployment or StatefulSet")

    # -- scale and HPA ----------------------------------------------------------------------

    async def get_scale(self, kind: WorkloadKind, namespace: str, name: str) -> int:
        """Return ``spec.replicas`` of a Deployment or StatefulSet (via its scale subresource)."""
        read, _ = self._scale_methods(kind)
        scale = await self._call(f"read scale of {kind} {namespace}/{name}", read, name, namespace)
        return int(self._json(scale).get("spec", {}).get("replicas", 0))

    async def set_scale(self, kind: WorkloadKind, namespace: str, name: str, replicas: int) -> int:
        """Set ``spec.replicas`` through the scale subresource; return the replicas now set."""
        _, patch = self._scale_methods(kind)
        scale = await self._call(
            f"scale {kind} {namespace}/{name} to {replicas}",
            patch,
            name,
            namespace,
            {"spec": {"replicas": replicas}},
            _content_type=_MERGE_PATCH,
        )
        return int(self._json(scale).get("spec", {}).get("replicas", 0))

    async def find_hpa_for(self, kind: WorkloadKind, namespace: str, name: str) -> Hpa | None:
        """Return the HPA whose ``scaleTargetRef`` is this workload, or None."""
        hpas = await self._call(
            f"list HPAs in {namespace}",
            self._autoscaling.list_namespaced_horizontal_pod_autoscaler,
            namespace,
        )
        for item in self._json(hpas).get("items", []):
            hpa = _hpa_from_dict(item)
            if hpa.target_kind == kind and hpa.target_name == name:
                return hpa
        return None

    async def set_hpa_min_replicas(self, namespace: str, name: str, n: int) -> Hpa:
        """Patch an HPA's ``spec.minReplicas`` (the HPA then scales its target up to it)."""
        hpa = await self._call(
            f"set minReplicas of HPA {namespace}/{name} to {n}",
            self._autoscaling.patch_namespaced_horizontal_pod_autoscaler,
            name,
            namespace,
            {"spec": {"minReplicas": n}},
            _content_type=_MERGE_PATCH,
        )
        return _hpa_from_dict(self._json(hpa))

    async def read_hpa(self, namespace: str, name: str) -> Hpa:
        """Return one HPA by name (with the ScaledObject that owns it, if KEDA made it)."""
        hpa = await self._call(
            f"read HPA {namespace}/{name}",
            self._autoscaling.read_namespaced_horizontal_pod_autoscaler,
            name,
            namespace,
        )
        return _hpa_from_dict(self._json(hpa))

    # -- KEDA -------------------------------------------------------------------------------

    async def read_scaled_object(self, namespace: str, name: str) -> ScaledObject:
        """Return a KEDA ScaledObject (keda.sh/v1alpha1)."""
        obj = await self._call(
            f"read ScaledObject {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            KEDA_GROUP,
            KEDA_VERSION,
            namespace,
            SCALED_OBJECTS,
            name,
        )
        return scaled_object_from_dict(_mapping(obj))

    async def set_scaled_object_min(self, namespace: str, name: str, n: int | None) -> ScaledObject:
        """Merge-patch ``spec.minReplicaCount`` (None removes it: KEDA's default 0 applies)."""
        obj = await self._call(
            f"set minReplicaCount of ScaledObject {namespace}/{name} to {n}",
            self._custom.patch_namespaced_custom_object,
            KEDA_GROUP,
            KEDA_VERSION,
            namespace,
            SCALED_OBJECTS,
            name,
            {"spec": {"minReplicaCount": n}},
            _content_type=_MERGE_PATCH,
        )
        return scaled_object_from_dict(_mapping(obj))

    # -- owners -----------------------------------------------------------------------------

    async def read_pod(self, namespace: str, name: str) -> Pod:
        """Return one pod."""
        pod = await self._call(
            f"read pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace
        )
        raw = self._json(pod)
        return pod_from_dict({**raw, "metadata": {"namespace": namespace, **raw["metadata"]}})

    async def workload_of_pod(self, namespace: str, pod: str) -> Workload | None:
        """Follow a pod's owner chain to its Deployment or StatefulSet; None for any other.

        Reads the pod, and the ReplicaSet that owns it when there is one: the names come
        from ownerReferences, never from the pod's name.
        """
        found = await self.read_pod(namespace, pod)
        rs = replicaset_to_resolve(found)
        owner = await self.read_replicaset_owner(namespace, rs) if rs is not None else None
        top = workload_of(owner_chain(found, owner))
        if top is None:
            return None
        kind: WorkloadKind = "StatefulSet" if top.kind == "StatefulSet" else "Deployment"
        return Workload(kind, top.name)

    # -- pods -------------------------------------------------------------------------------

    def _pod_lister(self, namespace: str) -> Callable[..., Any]:
        """Return the call that lists (or watches) pods of a namespace, or of all of them."""
        if namespace == ALL_NAMESPACES:
            return self._core.list_pod_for_all_namespaces
        return functools.partial(self._core.list_namespaced_pod, namespace)

    async def _list_pods_rv(self, namespace: str, label_selector: str) -> tuple[list[Pod], str]:
        pods = self._json(
            await self._call(
                f"list pods in {_where(namespace)} ({label_selector or 'all'})",
                self._pod_lister(namespace),
                label_selector=label_selector or None,
            )
        )
        items: list[Pod] = []
        for raw in map(_mapping, _list(pods.get("items"))):
            md = {"namespace": namespace, **_mapping(raw.get("metadata"))}
            try:
                items.append(pod_from_dict({**raw, "metadata": md}))
            except ValueError as exc:
                self._malformed(namespace, exc)
        return items, str(pods.get("metadata", {}).get("resourceVersion", ""))

    def _malformed(self, namespace: str, exc: ValueError, kind: str = "pod") -> None:
        """Report an object that cannot be read (it is skipped, never fatal)."""
        if self.on_malformed is not None:
            self.on_malformed(
                _one_line(f"{kind}s in {namespace}: skipped a malformed {kind}: {exc}")
            )

    async def list_pods(self, namespace: str, label_selector: str = "") -> list[Pod]:
        """List the pods of a namespace that match a label selector."""
        pods, _ = await self._list_pods_rv(namespace, label_selector)
        return pods

    async def _stream_pods(
        self,
        namespace: str,
        label_selector: str,
        resource_version: str,
        timeout_s: int,
        on_open: Callable[[], None] | None = None,
        *,
        lister: Callable[..., Any] | None = None,
        resource: str = "pods",
    ) -> AsyncGenerator[JsonObj, None]:
        """Yield raw watch events from one watch request, read by a dedicated thread.

        Pods unless ``lister`` (a list call of another resource, named ``resource``) is given.
        """
        watch_call = lister if lister is not None else self._pod_lister(namespace)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()
        holder: dict[str, Any] = {}

        def put(item: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed at shutdown
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def run() -> None:
            try:
                resp: Any = watch_call(
                    label_selector=label_selector or None,
                    watch=True,
                    allow_watch_bookmarks=True,
                    resource_version=resource_version,
                    timeout_seconds=timeout_s,
                    _preload_content=False,
                    _request_timeout=(min(3.0, self.timeout_s), timeout_s + self.timeout_s),
                )
                holder["resp"] = resp
                if stop.is_set():
                    return
                status = int(getattr(resp, "status", 200))
                if not 200 <= status < 300:
                    raise ApiException(status=status, reason=resp.reason, body=resp.data)
                put(_OPENED)
                for line in iter_resp_lines(resp):
                    if stop.is_set():
                        return
                    if line:
                        put(json.loads(line))
            except BaseException as exc:
                if not stop.is_set():
                    put(_Failure(exc))
            finally:
                opened = holder.get("resp")
                if opened is not None:
                    with contextlib.suppress(Exception):
                        opened.release_conn()
                put(_END)

        threading.Thread(target=run, name=f"watch-{resource}-{namespace}", daemon=True).start()
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if item is _OPENED:
                    if on_open is not None:
                        on_open()
                    continue
                if isinstance(item, _Failure):
                    raise translate_error(
                        item.error, f"watch {resource} in {_where(namespace)}", self.host
                    )
                assert isinstance(item, dict)
                yield item
        finally:
            stop.set()
            resp = holder.get("resp")
            if resp is not None:
                # Unblocks the reading thread at once (urllib3 >= 2.3).
                with contextlib.suppress(Exception):
                    resp.shutdown()

    def watch_pods(
        self,
        namespace: str,
        label_selector: str = "",
        *,
        resource_version: str | None = None,
        watch_timeout_s: int = 300,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        on_error: Callable[[KubernetesError], None] | None = None,
        on_synced: Callable[[], None] | None = None,
    ) -> AsyncGenerator[PodEvent, None]:
        """Follow pods forever: the current ones as ADDED, then every change.

        Each watch request resumes from the last resourceVersion seen, and asks for bookmarks
        so that an idle watch still advances it. When the server says that version is too old
        (410 Gone) the pods are listed again and the differences are emitted, so no change is
        lost. While the API server is down or slow the watch retries with exponential backoff,
        reporting each failure to ``on_error``; other errors (403, 404) are raised.
        ``on_synced`` is called whenever the view is current again: after a list, and when a
        watch request is accepted. Close the iterator (``contextlib.aclosing``) to stop it
        promptly.
        """
        kind: ObjectKind[Pod, PodEvent, KubernetesError] = ObjectKind(
            list_all=lambda: self._list_pods_rv(namespace, label_selector),
            watch=lambda rv, on_open: self._stream_pods(
                namespace, label_selector, rv, watch_timeout_s, on_open=on_open
            ),
            parse=functools.partial(self._watched_pod, namespace),
            key=lambda pod: (pod.namespace, pod.name),
            version=lambda pod: pod.resource_version,
            tombstone=lambda pod: pod,
            event=lambda change, pod, _listed: PodEvent(change, pod),
            watch_error=functools.partial(_watch_error, "pods", namespace),
            errors=KubernetesError,
            retryable=lambda err: err.retryable,
        )
        return reflect(
            kind,
            resource_version=resource_version,
            initial_backoff_s=initial_backoff_s,
            max_backoff_s=max_backoff_s,
            on_error=on_error,
            on_synced=on_synced,
        )

    def _watched_pod(self, namespace: str, obj: Mapping[str, Any]) -> Pod | None:
        """Read a pod a watch sent (None, reported, when it cannot be read)."""
        try:
            return pod_from_dict(
                {**obj, "metadata": {"namespace": namespace, **obj.get("metadata", {})}}
            )
        except (ValueError, TypeError, AttributeError) as exc:
            self._malformed(namespace, ValueError(str(exc)))
            return None

    async def read_replicaset_owner(self, namespace: str, name: str) -> OwnerRef | None:
        """Return the controller of a ReplicaSet (its Deployment), or None when it has none."""
        rs = await self._call(
            f"read ReplicaSet {namespace}/{name}",
            self._apps.read_namespaced_replica_set,
            name,
            namespace,
        )
        refs = [
            _mapping(o)
            for o in _list(_mapping(self._json(rs).get("metadata")).get("ownerReferences"))
        ]
        ref = next((o for o in refs if o.get("controller") is True), refs[0] if refs else None)
        if ref is None or not ref.get("kind") or not ref.get("name"):
            return None
        return OwnerRef(str(ref["kind"]), str(ref["name"]), ref.get("controller") is True)

    async def list_revisions(self, namespace: str, kind: str, workload: str) -> list[Revision]:
        """Return a Deployment's ReplicaSets or a StatefulSet's ControllerRevisions, as revisions.

        The API keeps as many as the workload's ``revisionHistoryLimit`` (10 by default), so
        the revision before a rollout is there to compare with.
        """
        listed: Any
        if kind == "Deployment":
            listed = await self._call(
                f"list ReplicaSets in {namespace}",
                self._apps.list_namespaced_replica_set,
                namespace,
            )
            parse = revision_from_replicaset
        elif kind == "StatefulSet":
            listed = await self._call(
                f"list ControllerRevisions in {namespace}",
                self._apps.list_namespaced_controller_revision,
                namespace,
            )
            parse = revision_from_controller_revision
        else:
            return []
        out: list[Revision] = []
        for item in map(_mapping, _list(self._json(listed).get("items"))):
            revision = parse(item)
            if revision is not None and revision.workload == workload:
                out.append(revision)
        return out

    # -- config maps ------------------------------------------------------------------------

    def _config_map_lister(self, namespace: str) -> Callable[..., Any]:
        """Return the call that lists (or watches) ConfigMaps of a namespace, or of all."""
        if namespace == ALL_NAMESPACES:
            return self._core.list_config_map_for_all_namespaces
        return functools.partial(self._core.list_namespaced_config_map, namespace)

    async def read_config_map(self, namespace: str, name: str) -> ConfigMapData:
        """Return one ConfigMap's resourceVersion and data (binaryData as its base64 text)."""
        cm = await self._call(
            f"read ConfigMap {namespace}/{name}",
            self._core.read_namespaced_config_map,
            name,
            namespace,
        )
        try:
            return config_map_from_dict(self._json(cm), namespace)
        except ValueError as exc:
            raise KubernetesError("invalid", f"read ConfigMap {namespace}/{name}: {exc}") from None

    async def _list_config_maps_rv(
        self, namespace: str, keep: Callable[[str, str], bool] | None = None
    ) -> tuple[list[ConfigMapData], str]:
        """List a namespace's ConfigMaps (or all namespaces') page by page, keeping ``keep``'s.

        A ConfigMap holds up to 1 MiB and a namespace thousands of them: one response of all
        would be held whole in memory. Pages of ``CONFIG_MAP_PAGE`` are read, and of each only
        the ConfigMaps ``keep(namespace, name)`` wants (those a target pod mounts) stay.
        """
        items: list[ConfigMapData] = []
        token: str | None = None
        rv = ""
        while True:
            listed = self._json(
                await self._call(
                    f"list ConfigMaps in {_where(namespace)}",
                    self._config_map_lister(namespace),
                    limit=CONFIG_MAP_PAGE,
                    _continue=token,
                )
            )
            metadata = _mapping(listed.get("metadata"))
            # Every page keeps the first one's resourceVersion; the watch resumes from it.
            rv = rv or str(metadata.get("resourceVersion") or "")
            for raw in map(_mapping, _list(listed.pop("items", None))):
                md = _mapping(raw.get("metadata"))
                name = str(md.get("name") or "")
                if keep is not None and not keep(str(md.get("namespace") or namespace), name):
                    continue
                try:
                    items.append(config_map_from_dict(raw, namespace))
                except ValueError as exc:
                    self._malformed(namespace, exc, "ConfigMap")
            token = str(metadata.get("continue") or "") or None
            if token is None:
                return items, rv

    def watch_config_maps(
        self,
        namespace: str,
        *,
        watch_timeout_s: int = 300,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        on_error: Callable[[KubernetesError], None] | None = None,
        on_synced: Callable[[], None] | None = None,
        keep: Callable[[str, str], bool] | None = None,
    ) -> AsyncGenerator[ConfigMapEvent, None]:
        """Follow a namespace's ConfigMaps forever, as :meth:`watch_pods` follows pods.

        The current ones come as ADDED (``listed``), then every change from the list's
        resourceVersion, with bookmarks; 410 Gone relists and emits what differs (``listed``
        again); the API server away means backoff and ``on_error``; 403 and 404 are raised.
        With ``keep``, a list holds and tells only the ConfigMaps ``keep(namespace, name)``
        wants (asked at each list); the watch still tells every change.
        """
        kind: ObjectKind[ConfigMapData, ConfigMapEvent, KubernetesError] = ObjectKind(
            list_all=lambda: self._list_config_maps_rv(namespace, keep),
            watch=lambda rv, on_open: self._stream_pods(
                namespace,
                "",
                rv,
                watch_timeout_s,
                on_open=on_open,
                lister=self._config_map_lister(namespace),
                resource="configmaps",
            ),
            parse=functools.partial(self._watched_config_map, namespace),
            key=lambda cm: (cm.namespace, cm.name),
            version=lambda cm: cm.resource_version,
            # Only its name is kept (a ConfigMap holds up to 1 MiB), and told when it is gone.
            tombstone=lambda cm: ConfigMapData(cm.namespace, cm.name, ""),
            event=ConfigMapEvent,
            watch_error=functools.partial(_watch_error, "configmaps", namespace),
            errors=KubernetesError,
            retryable=lambda err: err.retryable,
        )
        return reflect(
            kind,
            initial_backoff_s=initial_backoff_s,
            max_backoff_s=max_backoff_s,
            on_error=on_error,
            on_synced=on_synced,
        )

    def _watched_config_map(self, namespace: str, obj: Mapping[str, Any]) -> ConfigMapData | None:
        """Read a ConfigMap a watch sent (None, reported, when it cannot be read)."""
        try:
            return config_map_from_dict(obj, namespace)
        except ValueError as exc:
            self._malformed(namespace, exc, "ConfigMap")
            return None

    # -- events -----------------------------------------------------------------------------

    async def uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        """Return the uid of a Pod, Deployment, StatefulSet or HPA (None for other kinds)."""
        return await self._uid_of(kind, namespace, name)

    async def create_event_v1(self, namespace: str, body: Mapping[str, Any]) -> JsonObj:
        """Create an events.k8s.io/v1 Event; return it as stored (its name is generated).

        Sent through the generic object API: the typed model would re-render ``eventTime``
        with ``isoformat``, which drops the fraction when the microseconds are 0, and the
        server parses a MicroTime with exactly six digits (RFC 3339 micro), so it would
        refuse that Event with a 400.
        """
        regarding = _mapping(body.get("regarding"))
        event = await self._call(
            f"record event {body.get('reason')} on {regarding.get('kind')} "
            f"{namespace}/{regarding.get('name')}",
            self._custom.create_namespaced_custom_object,
            _EVENTS_GROUP,
            "v1",
            namespace,
            "events",
            dict(body),
        )
        return dict(_mapping(event))

    async def patch_event_series(
        self, namespace: str, name: str, count: int, last_observed: datetime
    ) -> JsonObj:
        """Record repeats of an Event: ``series.count`` and ``series.lastObservedTime``."""
        event = await self._call(
            f"update event {namespace}/{name} (x{count})",
            self._custom.patch_namespaced_custom_object,
            _EVENTS_GROUP,
            "v1",
            namespace,
            "events",
            name,
            {"series": {"count": count, "lastObservedTime": _micro_time(last_observed)}},
            _content_type=_MERGE_PATCH,
        )
        return dict(_mapping(event))

    async def _uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        readers: dict[str, Callable[..., Any]] = {
            "Deployment": self._apps.read_namespaced_deployment,
            "StatefulSet": self._apps.read_namespaced_stateful_set,
            "Pod": self._core.read_namespaced_pod,
            "HorizontalPodAutoscaler": self._autoscaling.read_namespaced_horizontal_pod_autoscaler,
        }
        reader = readers.get(kind)
        if reader is None:
            return None
        obj = await self._call(f"read {kind} {namespace}/{name}", reader, name, namespace)
        uid = self._json(obj).get("metadata", {}).get("uid")
        return str(uid) if uid else None

    # -- leader election --------------------------------------------------------------------

    async def read_lease(self, namespace: str, name: str) -> JsonObj | None:
        """Return the Lease as a dict, or None when it does not exist."""
        return await self._read_lease(namespace, name)

    async def _read_lease(self, namespace: str, name: str) -> JsonObj | None:
        try:
            lease = await self._call(
                f"read lease {namespace}/{name}",
                self._coordination.read_namespaced_lease,
                name,
                namespace,
            )
        except KubernetesError as err:
            if err.kind == "not_found":
                return None
            raise
        return self._json(lease)

    def _expired(self, namespace: str, name: str, lease: JsonObj) -> bool:
        """Expiry by local observation: unchanged for leaseDurationSeconds since first seen."""
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            return True
        rv = str(lease.get("metadata", {}).get("resourceVersion", ""))
        now = self.monotonic()
        seen = self._observed.get((namespace, name))
        if seen is None or seen.resource_version != rv:
            self._observed[(namespace, name)] = _Observed(rv, now)
            return False
        return now - seen.at > float(spec.get("leaseDurationSeconds") or 0)

    async def _write_lease(  # noqa: PLR0917 - the lease, who writes it, and what
        self,
        namespace: str,
        name: str,
        lease: JsonObj | None,
        holder: str,
        duration_s: int,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        now = _micro_time(self.wall_clock())
        spec = (lease or {}).get("spec") or {}
        taking_over = spec.get("holderIdentity") != holder
        new_spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_s,
            "acquireTime": now if taking_over else spec.get("acquireTime", now),
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0)
            + (1 if taking_over and lease is not None else 0),
        }
        metadata = dict((lease or {}).get("metadata") or {"name": name, "namespace": namespace})
        if annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
        try:
            if lease is None:
                body = client.V1Lease.from_dict({"metadata": metadata, "spec": new_spec})
                written = await self._call(
                    f"create lease {namespace}/{name}",
                    self._coordination.create_namespaced_lease,
                    namespace,
                    body,
                )
            else:
                body = client.V1Lease.from_dict({**lease, "metadata": metadata, "spec": new_spec})
                written = await self._call(
                    f"update lease {namespace}/{name}",
                    self._coordination.replace_namespaced_lease,
                    name,
                    namespace,
                    body,
                )
        except KubernetesError as err:
            if err.kind == "conflict":
                return False  # someone else wrote first; they win this round
            raise
        rv = str(self._json(written).get("metadata", {}).get("resourceVersion", ""))
        self._observed[(namespace, name)] = _Observed(rv, self.monotonic())
        return True

    async def try_acquire_lease(
        self,
        namespace: str,
        name: str,
        holder: str,
        duration_s: int,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        """Become (or stay) the holder of a coordination.k8s.io/v1 Lease; True on success.

        Creates the lease when missing, renews it when already held by ``holder``, takes it
        over when its holder let it expire, and returns False when another live holder has
        it or another replica won a race (409).
        """
        lease = await self._read_lease(namespace, name)
        if lease is None:
            return await self._write_lease(namespace, name, None, holder, duration_s, annotations)
        current = (lease.get("spec") or {}).get("holderIdentity")
        if current != holder and not self._expired(namespace, name, lease):
            return False
        return await self._write_lease(namespace, name, lease, holder, duration_s, annotations)

    async def renew_lease(
        self,
        namespace: str,
        name: str,
        holder: str,
        duration_s: int,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        """Renew a lease ``holder`` holds; False when it is lost (another holder, or deleted).

        ``annotations`` are merged into the lease's metadata in the same write.
        """
        lease = await self._read_lease(namespace, name)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != holder:
            return False
        return await self._write_lease(namespace, name, lease, holder, duration_s, annotations)

    async def release_lease(self, namespace: str, name: str, holder: str) -> bool:
        """Give a held lease up at shutdown so another replica can lead at once."""
        lease = await self._read_lease(namespace, name)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != holder:
            return False
        spec = {**(lease.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1}
        try:
            await self._call(
                f"release lease {namespace}/{name}",
                self._coordination.replace_namespaced_lease,
                name,
                namespace,
                client.V1Lease.from_dict({**lease, "spec": spec}),
            )
        except KubernetesError as err:
            if err.kind == "conflict":
                return False
            raise
        return True
