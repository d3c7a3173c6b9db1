"""Who a series is about: the (namespace, pod) identity every layer keys targets by.

Inside Kubernetes a Triton is its pod; outside, the metrics endpoint's ``instance``
(``host:port``) stands in for the pod. The sources label samples this way, the engine keys
subjects this way, and the daemon keys Triton clients and model configs this way, so they
always meet.
"""

from __future__ import annotations

from tritonguard.core.samples import Labels, label

TargetKey = tuple[str, str]


def identity(namespace: str, pod: str, instance: str) -> TargetKey:
    """Return the target key of a configured target: its pod, else its ``instance``."""
    return namespace, pod or instance


def target_of(labels: Labels) -> TargetKey:
    """Return (namespace, pod) of a series; `instance` stands in for a pod outside Kubernetes.

    Exporters that describe other pods (DCGM's pod mapping, kube-state-metrics, cAdvisor) end up
    with ``exported_pod``/``exported_namespace`` when Prometheus adds its own target labels, and
    old cAdvisors say ``pod_name``: those name the pod the series is about.
    """
    ns = label(labels, "exported_namespace") or label(labels, "namespace")
    pod = (
        label(labels, "exported_pod")
        or label(labels, "pod")
        or label(labels, "pod_name")
        or label(labels, "instance")
    )
    return ns, pod
