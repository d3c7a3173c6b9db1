"""deploy/components/config-maps: the opt-in grant that lets discovery name ConfigMap changes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.unit.test_deploy_all_namespaces import DISCOVERY_CALLS
from tests.unit.test_deploy_manifests import (
    CONFIG_MAP_CALLS,
    DEPLOY,
    K8S_VERSION,
    _calls_in_client,
    _effective_settings,
    _render,
)

COMPONENT = DEPLOY / "components" / "config-maps"


def _with_component(tmp_path: Path, *components: Path) -> list[dict[str, Any]]:
    """Render the base and deploy/namespace with ``components``, as a user's overlay would."""
    here = tmp_path / "overlay"
    here.mkdir()
    # kustomize takes directories outside its root only by relative path.
    rel = [os.path.relpath(p, here) for p in (DEPLOY / "base", DEPLOY / "namespace")]
    parts = [os.path.relpath(p, here) for p in components]
    (here / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: {rel}\ncomponents: {parts}\n"
    )
    return _render(here)


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_component_grants_what_config_map_watching_calls_and_turns_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With it the Roles grant exactly what the client calls, in both directions.

    Discovery's Role in each watched namespace gains configmaps get/list/watch and nothing
    else; every object validates; the daemon's effective settings watch ConfigMaps, which
    the shipped deploy leaves off.
    """
    objects = _with_component(tmp_path, COMPONENT)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    granted = set().union(*(_grants(o) for o in objects if o["kind"] == "Role"))
    called = _calls_in_client()
    assert called >= CONFIG_MAP_CALLS
    assert sorted(called - granted) == []
    assert sorted(granted - called) == []
    [discovery] = [
        o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == "tritonguard-discovery"
    ]
    assert _grants(discovery) == DISCOVERY_CALLS | CONFIG_MAP_CALLS
    assert _effective_settings(objects, tmp_path, monkeypatch).discovery.watch_config_maps
    shipped = _render(DEPLOY)
    assert not _effective_settings(shipped, tmp_path, monkeypatch).discovery.watch_config_maps


def test_after_all_namespaces_the_grant_goes_to_the_cluster_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed after the all-namespaces component, the ClusterRole gains the ConfigMap verbs."""
    objects = _with_component(tmp_path, DEPLOY / "components" / "all-namespaces", COMPONENT)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    [cluster_role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert _grants(cluster_role) == DISCOVERY_CALLS | CONFIG_MAP_CALLS
    assert not [
        o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == "tritonguard-discovery"
    ]
    settings = _effective_settings(objects, tmp_path, monkeypatch).discovery
    assert settings.all_namespaces and settings.watch_config_maps
