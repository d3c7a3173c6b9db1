"""What discovery reads from the fake API server, proven against the real ``kubectl`` binary."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.kube import FakeKube
from tests.integration.test_fake_kube_kubectl import NS, Kubectl


def test_replicasets_are_owned_by_their_deployment(
    fake_kube_thread: FakeKube, tmp_path: Path
) -> None:
    """`kubectl get rs` lists the Deployment's ReplicaSet, owned by it, and the pods name it."""
    fake_kube_thread.add_deployment(NS, "triton", replicas=2, labels={"app": "triton"})
    kubectl = Kubectl(fake_kube_thread, tmp_path)
    table = kubectl.run("get", "replicasets").stdout.splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    (rs,) = json.loads(kubectl.run("get", "rs", "-o", "json").stdout)["items"]
    (owner,) = rs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Deployment", "triton", True)
    pods = json.loads(kubectl.run("get", "pods", "-l", "app=triton", "-o", "json").stdout)
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in pods["items"]} == {
        rs["metadata"]["name"]
    }
    assert {p["metadata"]["ownerReferences"][0]["uid"] for p in pods["items"]} == {
        rs["metadata"]["uid"]
    }


def test_a_pod_pointing_at_a_server_shows_its_ip_and_named_ports(
    fake_kube_thread: FakeKube, tmp_path: Path
) -> None:
    """A pod added with an IP and named ports shows them to `kubectl get -o wide` and JSON."""
    fake_kube_thread.add_pod(
        NS, "triton-0", labels={"app": "triton"}, ip="127.0.0.1", ports={"metrics": 18002}
    )
    kubectl = Kubectl(fake_kube_thread, tmp_path)
    wide = kubectl.run("get", "pod", "triton-0", "-o", "wide").stdout.splitlines()
    assert "127.0.0.1" in wide[1].split()
    pod = json.loads(kubectl.run("get", "pod", "triton-0", "-o", "json").stdout)
    assert pod["spec"]["containers"][0]["ports"] == [
        {"name": "metrics", "containerPort": 18002, "protocol": "TCP"}
    ]
