"""URL routing: discovery, and the collection, object and subresource paths of each resource."""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.kube import discovery, events_v1
from tests.fakes.kube.controllers import Controllers
from tests.fakes.kube.errors import (
    ApiError,
    method_not_allowed,
    no_such_path,
    require_fresh,
    require_object,
)
from tests.fakes.kube.middleware import RequestLog, body_of
from tests.fakes.kube.patches import apply_patch
from tests.fakes.kube.resources import (
    BY_PATH,
    EVENTS,
    EVENTS_V1,
    GROUP_VERSIONS,
    PODS,
    JsonObj,
    ResourceType,
)
from tests.fakes.kube.scale import requested_replicas, scale_of
from tests.fakes.kube.selectors import matcher
from tests.fakes.kube.store import Store
from tests.fakes.kube.tables import table, wants_table
from tests.fakes.kube.watch import serve_watch


def _check_body(rtype: ResourceType, ns: str, body: Any, name: str | None) -> JsonObj:
    """Return the body of a create or replace if it agrees with the URL, else raise 400."""
    obj = require_object(body)
    md = obj.get("metadata") or {}
    if rtype.namespaced and md.get("namespace") and md["namespace"] != ns:
        raise ApiError(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    if name is not None and md.get("name") and md["name"] != name:
        raise ApiError(
            400,
            "BadRequest",
            f"the name of the object ({md['name']}) does not match the name on the URL ({name})",
        )
    if obj.get("kind") and obj["kind"] != rtype.kind:
        raise ApiError(
            400,
            "BadRequest",
            f"{rtype.plural} in version {rtype.version!r} cannot be handled as a "
            f"{rtype.kind}: kind {obj['kind']!r} does not match",
        )
    return obj


def _continue_token(rv: str, start: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": start}).encode()).decode()


def _page_of(request: web.Request) -> tuple[int, int, str]:
    """Return a list request's ``limit`` (0: all), its resume point and its resourceVersion.

    The resume point and resourceVersion come from the ``continue`` token the fake issued
    with the page before; a token it did not issue is the real server's 400.
    """
    q = request.query
    try:
        limit = max(0, int(q.get("limit") or 0))
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid limit {q.get('limit')!r}") from None
    token = q.get("continue", "")
    if not token:
        return limit, 0, ""
    try:
        parsed = json.loads(base64.urlsafe_b64decode(token.encode()))
        return limit, int(parsed["start"]), str(parsed["rv"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise ApiError(400, "BadRequest", "continue key is not valid") from None


def _printed(request: web.Request, rtype: ResourceType, objs: list[JsonObj], rv: str) -> JsonObj:
    return table(rtype, objs, rv, request.query.get("includeObject", "Metadata"))


class Routes:
    """Answers every URL of the API from the store; ``address`` is ``host:port`` once bound."""

    def __init__(
        self, store: Store, controllers: Controllers, log: RequestLog, address: Callable[[], str]
    ) -> None:
        self.store = store
        self.controllers = controllers
        self.log = log
        self.address = address

    def app(self) -> web.Application:
        """Build the aiohttp application: one catch-all route, behind the request log."""
        app = web.Application(middlewares=[self.log.middleware], client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """Route by path: health and discovery here, resources to :meth:`resources`."""
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return web.json_response(discovery.root_paths())
        if parts[0] in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        if parts == ["version"]:
            return web.json_response(discovery.SERVER_VERSION)
        if parts[0] == "api":
            if len(parts) == 1:
                return web.json_response(discovery.api_versions(self.address()))
            return await self.resources(request, "", parts[1], parts[2:])
        if parts[0] == "apis":
            if len(parts) == 1:
                return web.json_response(discovery.group_list())
            if len(parts) == 2:
                if parts[1] not in GROUP_VERSIONS:
                    raise no_such_path()
                return web.json_response(discovery.api_group(parts[1]))
            return await self.resources(request, parts[1], parts[2], parts[3:])
        raise no_such_path()

    async def resources(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        """Route ``[namespaces/<ns>/]<plural>[/<name>[/<subresource>]]`` in a group version."""
        if not discovery.serves(group, version):
            raise no_such_path()
        if not rest:
            if request.method != "GET":
                raise method_not_allowed()
            return web.json_response(discovery.resource_list(group, version))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rtype = BY_PATH.get((group, version, rest[0]))
        if rtype is None:
            raise no_such_path()
        if rtype.namespaced and namespace is None and len(rest) > 1:
            raise no_such_path()
        if rtype is EVENTS_V1:
            if len(rest) > 2:
                raise no_such_path()
            return self.serve_events_v1(request, namespace, rest[1] if len(rest) > 1 else None)
        if len(rest) == 1:
            return await self.serve_collection(request, rtype, namespace)
        name = rest[1]
        sub = rest[2] if len(rest) > 2 else None
        ns = namespace or ""
        if sub == "scale":
            if not rtype.scalable:
                raise no_such_path()
            return self.serve_scale(request, rtype, ns, name)
        if sub not in (None, "status"):
            raise no_such_path()
        return self.serve_object(request, rtype, ns, name, status=sub == "status")

    async def serve_collection(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        """List, watch or create objects of a type (in one namespace, or in all)."""
        method = request.method
        if method == "GET" and request.query.get("watch") in ("true", "1"):
            return await serve_watch(
                request,
                self.store,
                rtype,
                self._match(request, namespace),
                lambda r: self.log.log_now(r, 200),
            )
        if method == "GET":
            return self.serve_list(request, rtype, namespace)
        if method == "POST":
            ns = namespace or ""
            obj = _check_body(rtype, ns, body_of(request), None)
            with self.store.lock:
                created = self.store.create(rtype, ns, copy.deepcopy(obj))
                name = created["metadata"]["name"]
                self.controllers.after_write(rtype, ns, name)
                out = self.store.get(rtype, ns, name) or created
            return web.json_response(out, status=201)
        raise method_not_allowed()

    @staticmethod
    def _match(request: web.Request, namespace: str | None) -> Callable[[JsonObj], bool]:
        q = request.query
        return matcher(namespace, q.get("labelSelector", ""), q.get("fieldSelector", ""))

    def serve_list(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        """Answer with a ``<Kind>List`` (or a Table) of the objects the request selects."""
        match = self._match(request, namespace)
        limit, start, snapshot = _page_of(request)
        with self.store.lock:
            items = self.store.select(rtype, match)
            rv = snapshot or str(self.store.rv)
        if wants_table(request.headers.get("Accept", "")):
            return web.json_response(_printed(request, rtype, items, rv))
        metadata: JsonObj = {"resourceVersion": rv}
        if limit:
            # Chunked as the real server chunks: a page, and a token for the rest that keeps
            # the first page's resourceVersion. (The fake keeps no snapshot: objects changed
            # meanwhile show in later pages as they are now.)
            rest = len(items) - start - limit
            items = items[start : start + limit]
            if rest > 0:
                metadata["continue"] = _continue_token(rv, start + limit)
                metadata["remainingItemCount"] = rest
        for item in items:
            # Items in a list carry no kind/apiVersion, as on the real server.
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return web.json_response(
            {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": metadata,
                "items": items,
            }
        )

    def serve_object(
        self, request: web.Request, rtype: ResourceType, ns: str, name: str, *, status: bool
    ) -> web.StreamResponse:
        """Get, delete, replace or patch one object, or (``status``) its status subresource."""
        method = request.method
        store = self.store
        with store.lock:
            if method == "GET":
                obj = store.require(rtype, ns, name)
                if wants_table(request.headers.get("Accept", "")):
                    obj = _printed(request, rtype, [obj], obj["metadata"]["resourceVersion"])
                return web.json_response(obj)
            if method == "DELETE":
                store.require(rtype, ns, name)
                gone = store.delete(rtype, ns, name)
                if rtype is PODS:
                    self.controllers.pod_deleted(ns, gone)
                return web.json_response(gone)
            current = store.require(rtype, ns, name)
            if method == "PUT":
                new = copy.deepcopy(_check_body(rtype, ns, body_of(request), name))
                require_fresh(current, new, rtype, name)
            elif method == "PATCH":
                content_type = request.headers.get("Content-Type", "")
                new = apply_patch(content_type, current, body_of(request))
            else:
                raise method_not_allowed()
            new.setdefault("metadata", {})["name"] = name
            if status:
                new = {**current, "status": new.get("status", current.get("status"))}
            elif rtype.status_via_subresource and "status" in current:
                # The main resource ignores status changes, as the real server does.
                new["status"] = current["status"]
            store.update(rtype, ns, new)
            self.controllers.after_write(rtype, ns, name)
            return web.json_response(store.objects[(rtype.key, ns, name)])

    def serve_scale(
        self, request: web.Request, rtype: ResourceType, ns: str, name: str
    ) -> web.StreamResponse:
        """Get, replace or patch a workload's ``scale`` subresource."""
        with self.store.lock:
            wl = self.store.require(rtype, ns, name)
            scale = scale_of(wl)
            if request.method == "GET":
                return web.json_response(scale)
            if request.method == "PUT":
                new_scale = require_object(body_of(request))
                require_fresh(wl, new_scale, rtype, name)
            elif request.method == "PATCH":
                content_type = request.headers.get("Content-Type", "")
                new_scale = apply_patch(content_type, scale, body_of(request))
            else:
                raise method_not_allowed()
            replicas = requested_replicas(name, new_scale)
            if replicas != wl["spec"].get("replicas"):
                wl["spec"]["replicas"] = replicas
                self.store.update(rtype, ns, wl)
                self.controllers.reconcile(rtype, ns, name)
            stored = self.store.objects[(rtype.key, ns, name)]
            return web.json_response(scale_of(stored))

    def serve_events_v1(
        self, request: web.Request, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        """List, create, get or patch Events as events.k8s.io/v1 (stored as core/v1 Events)."""
        method, store, ns = request.method, self.store, namespace or ""
        table_wanted = wants_table(request.headers.get("Accept", ""))
        if name is None and method == "GET":
            q = request.query
            match = matcher(
                namespace,
                q.get("labelSelector", ""),
                events_v1.core_field_selector(q.get("fieldSelector", "")),
            )
            with store.lock:
                items = [events_v1.from_core(o) for o in store.select(EVENTS, match)]
                rv = str(store.rv)
            if table_wanted:
                return web.json_response(_printed(request, EVENTS_V1, items, rv))
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
            return web.json_response(
                {
                    "kind": "EventList",
                    "apiVersion": EVENTS_V1.api_version,
                    "metadata": {"resourceVersion": rv},
                    "items": items,
                }
            )
        if name is None and method == "POST":
            obj = _check_body(EVENTS_V1, ns, body_of(request), None)
            events_v1.validate_create(obj, ns)
            with store.lock:
                created = store.create(EVENTS, ns, events_v1.to_core(obj))
            return web.json_response(events_v1.from_core(created), status=201)
        if name is None:
            raise method_not_allowed()
        with store.lock:
            current = store.require(EVENTS, ns, name)
            old = events_v1.from_core(current)
            if method == "GET":
                return web.json_response(old)
            if method == "DELETE":
                return web.json_response(events_v1.from_core(store.delete(EVENTS, ns, name)))
            if method == "PUT":
                new = copy.deepcopy(_check_body(EVENTS_V1, ns, body_of(request), name))
                require_fresh(current, new, EVENTS_V1, name)
            elif method == "PATCH":
                new = apply_patch(request.headers.get("Content-Type", ""), old, body_of(request))
            else:
                raise method_not_allowed()
            events_v1.validate_update(new, old)
            core = events_v1.to_core(new)
            core["metadata"] = {**current["metadata"], **(new.get("metadata") or {}), "name": name}
            stored = store.update(EVENTS, ns, core)
            return web.json_response(events_v1.from_core(stored))
