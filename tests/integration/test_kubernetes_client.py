"""The async Kubernetes client wrapper, exercised against the fake API server over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fakes.kube import FakeKube
from tritonguard.clients.kubernetes_api import KubernetesClient, KubernetesError, PodEvent

NS = "ml"


class FakeClock:
    """A monotonic clock the test advances by hand, so lease expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        """Return the current fake time in seconds."""
        return self.now


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubernetesClient]:
    """Connect a client to the fake server, seeded with a 2-replica Deployment ``triton``."""
    fake_kube.add_deployment(NS, "triton", replicas=2, labels={"app": "triton"})
    api = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    yield api
    api.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _next(events: AsyncIterator[PodEvent], within: float = 5.0) -> PodEvent:
    return await asyncio.wait_for(anext(events), within)


async def test_get_and_set_scale_of_a_deployment(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """set_scale patches the scale subresource; the workload and its pods follow."""
    assert await kube.get_scale("Deployment", NS, "triton") == 2
    assert await kube.set_scale("Deployment", NS, "triton", 4) == 4
    assert fake_kube.replicas("Deployment", NS, "triton") == 4
    assert len(fake_kube.list_objects("Pod", NS, "app=triton")) == 4
    patch = next(r for r in fake_kube.requests if r.method == "PATCH")
    assert patch.path == "/apis/apps/v1/namespaces/ml/deployments/triton/scale"
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body == {"spec": {"replicas": 4}}


async def test_statefulset_scale_names_pods_by_ordinal(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """StatefulSets scale through their own subresource and get ordinal pod names."""
    fake_kube.add_statefulset(NS, "ensemble", replicas=1, labels={"app": "ensemble"})
    assert await kube.set_scale("StatefulSet", NS, "ensemble", 3) == 3
    pods = await kube.list_pods(NS, "app=ensemble")
    assert sorted(p.name for p in pods) == ["ensemble-0", "ensemble-1", "ensemble-2"]


async def test_errors_are_typed_one_liners(kube: KubernetesClient) -> None:
    """404 and 422 become KubernetesError with a kind, the status and a single line."""
    with pytest.raises(KubernetesError) as missing:
        await kube.get_scale("Deployment", NS, "nope")
    assert missing.value.kind == "not_found"
    assert missing.value.status == 404
    assert 'deployments.apps "nope" not found' in str(missing.value)
    with pytest.raises(KubernetesError) as invalid:
        await kube.set_scale("Deployment", NS, "triton", -1)
    assert (invalid.value.kind, invalid.value.status) == ("invalid", 422)
    assert "spec.replicas" in str(invalid.value)
    for err in (missing.value, invalid.value):
        assert "\n" not in str(err)
        assert not err.retryable


async def test_hpa_is_found_by_target_and_min_replicas_scales_it(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """find_hpa_for matches scaleTargetRef; raising minReplicas makes the HPA scale the target."""
    fake_kube.add_deployment(NS, "other", replicas=1)
    fake_kube.add_hpa(NS, "triton-hpa", "triton", min_replicas=1, max_replicas=8)
    hpa = await kube.find_hpa_for("Deployment", NS, "triton")
    assert hpa is not None
    assert (hpa.name, hpa.min_replicas, hpa.max_replicas, hpa.current_replicas) == (
        "triton-hpa",
        1,
        8,
        2,
    )
    assert await kube.find_hpa_for("Deployment", NS, "other") is None
    assert await kube.find_hpa_for("StatefulSet", NS, "triton") is None
    updated = await kube.set_hpa_min_replicas(NS, "triton-hpa", 5)
    assert updated.min_replicas == 5
    assert fake_kube.replicas("Deployment", NS, "triton") == 5
    with pytest.raises(KubernetesError) as err:
        await kube.set_hpa_min_replicas(NS, "triton-hpa", 9)
    assert err.value.kind == "invalid"
    assert "minReplicas" in str(err.value) or "maxReplicas" in str(err.value)


async def test_list_pods_honours_the_label_selector(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """Only pods matching the selector are listed, with readiness and placement."""
    fake_kube.add_pod(NS, "sidecar", labels={"app": "other"})
    fake_kube.add_pod(NS, "starting", labels={"app": "triton"}, phase="Pending")
    pods = {p.name: p for p in await kube.list_pods(NS, "app=triton")}
    assert len(pods) == 3
    assert "sidecar" not in pods
    assert pods["starting"].ready is False
    assert pods["starting"].phase == "Pending"
    owned = [p for p in pods.values() if p.owner_kind == "ReplicaSet"]
    assert len(owned) == 2
    assert all(p.ready and p.node and p.namespace == NS for p in owned)


async def test_watch_sees_existing_pods_then_scale_and_phase_changes(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """watch_pods yields the current pods as ADDED, then ADDED/MODIFIED/DELETED as they change."""
    async with contextlib.aclosing(kube.watch_pods(NS, "app=triton")) as events:
        first = {(await _next(events)).pod.name for _ in range(2)}
        assert first == {p["metadata"]["name"] for p in fake_kube.list_objects("Pod", NS)}
        await kube.set_scale("Deployment", NS, "triton", 3)
        added = await _next(events)
        assert added.type == "ADDED"
        assert added.pod.name not in first
        fake_kube.set_pod_phase(NS, added.pod.name, "Failed")
        changed = await _next(events)
        assert (changed.type, changed.pod.name, changed.pod.ready) == (
            "MODIFIED",
            added.pod.name,
            False,
        )
        await kube.set_scale("Deployment", NS, "triton", 2)
        gone = await _next(events)
        assert (gone.type, gone.pod.name) == ("DELETED", added.pod.name)


async def test_watch_survives_an_outage_and_relists_after_410(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """While the server is down the watch retries; when its resourceVersion expired it relists."""
    errors: list[KubernetesError] = []
    outage_seen = asyncio.Event()

    def on_error(err: KubernetesError) -> None:
        errors.append(err)
        outage_seen.set()

    watch = kube.watch_pods(
        NS, "app=triton", initial_backoff_s=0.1, max_backoff_s=0.2, on_error=on_error
    )
    async with contextlib.aclosing(watch) as events:
        for _ in range(2):
            await _next(events)
        await fake_kube.stop()
        fake_kube.add_pod(NS, "born-during-outage", labels={"app": "triton"})
        fake_kube.compact()  # the watch's resourceVersion is now too old: 410 Gone
        pending = asyncio.ensure_future(_next(events, within=10))
        await asyncio.wait_for(outage_seen.wait(), 5)
        await fake_kube.start()
        event = await pending
        assert (event.type, event.pod.name) == ("ADDED", "born-during-outage")
    assert errors
    assert all(e.kind == "down" for e in errors)
    lists = [r for r in fake_kube.requests if r.method == "GET" and "watch" not in r.query]
    assert len(lists) == 2  # the initial list and the relist after 410


async def test_lease_acquire_renew_and_takeover_after_expiry(fake_kube: FakeKube) -> None:
    """A second replica takes the lease only once it went unrenewed for its whole duration."""
    fake_kube.add_namespace(NS)
    clock_a, clock_b = FakeClock(), FakeClock()
    a = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    b = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    a.monotonic, b.monotonic = clock_a, clock_b
    try:
        assert await a.try_acquire_lease(NS, "tritonguard", "pod-a", 15)
        assert not await b.try_acquire_lease(NS, "tritonguard", "pod-b", 15)
        clock_b.now += 10
        assert await a.renew_lease(NS, "tritonguard", "pod-a", 15)
        clock_b.now += 10  # 20 s since b first looked, but a renewed 10 s ago
        assert not await b.try_acquire_lease(NS, "tritonguard", "pod-b", 15)
        clock_b.now += 16  # a stopped renewing
        assert await b.try_acquire_lease(NS, "tritonguard", "pod-b", 15)
        assert not await a.renew_lease(NS, "tritonguard", "pod-a", 15)
        lease = fake_kube.get_object("Lease", NS, "tritonguard")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "pod-b"
        assert lease["spec"]["leaseTransitions"] == 1
        renewed = datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
        assert abs((datetime.now(UTC) - renewed).total_seconds()) < 60
    finally:
        a.close()
        b.close()


async def test_lease_race_has_one_winner_and_release_hands_over(fake_kube: FakeKube) -> None:
    """Concurrent creates: exactly one wins (409 for the other); release frees it at once."""
    fake_kube.add_namespace(NS)
    clients = [KubernetesClient.for_host(fake_kube.url) for _ in range(3)]
    try:
        won = await asyncio.gather(
            *(c.try_acquire_lease(NS, "race", f"pod-{i}", 15) for i, c in enumerate(clients))
        )
        assert sorted(won) == [False, False, True]
        winner = won.index(True)
        loser = (winner + 1) % 3
        assert await clients[winner].release_lease(NS, "race", f"pod-{winner}")
        assert await clients[loser].try_acquire_lease(NS, "race", f"pod-{loser}", 15)
    finally:
        for c in clients:
            c.close()


async def test_down_server_fails_fast_with_a_clear_reason() -> None:
    """Connection refused becomes KubernetesError(kind="down") well within a second."""
    api = KubernetesClient.for_host(f"http://127.0.0.1:{_free_port()}", timeout_s=5.0)
    started = time.monotonic()
    with pytest.raises(KubernetesError) as err:
        await api.get_scale("Deployment", NS, "triton")
    assert time.monotonic() - started < 1.0
    assert err.value.kind == "down"
    assert err.value.retryable
    assert "connection refused" in str(err.value)
    api.close()


async def test_slow_server_times_out_at_the_configured_deadline(
    fake_kube: FakeKube,
) -> None:
    """A response slower than timeout_s becomes KubernetesError(kind="timeout") on time."""
    fake_kube.add_deployment(NS, "triton", replicas=1)
    fake_kube.set_delay(3.0)
    api = KubernetesClient.for_host(fake_kube.url, timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(KubernetesError) as err:
        await api.get_scale("Deployment", NS, "triton")
    assert time.monotonic() - started < 1.0
    assert err.value.kind == "timeout"
    assert "timed out" in str(err.value)
    fake_kube.set_delay(0)
    api.close()


async def test_server_errors_and_dropped_connections(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """A 503 is a retryable server error; one dropped connection is retried, many are 'down'."""
    fake_kube.fail_next(1, 503)
    with pytest.raises(KubernetesError) as err:
        await kube.get_scale("Deployment", NS, "triton")
    assert (err.value.kind, err.value.status, err.value.retryable) == ("server", 503, True)
    fake_kube.drop_next(1)
    assert await kube.get_scale("Deployment", NS, "triton") == 2
    fake_kube.drop_next(5)
    with pytest.raises(KubernetesError) as dropped:
        await kube.get_scale("Deployment", NS, "triton")
    assert dropped.value.kind == "down"


async def test_event_is_attached_to_the_deployment_and_shown_by_kubectl_describe(
    kube: KubernetesClient, fake_kube: FakeKube, tmp_path: Path
) -> None:
    """An events.k8s.io/v1 Event on the Deployment's uid is listed by `kubectl describe`."""
    uid = await kube.uid_of("Deployment", NS, "triton")
    made = await kube.create_event_v1(
        NS,
        {
            "metadata": {"generateName": "triton."},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "tritonguard.io/tritonguard",
            "reportingInstance": "tritonguard-0",
            "action": "kubernetes.scale",
            "reason": "TritonguardScaledOut",
            "note": "too_few_instances: scaled replicas 2 -> 3",
            "type": "Warning",
            "regarding": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": NS,
                "name": "triton",
                "uid": uid,
            },
        },
    )
    event = fake_kube.get_object("Event", NS, made["metadata"]["name"])
    deployment = fake_kube.get_object("Deployment", NS, "triton")
    assert event is not None
    assert deployment is not None
    assert event["involvedObject"]["uid"] == deployment["metadata"]["uid"]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; install it with `make` (Debian kubernetes-client)")
    config = tmp_path / "kubeconfig"
    config.write_text(fake_kube.kubeconfig(NS))
    proc = await asyncio.to_thread(
        subprocess.run,
        [kubectl, "describe", "deployment", "triton"],
        env={"KUBECONFIG": str(config), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    events = proc.stdout.split("Events:", 1)[1]
    assert "TritonguardScaledOut" in events
    assert "too_few_instances: scaled replicas 2 -> 3" in events


async def test_from_environment_reads_a_kubeconfig_or_says_what_is_wrong(
    fake_kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubeconfig for the fake works; a missing one is a one-line 'config' error."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    fake_kube.add_deployment(NS, "triton", replicas=3)
    config = tmp_path / "kubeconfig"
    config.write_text(fake_kube.kubeconfig(NS))
    api = KubernetesClient.from_environment(kubeconfig=str(config))
    assert await api.get_scale("Deployment", NS, "triton") == 3
    api.close()
    with pytest.raises(KubernetesError) as err:
        KubernetesClient.from_environment(kubeconfig=str(tmp_path / "missing"))
    assert err.value.kind == "config"
    assert "\n" not in str(err.value)
    assert "missing" in str(err.value)


async def test_fake_rejects_stale_resource_versions_with_409(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """A PUT of the scale subresource or the Deployment with an old resourceVersion is 409."""
    from kubernetes import client

    apps = client.AppsV1Api(kube.api_client)
    scale = await asyncio.to_thread(apps.read_namespaced_deployment_scale, "triton", NS)
    await kube.set_scale("Deployment", NS, "triton", 3)  # bumps the resourceVersion
    assert scale.spec is not None
    scale.spec.replicas = 5
    with pytest.raises(client.ApiException) as stale:
        await asyncio.to_thread(apps.replace_namespaced_deployment_scale, "triton", NS, scale)
    assert stale.value.status == 409
    assert "the object has been modified" in str(stale.value.body)
    fresh = await asyncio.to_thread(apps.read_namespaced_deployment_scale, "triton", NS)
    assert fresh.spec is not None and fresh.metadata is not None
    fresh.spec.replicas = 5
    done = await asyncio.to_thread(apps.replace_namespaced_deployment_scale, "triton", NS, fresh)
    assert done.spec is not None and done.metadata is not None
    assert done.spec.replicas == 5
    assert int(str(done.metadata.resource_version)) > int(str(fresh.metadata.resource_version))
    deployment = await asyncio.to_thread(apps.read_namespaced_deployment, "triton", NS)
    assert deployment.metadata is not None
    deployment.metadata.resource_version = fresh.metadata.resource_version
    with pytest.raises(client.ApiException) as stale_deployment:
        await asyncio.to_thread(apps.replace_namespaced_deployment, "triton", NS, deployment)
    assert stale_deployment.value.status == 409


async def test_fake_applies_each_patch_content_type(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """JSON patch lists apply; dicts (which the client always sends as strategic merge) too."""
    from kubernetes import client

    apps = client.AppsV1Api(kube.api_client)
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 1}]
    await asyncio.to_thread(apps.patch_namespaced_deployment, "triton", NS, ops)
    assert fake_kube.replicas("Deployment", NS, "triton") == 1
    assert fake_kube.requests[-1].content_type == "application/json-patch+json"
    await asyncio.to_thread(
        apps.patch_namespaced_deployment, "triton", NS, {"spec": {"replicas": 2}}
    )
    assert fake_kube.replicas("Deployment", NS, "triton") == 2
    assert fake_kube.requests[-1].content_type == "application/strategic-merge-patch+json"


async def test_fake_watch_honours_timeout_seconds_and_selector_exits(
    kube: KubernetesClient, fake_kube: FakeKube
) -> None:
    """A watch from a resourceVersion ends after timeoutSeconds; a relabelled pod is DELETED."""
    import json

    from kubernetes import client

    core = client.CoreV1Api(kube.api_client)
    pods = await asyncio.to_thread(core.list_namespaced_pod, NS, label_selector="app=triton")
    assert pods.items[0].metadata is not None and pods.metadata is not None
    victim = str(pods.items[0].metadata.name)
    since = str(pods.metadata.resource_version)

    def watch() -> list[tuple[str, str]]:
        resp = core.list_namespaced_pod(
            NS,
            label_selector="app=triton",
            watch=True,
            resource_version=since,
            timeout_seconds=1,
            _preload_content=False,
        )
        return [
            (e["type"], e["object"]["metadata"]["name"])
            # Unparsed (``_preload_content=False``) the client returns the urllib3 response.
            for e in map(json.loads, resp.read().decode().splitlines())  # type: ignore[attr-defined]
        ]

    started = time.monotonic()
    watching = asyncio.ensure_future(asyncio.to_thread(watch))
    await asyncio.sleep(0.2)
    await asyncio.to_thread(
        core.patch_namespaced_pod,
        victim,
        NS,
        {"metadata": {"labels": {"app": "quarantined"}}},
        _content_type="application/merge-patch+json",
    )
    seen = await asyncio.wait_for(watching, 5)
    assert 0.9 < time.monotonic() - started < 3
    assert ("DELETED", victim) in seen
    assert all(kind != "ADDED" or name != victim for kind, name in seen)
