"""deploy/base: each pod knows its own address, so the leader can publish it on its Lease."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonguard.settings import load_settings, split_listen

DEPLOY = Path(__file__).parents[2] / "deploy"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """Render deploy/ with kubectl kustomize."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; run `make system-deps`")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_the_leader_advertises_the_pod_ip_on_the_port_the_service_targets(
    objects: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POD_IP comes from the downward API; with the shipped config it gives the http port.

    That is where followers forward Alertmanager's posts: the container port the Service's
    targetPort names, on which the daemon listens.
    """
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert "TRITONGUARD_KUBE__ADVERTISE_URL" not in env
    (config_map,) = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("tritonguard-config")
    ]
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    monkeypatch.setenv("POD_IP", "10.42.0.17")
    settings = load_settings(config)
    _, port = split_listen(settings.listen)
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "tritonguard"
    ]
    (http,) = [
        p for p in container["ports"] if p["name"] == service["spec"]["ports"][0]["targetPort"]
    ]
    assert http["containerPort"] == port
    assert settings.kube.leader_election
    assert settings.kube.advertised_url(port) == f"http://10.42.0.17:{port}"
