"""The fake Kubernetes API server, proven against the real ``kubectl`` binary."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKube

NS = "ml"


class Kubectl:
    """Runs the real kubectl against one fake server with an isolated kubeconfig and cache."""

    def __init__(self, server: FakeKube, home: Path) -> None:
        binary = shutil.which("kubectl")
        if binary is None:
            pytest.fail(
                "kubectl is not installed; these tests prove the fake API server against it. "
                "Install it with `make` (Debian package kubernetes-client) or put kubectl on PATH."
            )
        self.binary = binary
        config = home / "kubeconfig"
        config.write_text(server.kubeconfig(namespace=NS))
        # A private HOME keeps kubectl's discovery cache away from the user's real clusters.
        self.env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(home)}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one kubectl command to completion (30 s at most)."""
        proc = subprocess.run(
            [self.binary, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start a long-running kubectl (a watch)."""
        return subprocess.Popen(
            [self.binary, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def kubectl(fake_kube_thread: FakeKube, tmp_path: Path) -> Kubectl:
    """Kubectl configured for the fake server, which holds a 2-replica Deployment ``triton``."""
    fake_kube_thread.add_deployment(NS, "triton", replicas=2, labels={"app": "triton"})
    return Kubectl(fake_kube_thread, tmp_path)


def test_get_deployments_prints_server_side_table(kubectl: Kubectl) -> None:
    """`kubectl get deployments` discovers apps/v1 and prints the Table the fake renders."""
    out = kubectl.run("get", "deployments").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert out[1].split()[:4] == ["triton", "2/2", "2", "2"]


def test_get_pods_json_lists_the_deployments_pods(
    kubectl: Kubectl, fake_kube_thread: FakeKube
) -> None:
    """`kubectl get pods -o json` decodes the PodList, and it matches the fake's state."""
    fake_kube_thread.add_pod(NS, "loner", labels={"app": "other"})
    doc = json.loads(kubectl.run("get", "pods", "-l", "app=triton", "-o", "json").stdout)
    names = sorted(p["metadata"]["name"] for p in doc["items"])
    expected = sorted(
        p["metadata"]["name"] for p in fake_kube_thread.list_objects("Pod", NS, "app=triton")
    )
    assert len(names) == 2
    assert names == expected
    assert all(p["kind"] == "Pod" and p["status"]["phase"] == "Running" for p in doc["items"])


def test_scale_deployment_changes_replicas_and_pods(
    kubectl: Kubectl, fake_kube_thread: FakeKube
) -> None:
    """`kubectl scale` goes through the scale subresource and the fake creates the third pod."""
    assert "scaled" in kubectl.run("scale", "deployment/triton", "--replicas=3").stdout
    assert fake_kube_thread.replicas("Deployment", NS, "triton") == 3
    assert len(fake_kube_thread.list_objects("Pod", NS, "app=triton")) == 3
    assert any(
        r.method == "PATCH" and r.path.endswith("/deployments/triton/scale")
        for r in fake_kube_thread.requests
    )
    table = kubectl.run("get", "deployment", "triton").stdout.splitlines()
    assert table[1].split()[1] == "3/3"


def test_get_pods_watch_sees_pods_created_by_a_scale(
    kubectl: Kubectl, fake_kube_thread: FakeKube
) -> None:
    """`kubectl get pods --watch` streams the pod that a later scale-out creates."""
    before = {p["metadata"]["name"] for p in fake_kube_thread.list_objects("Pod", NS)}
    proc = kubectl.popen("get", "pods", "--watch", "-o", "name")
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: set[str] = set()
        while not before <= seen:  # the initial list arrives first
            seen.add(lines.get(timeout=15).removeprefix("pod/"))
        kubectl.run("scale", "deployment/triton", "--replicas=3")
        after = {p["metadata"]["name"] for p in fake_kube_thread.list_objects("Pod", NS)}
        (new_pod,) = after - before
        while True:
            if lines.get(timeout=15).removeprefix("pod/") == new_pod:
                break
        assert any(r.query.get("watch") == "true" for r in fake_kube_thread.requests)
    finally:
        proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_get_leases_shows_holder(kubectl: Kubectl, tmp_path: Path) -> None:
    """A lease created through kubectl is listed with its holder; a second create conflicts."""
    lease = tmp_path / "lease.json"
    lease.write_text(
        json.dumps(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "tritonguard-leader"},
                "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15},
            }
        )
    )
    # Client-side validation needs the server's OpenAPI schemas, which the fake does not serve.
    kubectl.run("create", "--validate=false", "-f", str(lease))
    out = kubectl.run("get", "leases").stdout.splitlines()
    assert out[1].split()[:2] == ["tritonguard-leader", "pod-a"]
    again = kubectl.run("create", "--validate=false", "-f", str(lease), check=False)
    assert again.returncode == 1
    assert "(AlreadyExists)" in again.stderr


def test_not_found_is_a_status_kubectl_understands(kubectl: Kubectl) -> None:
    """A missing object yields the NotFound Status that kubectl renders verbatim."""
    proc = kubectl.run("get", "deployment", "nope", check=False)
    assert proc.returncode == 1
    assert 'Error from server (NotFound): deployments.apps "nope" not found' in proc.stderr


def test_get_hpa_shows_bounds_and_reference(kubectl: Kubectl, fake_kube_thread: FakeKube) -> None:
    """autoscaling/v2 HPAs are discoverable and printed with their target and bounds."""
    fake_kube_thread.add_hpa(NS, "triton", "triton", min_replicas=2, max_replicas=6)
    out = kubectl.run("get", "hpa").stdout.splitlines()
    assert out[1].split()[:6] == ["triton", "Deployment/triton", "<unknown>", "2", "6", "2"]
