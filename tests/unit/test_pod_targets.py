"""Pods to scrape targets: ports by name or annotation, who is not a target, owner chains."""

from __future__ import annotations

import dataclasses

import pytest

from tritonguard.core.pod_targets import (
    ContainerPort,
    DiscoveryRules,
    OwnerRef,
    Pod,
    PodTarget,
    Skipped,
    owner_chain,
    pod_target,
    replicaset_to_resolve,
)

RULES = DiscoveryRules()
RS = OwnerRef("ReplicaSet", "resnet-7d9f", controller=True)
DEPLOY = OwnerRef("Deployment", "resnet", controller=True)


def _pod(**changes: object) -> Pod:
    base = Pod(
        namespace="ml",
        name="resnet-7d9f-abcde",
        phase="Running",
        ready=True,
        labels={"app": "triton"},
        node="gpu-node-2",
        ip="10.0.0.7",
        resource_version="42",
        uid="u-1",
        ports=(
            ContainerPort("triton", "http", 8000),
            ContainerPort("triton", "grpc", 8001),
            ContainerPort("triton", "metrics", 8002),
        ),
        owners=(RS,),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _target(pod: Pod, owners: tuple[OwnerRef, ...] = ()) -> PodTarget:
    out = pod_target(pod, RULES, owners)
    assert isinstance(out, PodTarget), out
    return out


def test_named_ports_give_the_metrics_and_api_urls() -> None:
    """The container ports named ``metrics`` and ``http`` give the two URLs, on the pod IP."""
    target = _target(_pod())
    assert target.metrics_url == "http://10.0.0.7:8002/metrics"
    assert target.triton_url == "http://10.0.0.7:8000"
    assert target.name == "ml/resnet-7d9f-abcde"
    assert (target.namespace, target.pod, target.node) == ("ml", "resnet-7d9f-abcde", "gpu-node-2")


def test_annotations_override_port_names_numbers_and_path() -> None:
    """Annotations name another port, give a number, or change the path."""
    pod = _pod(
        annotations={
            "tritonguard.io/metrics-port": "grpc",
            "tritonguard.io/http-port": "9000",
            "tritonguard.io/metrics-path": "stats",
        }
    )
    target = _target(pod)
    assert target.metrics_url == "http://10.0.0.7:8001/stats"
    assert target.triton_url == "http://10.0.0.7:9000"


def test_configured_port_names_apply_without_annotations() -> None:
    """The settings' port names are used when a pod carries no annotation."""
    pod = _pod(ports=(ContainerPort("t", "prom", 9102), ContainerPort("t", "api", 9100)))
    out = pod_target(pod, DiscoveryRules(metrics_port="prom", http_port="api"))
    assert isinstance(out, PodTarget)
    assert out.metrics_url == "http://10.0.0.7:9102/metrics"
    assert out.triton_url == "http://10.0.0.7:9100"


def test_ipv6_pod_ips_are_bracketed() -> None:
    """An IPv6 pod IP is written in brackets, as a URL needs."""
    assert _target(_pod(ip="fd00::7")).metrics_url == "http://[fd00::7]:8002/metrics"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"phase": "Pending"}, "phase is Pending"),
        ({"phase": "Succeeded"}, "phase is Succeeded"),
        ({"ready": False}, "not ready"),
        ({"ip": None}, "no IP"),
        ({"deleting": True}, "being deleted"),
        ({"annotations": {"tritonguard.io/scrape": "false"}}, "scrape is false"),
        ({"ports": ()}, "no container port named 'metrics'"),
        ({"annotations": {"tritonguard.io/metrics-port": "web"}}, "no container port named 'web'"),
        ({"annotations": {"tritonguard.io/metrics-port": "99999"}}, "out of range"),
    ],
)
def test_pods_that_are_not_targets_say_why(changes: dict[str, object], reason: str) -> None:
    """Not Running, not ready, no IP, deleting, opted out or without a metrics port: skipped."""
    out = pod_target(_pod(**changes), RULES)
    assert isinstance(out, Skipped)
    assert reason in out.reason
    assert (out.namespace, out.pod) == ("ml", "resnet-7d9f-abcde")


def test_a_pod_without_an_http_port_is_scraped_but_has_no_api() -> None:
    """Only actions need the API: a pod with a metrics port alone is still scraped."""
    target = _target(_pod(ports=(ContainerPort("t", "metrics", 8002),)))
    assert target.metrics_url.endswith(":8002/metrics")
    assert target.triton_url is None


def test_deployment_chain_goes_through_the_replicaset() -> None:
    """A ReplicaSet's pod asks for the ReplicaSet's owner; the chain ends at the Deployment."""
    pod = _pod()
    assert replicaset_to_resolve(pod) == "resnet-7d9f"
    chain = owner_chain(pod, DEPLOY)
    assert chain == (RS, DEPLOY)
    target = _target(pod, chain)
    assert target.workload == DEPLOY
    assert target.labels() == (
        ("node", "gpu-node-2"),
        ("replicaset", "resnet-7d9f"),
        ("deployment", "resnet"),
    )


def test_a_bare_replicaset_ends_the_chain() -> None:
    """A ReplicaSet nobody owns (or whose owner is not known) is the top of the chain."""
    assert owner_chain(_pod(), None) == (RS,)


def test_statefulset_pods_need_no_lookup() -> None:
    """A StatefulSet owns its pods directly: no ReplicaSet to read, a chain of one."""
    sts = OwnerRef("StatefulSet", "bert", controller=True)
    pod = _pod(name="bert-0", owners=(sts,))
    assert replicaset_to_resolve(pod) is None
    chain = owner_chain(pod, DEPLOY)
    assert chain == (sts,)
    assert _target(pod, chain).labels() == (("node", "gpu-node-2"), ("statefulset", "bert"))


def test_the_controller_owner_wins_over_others() -> None:
    """With several owners the one marked controller is the pod's owner."""
    other = OwnerRef("ConfigMap", "x")
    pod = _pod(owners=(other, RS))
    assert pod.controller == RS
    assert replicaset_to_resolve(pod) == "resnet-7d9f"


def test_a_bare_pod_has_no_chain_and_only_a_node_label() -> None:
    """A pod nobody owns is still a target; its labels carry the node only."""
    pod = _pod(owners=(), node=None)
    assert owner_chain(pod) == ()
    assert _target(pod).labels() == ()
