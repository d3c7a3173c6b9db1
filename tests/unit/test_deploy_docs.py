"""docs/deploy.md: its overlay, Argo CD and Flux examples name directories that exist and render."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "deploy.md"
K8S_VERSION = "1.31.0"


def _examples() -> list[dict[str, Any]]:
    """Every YAML document in the page's ```yaml blocks."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [d for block in blocks for d in yaml.safe_load_all(block) if d]


def _kinds(kind: str) -> list[dict[str, Any]]:
    return [d for d in _examples() if d.get("kind") == kind]


def _kustomization_dir(path: str) -> Path:
    directory = ROOT / path.removeprefix("./")
    assert (directory / "kustomization.yaml").is_file(), f"{path} is no kustomization"
    return directory


def test_argo_cd_applications_point_at_kustomizations() -> None:
    """Each Application's source path is a kustomization in the repository."""
    applications = [d for d in _kinds("Application") if d["apiVersion"].startswith("argoproj")]
    assert {a["spec"]["source"]["path"] for a in applications} == {
        "deploy/overlays/dry-run",
        "deploy/monitoring",
    }
    for application in applications:
        _kustomization_dir(application["spec"]["source"]["path"])


def test_flux_kustomizations_point_at_kustomizations_and_their_source() -> None:
    """Each Flux Kustomization's path exists; sources and dependencies name defined objects."""
    flux = [d for d in _kinds("Kustomization") if d["apiVersion"].startswith("kustomize.toolkit")]
    assert len(flux) == 3
    sources = {s["metadata"]["name"] for s in _kinds("GitRepository")}
    names = {k["metadata"]["name"] for k in flux}
    for kustomization in flux:
        spec = kustomization["spec"]
        _kustomization_dir(spec["path"])
        assert spec["sourceRef"] == {"kind": "GitRepository", "name": "tritonguard"}
        assert spec["sourceRef"]["name"] in sources
        assert {d["name"] for d in spec.get("dependsOn", [])} <= names
    assert {_kustomization_dir(k["spec"]["path"]).name for k in flux} == {
        "dry-run",
        "monitoring",
        "grafana",
    }


def test_the_own_overlay_example_renders_daemon_dashboard_and_alerts(tmp_path: Path) -> None:
    """The page's overlay of its own, placed in a cluster repository, renders and validates.

    It combines an overlay with deploy/grafana and deploy/monitoring (no clashing objects)
    and moves the image to the named registry.
    """
    (example,) = [
        d
        for d in _kinds("Kustomization")
        if d["apiVersion"].startswith("kustomize.config")
        and any("deploy/grafana" in r for r in d["resources"])
    ]
    overlay = tmp_path / "clusters" / "prod" / "tritonguard"
    overlay.mkdir(parents=True)
    deploy = os.path.relpath(ROOT / "deploy", overlay)
    example["resources"] = [r.replace("../../../deploy", deploy) for r in example["resources"]]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(example))
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; run `make system-deps`")
    out = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    objects = [d for d in yaml.safe_load_all(out) if d]
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "PrometheusRule", "ConfigMap", "Role"} <= kinds
    for obj in objects:
        if obj["kind"] != "PrometheusRule":  # a CRD: promtool checks it (test_monitoring_rules)
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/platform/tritonguard:0.1.0"
    dashboards = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard")
    ]
    assert [d["metadata"]["name"] for d in dashboards] == ["tritonguard-dashboard"]
