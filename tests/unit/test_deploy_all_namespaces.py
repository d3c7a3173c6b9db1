"""deploy/overlays/all-namespaces: discovery everywhere through a read-only ClusterRole."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.unit.test_deploy_manifests import (
    DEPLOY,
    K8S_VERSION,
    _calls_in_client,
    _effective_settings,
    _render,
)

# What discovery calls (the rest of the client's calls are the actions', granted per namespace).
DISCOVERY_CALLS = {
    ("", "pods", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("apps", "replicasets", "get"),
    ("apps", "replicasets", "list"),
    ("apps", "controllerrevisions", "list"),
}


def test_all_namespaces_watches_everywhere_with_a_read_only_cluster_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlay renders and validates; discovery's grants move to one ClusterRole.

    The ClusterRole grants exactly what discovery calls, reads no Secret or ConfigMap and
    writes nothing; no namespaced discovery Role is left; the actions Role stays in its
    namespace; and the daemon's effective settings watch every namespace.
    """
    objects = _render(DEPLOY / "overlays" / "all-namespaces")
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    [cluster_role] = [o for o in objects if o["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in cluster_role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == DISCOVERY_CALLS
    assert granted <= _calls_in_client()
    [binding] = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    roles = {
        (o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in objects
        if o["kind"] == "Role"
    }
    assert ("tritonguard-discovery", "ml") not in roles
    assert ("tritonguard-actions", "ml") in roles
    settings = _effective_settings(objects, tmp_path, monkeypatch)
    assert settings.discovery.namespaces == ["*"] and settings.discovery.all_namespaces
