"""deploy/: the webhook token reaches the daemon from a Secret; Alertmanager's example matches."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tritonguard.runtime.alert_book import DEFAULT_TTL_S
from tritonguard.runtime.alertmanager_webhook import WEBHOOK_PATH
from tritonguard.settings import load_settings

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
EXAMPLE = DEPLOY / "examples" / "alertmanager.yaml"


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


def _of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _duration_s(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def test_the_daemon_reads_its_token_from_the_mounted_secret(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """api.token_file is the file the tritonguard-api Secret's `token` key is mounted as.

    The mount is read-only and not world-readable, the Secret is required, and no Secret
    (no token) ships with the manifests.
    """
    (config_map,) = [
        o
        for o in _of_kind(objects, "ConfigMap")
        if o["metadata"]["name"].startswith("tritonguard-config")
    ]
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    token_file = load_settings(config).api.token_file
    assert token_file is not None
    token_path = PurePosixPath(str(token_file))

    (deployment,) = _of_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"] if "secret" in v}
    (name,) = [n for n in volumes if PurePosixPath(mounts[n]["mountPath"]) == token_path.parent]
    secret = volumes[name]["secret"]
    assert secret["secretName"] == "tritonguard-api"
    assert secret.get("optional", False) is False
    assert {"key": "token", "path": token_path.name} in secret["items"]
    assert secret["defaultMode"] & 0o007 == 0
    assert mounts[name]["readOnly"] is True
    assert _of_kind(objects, "Secret") == []


def test_the_alertmanager_example_is_valid_and_posts_to_the_service_with_the_token(
    objects: list[dict[str, Any]],
) -> None:
    """The example passes amtool; its receiver posts to the Service with a Bearer token file.

    It also sends resolutions (they disarm playbooks) and repeats firing alerts more often
    than the daemon forgets them.
    """
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail("amtool is not installed; run `make system-deps`")
    checked = subprocess.run(
        [amtool, "check-config", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    config = yaml.safe_load(EXAMPLE.read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "tritonguard"]
    (hook,) = receiver["webhook_configs"]
    (service,) = _of_kind(objects, "Service")
    port = service["spec"]["ports"][0]["port"]
    namespace = service["metadata"]["namespace"]
    assert (
        hook["url"] == f"http://{service['metadata']['name']}.{namespace}.svc:{port}{WEBHOOK_PATH}"
    )
    assert hook["send_resolved"] is True
    authorization = hook["http_config"]["authorization"]
    assert authorization["type"] == "Bearer"
    assert authorization["credentials_file"].endswith("/tritonguard-api/token")
    assert "credentials" not in authorization
    (route,) = [r for r in config["route"]["routes"] if r["receiver"] == "tritonguard"]
    assert _duration_s(route["repeat_interval"]) < DEFAULT_TTL_S
