"""Discovery documents: ``/version``, ``/api``, ``/apis`` and each group version's resources."""

from __future__ import annotations

from tests.fakes.kube.resources import GROUP_VERSIONS, RESOURCES, JsonObj

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

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def root_paths() -> JsonObj:
    """Return the body of ``GET /``."""
    return {
        "paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]
        + [f"/apis/{g}/{v}" for g, vs in GROUP_VERSIONS.items() for v in vs]
    }


def api_versions(address: str) -> JsonObj:
    """Return the body of ``GET /api``: the core versions, reachable at ``address``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(group: str) -> JsonObj:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in GROUP_VERSIONS[group]]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def group_list() -> JsonObj:
    """Return the body of ``GET /apis``."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g) for g in GROUP_VERSIONS],
    }


def api_group(group: str) -> JsonObj:
    """Return the body of ``GET /apis/<group>`` (the group must be served)."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group)}


def resource_list(group: str, version: str) -> JsonObj:
    """Return the ``APIResourceList`` of a group version, subresources included."""
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


def serves(group: str, version: str) -> bool:
    """Tell whether the fake serves ``group/version`` (the core group only as ``v1``)."""
    return version in GROUP_VERSIONS.get(group, []) if group else version == "v1"
