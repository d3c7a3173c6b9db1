"""The fake's KEDA ScaledObjects and events.k8s.io/v1, proven against the real ``kubectl``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.kube import FakeKube
from tests.integration.test_fake_kube_kubectl import NS, Kubectl


def test_scaledobject_is_served_like_keda_and_owns_its_hpa(
    fake_kube_thread: FakeKube, tmp_path: Path
) -> None:
    """ScaledObjects list and patch with kubectl; KEDA's HPA follows, a direct edit reverts.

    Invalid counts are refused with 422, as KEDA's schema and webhook do.
    """
    fake = fake_kube_thread
    fake.add_deployment(NS, "triton", replicas=1)
    fake.add_scaled_object(NS, "triton-so", "triton", min_replica_count=1, max_replica_count=5)
    kubectl = Kubectl(fake, tmp_path)
    table = kubectl.run("get", "scaledobjects").stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "SCALETARGETKIND", "SCALETARGETNAME", "MIN", "MAX"]
    assert table[1].split()[:5] == ["triton-so", "apps/v1.Deployment", "triton", "1", "5"]
    kubectl.run(
        "patch", "scaledobject", "triton-so", "--type=merge", "-p", '{"spec":{"minReplicaCount":3}}'
    )
    hpa = json.loads(kubectl.run("get", "hpa", "keda-hpa-triton-so", "-o", "json").stdout)
    assert hpa["spec"]["minReplicas"] == 3
    assert hpa["metadata"]["labels"]["scaledobject.keda.sh/name"] == "triton-so"
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "ScaledObject"
    assert fake.replicas("Deployment", NS, "triton") == 3
    kubectl.run(
        "patch", "hpa", "keda-hpa-triton-so", "--type=merge", "-p", '{"spec":{"minReplicas":1}}'
    )
    hpa = json.loads(kubectl.run("get", "hpa", "keda-hpa-triton-so", "-o", "json").stdout)
    assert hpa["spec"]["minReplicas"] == 3
    bad = kubectl.run(
        "patch",
        "scaledobject",
        "triton-so",
        "--type=merge",
        "-p",
        '{"spec":{"minReplicaCount":9}}',
        check=False,
    )
    assert bad.returncode != 0
    assert "MinReplicaCount=9 must be less than MaxReplicaCount=5" in bad.stderr


def test_events_v1_create_is_validated_and_shared_with_core(
    fake_kube_thread: FakeKube, tmp_path: Path
) -> None:
    """An events.k8s.io/v1 Event created by kubectl shows in the core list; bad ones get 422."""
    fake = fake_kube_thread
    fake.add_deployment(NS, "triton", replicas=1)
    kubectl = Kubectl(fake, tmp_path)
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "triton.1", "namespace": NS},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "tritonguard.io/tritonguard",
        "reportingInstance": "tritonguard-0",
        "action": "Diagnose",
        "reason": "IncidentOpened",
        "type": "Warning",
        "note": "batching_delay on model resnet",
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"},
    }
    (tmp_path / "event.json").write_text(json.dumps(event))
    # The fake serves no OpenAPI document: the server's own validation is what is shown here.
    kubectl.run("create", "--validate=false", "-f", str(tmp_path / "event.json"))
    core = json.loads(kubectl.run("get", "events", "-o", "json").stdout)
    [stored] = core["items"]
    assert stored["involvedObject"]["name"] == "triton"
    assert stored["message"] == "batching_delay on model resnet"
    assert stored["reportingComponent"] == "tritonguard.io/tritonguard"
    broken = {**event, "metadata": {"name": "triton.2"}, "deprecatedCount": 3, "type": "Bad"}
    del broken["eventTime"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    refused = kubectl.run(
        "create", "--validate=false", "-f", str(tmp_path / "broken.json"), check=False
    )
    assert refused.returncode != 0
    for complaint in ("eventTime: Required value", "deprecatedCount", 'Unsupported value: "Bad"'):
        assert complaint in refused.stderr
    renamed = kubectl.run(
        "patch",
        "events.v1.events.k8s.io",
        "triton.1",
        "--type=merge",
        "-p",
        '{"note":"something else"}',
        check=False,
    )
    assert renamed.returncode != 0 and "note: field is immutable" in renamed.stderr
    # A MicroTime without its six fractional digits does not parse, as on the real server.
    coarse = kubectl.run(
        "patch",
        "events.v1.events.k8s.io",
        "triton.1",
        "--type=merge",
        "-p",
        '{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:01Z"}}',
        check=False,
    )
    assert coarse.returncode != 0 and "cannot be handled as a Event" in coarse.stderr
