"""Kubernetes Events of incidents and actions, written with the real client, read with kubectl.

The fake API server stores events.k8s.io/v1 Events as the real one does (one storage, the
core/v1 view converted), so ``kubectl describe`` and ``kubectl get events``, which read core/v1,
show what tritonguard wrote through events.k8s.io/v1.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.fakes.kube import FakeKube
from tests.playbook_harness import incident, resolved
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.cluster_events import SeriesBook
from tritonguard.core.findings import Subject
from tritonguard.runtime.kube_events import KubeEvents

NS = "ml"


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubernetesClient]:
    """Yield a client on the fake, holding Deployment ml/triton and StatefulSet ml/bert."""
    fake_kube.add_deployment(NS, "triton", replicas=1)
    fake_kube.add_statefulset(NS, "bert", replicas=1)
    api = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    yield api
    api.close()


def _pod_of(fake: FakeKube, app: str) -> str:
    [pod] = fake.list_objects("Pod", NS, f"app={app}")
    return str(pod["metadata"]["name"])


async def _kubectl(fake: FakeKube, home: Path, *args: str) -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.fail("kubectl is not installed; install it with `make` (Debian kubernetes-client)")
    config = home / "kubeconfig"
    config.write_text(fake.kubeconfig(NS))
    proc = await asyncio.to_thread(
        subprocess.run,
        [binary, *args],
        env={"KUBECONFIG": str(config), "HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _scale_record(pod: str, incident_id: str, status: str = "ran") -> ActionRecord:
    return ActionRecord(
        at=5000.0,
        incident_id=incident_id,
        event="opened",
        playbook="cpu-bottleneck-scale-out",
        subject=Subject(NS, "resnet", pod).key(),
        action="kubernetes.scale",
        params={"add": 1},
        dry_run=False,
        status=status,  # type: ignore[arg-type]  # the statuses under test are valid ones
        reason="after: verify failed" if status == "rolled_back" else "",
    )


def _events(fake: FakeKube) -> list[dict[str, Any]]:
    return fake.list_objects("Event", NS)


async def test_incident_and_action_show_in_kubectl_describe_and_get_events(
    kube: KubernetesClient, fake_kube: FakeKube, tmp_path: Path
) -> None:
    """Opened, ran, rolled back and resolved land on the Pod and on its Deployment.

    ``kubectl describe pod`` and ``kubectl describe deployment`` list them (matched by uid),
    and ``kubectl get events`` names both objects.
    """
    pod = _pod_of(fake_kube, "triton")
    events = KubeEvents(kube, instance="tritonguard-0")
    opened = incident(namespace=NS, pod=pod, incident_id="inc-k1")
    events.observe_incident(opened)
    events.observe_records([_scale_record(pod, "inc-k1"), _scale_record(pod, "inc-k1", "planned")])
    events.observe_records([_scale_record(pod, "inc-k1", "rolled_back")])
    events.observe_incidents([resolved(opened)])
    await events.drain()
    assert events.status()["created"] == 8  # four notes, each on the Pod and the Deployment
    described = (await _kubectl(fake_kube, tmp_path, "describe", "pod", pod)).split("Events:")[1]
    for reason in ("IncidentOpened", "ActionRan", "ActionRolledBack", "IncidentResolved"):
        assert reason in described
    assert "cpu_bottleneck on model resnet (confidence 0.80)" in described
    assert "tritonguard.io/tritonguard" in described
    deployment = (await _kubectl(fake_kube, tmp_path, "describe", "deployment", "triton")).split(
        "Events:"
    )[1]
    assert "IncidentOpened" in deployment and "ActionRan" in deployment
    table = await _kubectl(fake_kube, tmp_path, "get", "events")
    assert f"pod/{pod}" in table and "deployment/triton" in table
    # The Deployment's Event names the pod it is about.
    [on_deploy] = [
        e
        for e in _events(fake_kube)
        if e["involvedObject"]["kind"] == "Deployment" and e["reason"] == "IncidentOpened"
    ]
    assert on_deploy["related"]["name"] == pod
    assert on_deploy["metadata"]["annotations"]["tritonguard.io/incident"] == "inc-k1"


async def test_repeats_fold_into_one_event_with_a_series_count(
    kube: KubernetesClient, fake_kube: FakeKube, tmp_path: Path
) -> None:
    """Three openings of the same cause on a StatefulSet pod are one Event per object, x3."""
    pod = _pod_of(fake_kube, "bert")
    events = KubeEvents(kube, instance="tritonguard-0", book=SeriesBook(min_interval_s=0.0))
    for n in range(3):
        events.observe_incident(incident(namespace=NS, pod=pod, incident_id=f"inc-r{n}"))
        await events.drain()
    assert (events.created, events.patched) == (2, 4)
    on_pod = [e for e in _events(fake_kube) if e["involvedObject"]["kind"] == "Pod"]
    assert len(on_pod) == 1
    assert on_pod[0]["series"]["count"] == 3
    assert on_pod[0]["series"]["lastObservedTime"].endswith("Z")
    assert any(e["involvedObject"]["kind"] == "StatefulSet" for e in _events(fake_kube))
    described = await _kubectl(fake_kube, tmp_path, "describe", "pod", pod)
    assert "(x3 over" in described.split("Events:")[1]
    listed = json.loads(
        await _kubectl(fake_kube, tmp_path, "get", "events.v1.events.k8s.io", "-o", "json")
    )
    assert {e["regarding"]["kind"] for e in listed["items"]} == {"Pod", "StatefulSet"}


async def test_held_repeats_are_written_once_due(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """Repeats within the pacing interval are counted, then written by a later flush."""
    pod = _pod_of(fake_kube, "triton")
    now = [100.0]
    events = KubeEvents(
        kube,
        instance="tritonguard-0",
        book=SeriesBook(min_interval_s=10.0),
        monotonic=lambda: now[0],
    )
    for _ in range(4):
        events.observe_incident(incident(namespace=NS, pod=pod, incident_id="inc-h"))
    await events.drain()
    assert (events.created, events.patched) == (2, 0)
    now[0] += 11.0
    await events.drain()
    assert events.patched == 2
    counts = {e["involvedObject"]["kind"]: e["series"]["count"] for e in _events(fake_kube)}
    assert counts == {"Pod": 4, "Deployment": 4}


async def test_refusals_are_logged_once_and_never_raised(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """403 and 500 from the API drop the Event, log one warning per kind, and do not raise.

    The next write that succeeds is recorded as usual.
    """
    pod = _pod_of(fake_kube, "triton")
    with structlog.testing.capture_logs() as logs:
        events = KubeEvents(kube, instance="tritonguard-0")
        await events._regarding(NS, pod)  # owners known, so only event writes are refused
        fake_kube.fail_next(4, 403)
        for n in range(2):
            events.observe_incident(incident(namespace=NS, pod=pod, incident_id=f"inc-f{n}"))
            await events.drain()
        fake_kube.fail_next(1, 500)
        events.observe_incident(resolved(incident(namespace=NS, pod=pod, incident_id="inc-g")))
        await events.drain()
        # The Deployment's resolution went through after the Pod's failed: failing no more.
        assert events.status()["failing"] == []
        events.observe_record(_scale_record(pod, "inc-g"))
        await events.drain()
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["error"].split(":")[0] for w in warnings] == [
        f"record event IncidentOpened on Pod {NS}/{pod}",
        f"record event IncidentResolved on Pod {NS}/{pod}",
    ]
    assert "grant events create and patch" in warnings[0]["hint"]
    assert events.failed == 5
    assert {e["reason"] for e in _events(fake_kube)} >= {"ActionRan", "IncidentResolved"}


async def test_events_of_a_pod_no_longer_there_go_to_its_workload(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """A pod deleted after its incident opened: the resolution still reaches the Deployment."""
    pod = _pod_of(fake_kube, "triton")
    now = [0.0]
    events = KubeEvents(kube, instance="tritonguard-0", monotonic=lambda: now[0])
    opened = incident(namespace=NS, pod=pod, incident_id="inc-d")
    events.observe_incident(opened)
    await events.drain()
    fake_kube.delete_pod(NS, pod)
    now[0] += 120.0
    events.observe_incident(resolved(opened))
    await events.drain()
    resolved_on = [
        e["involvedObject"]["kind"] for e in _events(fake_kube) if e["reason"] == "IncidentResolved"
    ]
    assert resolved_on == ["Deployment"]


async def test_a_replica_that_does_not_lead_writes_nothing(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """Only the leader tells Kubernetes: a follower's notes are let go, the leader's written."""
    pod = _pod_of(fake_kube, "triton")
    leading = [False]
    events = KubeEvents(kube, instance="tritonguard-1", active=lambda: leading[0])
    events.observe_incident(incident(namespace=NS, pod=pod, incident_id="inc-l"))
    await events.drain()
    assert _events(fake_kube) == []
    leading[0] = True
    events.observe_incident(incident(namespace=NS, pod=pod, incident_id="inc-l"))
    await events.drain()
    assert len(_events(fake_kube)) == 2
