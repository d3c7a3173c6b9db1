"""deploy/: kustomize renders, every object validates for a recent Kubernetes, the rules hold."""

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

from tritonguard.actions.registry import catalog
from tritonguard.core.playbook_model import load_playbooks_text
from tritonguard.settings import Settings, load_settings

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.31.0"


def _render(path: Path) -> list[dict[str, Any]]:
    """Render one kustomization with kubectl kustomize."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed; run `make system-deps`")
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """Render deploy/ with kubectl kustomize."""
    return _render(DEPLOY)


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in objects
        if o["kind"] == kind and (name is None or o["metadata"]["name"].startswith(name))
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def test_every_object_validates_strictly(objects: list[dict[str, Any]]) -> None:
    """Each rendered object passes strict schema validation for Kubernetes 1.31."""
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(
        [
            "ConfigMap",
            "ConfigMap",
            "Deployment",
            "Namespace",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_validation_catches_a_broken_object(objects: list[dict[str, Any]]) -> None:
    """The validator is not a no-op: a misspelt field in the Deployment is rejected."""
    broken = yaml.safe_load(yaml.safe_dump(_one(objects, "Deployment")))
    broken["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_deployment_is_hardened_and_probed(objects: list[dict[str, Any]]) -> None:
    """Two replicas, non-root, read-only root FS, probes, grace above the daemon's own.

    Also: no privilege escalation, all capabilities dropped, a memory limit.
    """
    deployment = _one(objects, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "memory" in container["resources"]["limits"]
    assert container["args"][:1] == ["run"]
    config = _one(objects, "ConfigMap", "tritonguard-config")
    settings = yaml.safe_load(config["data"]["config.yaml"])
    assert pod["terminationGracePeriodSeconds"] > settings["shutdown_grace_s"]
    # Every mounted ConfigMap exists under its generated (hashed) name.
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"}
    mounted = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    assert mounted <= names and len(mounted) == 2


def test_rbac_is_least_privilege(objects: list[dict[str, Any]]) -> None:
    """Nothing cluster-wide; no wildcards, secrets or deletes; writes only where actions write.

    Scale, HPAs, ScaledObjects and Events are written only in the watched namespaces, the
    lease only in tritonguard's own, and kube-system gets nothing.
    """
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    granted: dict[str, set[str]] = {}
    for obj in objects:
        if obj["kind"] != "Role":
            continue
        assert obj["metadata"]["namespace"] != "kube-system"
        for rule in obj["rules"]:
            assert "*" not in rule["resources"] and "*" not in rule["verbs"]
            assert "*" not in rule["apiGroups"]
            for resource in rule["resources"]:
                granted.setdefault(resource, set()).update(rule["verbs"])
    assert "secrets" not in granted and "configmaps" not in granted
    assert not any("delete" in verbs for verbs in granted.values())
    writable = {r for r, verbs in granted.items() if verbs & writes}
    assert writable == {
        "deployments/scale",
        "statefulsets/scale",
        "horizontalpodautoscalers",
        "scaledobjects",
        "events",
        "leases",
    }
    assert {"list", "watch"} <= granted["pods"]
    lease_role = _one(objects, "Role", "tritonguard-leader")
    assert lease_role["metadata"]["namespace"] == "tritonguard"
    renew = next(r for r in lease_role["rules"] if "update" in r["verbs"])
    assert renew["resourceNames"] == ["tritonguard-leader"]


# What each client call needs: (API group, resource, verb), by the client's method names.
_API_GROUPS = {
    "apps": "apps",
    "core": "",
    "coordination": "coordination.k8s.io",
    "autoscaling": "autoscaling",
}
_VERBS = {"read": "get", "list": "list", "patch": "patch", "create": "create", "replace": "update"}
_RESOURCES = {
    "deployment_scale": "deployments/scale",
    "stateful_set_scale": "statefulsets/scale",
    "deployment": "deployments",
    "stateful_set": "statefulsets",
    "replica_set": "replicasets",
    "controller_revision": "controllerrevisions",
    "config_map": "configmaps",
    "pod": "pods",
    "horizontal_pod_autoscaler": "horizontalpodautoscalers",
    "lease": "leases",
}
# Generic object calls name their group and resource in constants.
_CUSTOM = {
    "KEDA_GROUP,": ("keda.sh", "scaledobjects"),
    "_EVENTS_GROUP,": ("events.k8s.io", "events"),
}


def _calls_in_client() -> set[tuple[str, str, str]]:
    """Return every (group, resource, verb) clients/kubernetes_api.py can call."""
    text = (ROOT / "daemon" / "tritonguard" / "clients" / "kubernetes_api.py").read_text()
    calls: set[tuple[str, str, str]] = set()
    for attr, verb, resource in re.findall(
        # self._apps.read_…, or a local alias of it (apps = self._apps).
        r"(?:self\._|\b)(apps|core|coordination|autoscaling)\.(read|list|patch|create|replace)"
        r"_namespaced_(\w+?)(?:\b|,)",
        text,
    ):
        calls.add((_API_GROUPS[attr], _RESOURCES[resource], _VERBS[verb]))
    # Each watch_… method streams its resource (list with watch=True).
    for resource in re.findall(r"(?:async )?def watch_(\w+)\(", text):
        calls.add(("", _RESOURCES[resource.removesuffix("s")], "watch"))
    for verb, after in re.findall(
        r"self\._custom\.(get|patch|create)_namespaced_custom_object,\s*(\w+,)", text
    ):
        group, resource = _CUSTOM[after]
        calls.add((group, resource, verb))
    return calls


def test_the_roles_grant_exactly_what_the_client_calls(objects: list[dict[str, Any]]) -> None:
    """Every verb the Kubernetes client calls is granted, and nothing it does not call is.

    Read from the client's source, so a new call without its grant (or a grant left behind
    by removed code) fails here rather than as a 403 in a cluster.
    """
    granted = {
        (group, resource, verb)
        for o in objects
        if o["kind"] == "Role"
        for rule in o["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    called = _calls_in_client()
    assert ("keda.sh", "scaledobjects", "patch") in called
    assert ("events.k8s.io", "events", "create") in called
    # ConfigMaps are read only when the config-maps component opts in (its own test).
    assert sorted(called - granted) == sorted(CONFIG_MAP_CALLS)
    assert sorted(granted - called) == []


# What ``discovery.watch_config_maps`` calls, granted only by deploy/components/config-maps.
CONFIG_MAP_CALLS = {("", "configmaps", verb) for verb in ("get", "list", "watch")}


def test_discovery_reads_pods_only_in_the_watched_namespaces(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Each namespace discovery watches has its Roles; nothing cluster-wide is granted.

    Discovery's Role has the verbs discovery calls (pods get/list/watch, replicasets get and
    list, controllerrevisions list: the revisions a rollout is diffed against);
    the actions' Role is there too, bound to the same service account.
    """
    config = _one(objects, "ConfigMap", "tritonguard-config")
    path = tmp_path / "config.yaml"
    path.write_text(config["data"]["config.yaml"])
    watched = load_settings(path).discovery.namespaces
    assert watched
    for obj in objects:
        if obj["kind"] == "ClusterRole":
            assert not any("pods" in r["resources"] for r in obj["rules"])
    for ns in watched:
        role = next(
            o
            for o in objects
            if o["kind"] == "Role"
            and o["metadata"]["name"] == "tritonguard-discovery"
            and o["metadata"]["namespace"] == ns
        )
        verbs = {res: set(r["verbs"]) for r in role["rules"] for res in r["resources"]}
        assert verbs == {
            "pods": {"get", "list", "watch"},
            "replicasets": {"get", "list"},
            "controllerrevisions": {"list"},
        }
        for name in ("tritonguard-discovery", "tritonguard-actions"):
            binding = next(
                o
                for o in objects
                if o["kind"] == "RoleBinding"
                and o["metadata"]["name"] == name
                and o["metadata"]["namespace"] == ns
            )
            assert binding["roleRef"]["name"] == name
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": "tritonguard", "namespace": "tritonguard"}
            ]


def test_shipped_config_and_playbooks_load(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    """The ConfigMap's settings load with the daemon's loader; its playbooks parse."""
    config = _one(objects, "ConfigMap", "tritonguard-config")
    path = tmp_path / "config.yaml"
    path.write_text(config["data"]["config.yaml"])
    settings = load_settings(path)
    # A fresh install tells on-call at once and changes nothing on a server.
    assert (settings.dry_run.notify, settings.dry_run.remediate) == (False, True)
    assert settings.listen.endswith(":9108")
    playbooks = _one(objects, "ConfigMap", "tritonguard-playbooks")
    for name, text in playbooks["data"].items():
        assert load_playbooks_text(text, name, catalog())


def test_monitor_examples_target_the_service_port(objects: list[dict[str, Any]]) -> None:
    """The ServiceMonitor example selects the Service's labels and scrapes its named port."""
    service = _one(objects, "Service")
    docs = list(yaml.safe_load_all((DEPLOY / "examples" / "servicemonitor.yaml").read_text()))
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def _effective_settings(
    objects: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """Load the rendered ConfigMap's settings under the Deployment's literal env, as the pod does."""
    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    for var in container["env"]:
        if "value" in var:
            monkeypatch.setenv(var["name"], var["value"])
    path = tmp_path / "config.yaml"
    path.write_text(_one(objects, "ConfigMap", "tritonguard-config")["data"]["config.yaml"])
    return load_settings(path)


@pytest.mark.parametrize(
    ("overlay", "notify", "remediate"),
    [(None, False, True), ("dry-run", True, True), ("act", False, False)],
)
def test_overlays_render_with_their_switches(
    overlay: str | None,
    notify: bool,
    remediate: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """deploy/ and each overlay render, validate strictly, and set the two dry-run switches.

    deploy/ notifies and plans remediation; dry-run notifies nothing and acts on nothing; act
    does both for real. Each keeps the same objects, and its playbooks load.
    """
    objects = _render(DEPLOY if overlay is None else DEPLOY / "overlays" / overlay)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert len(objects) == len(_render(DEPLOY))
    settings = _effective_settings(objects, tmp_path, monkeypatch)
    assert (settings.dry_run.notify, settings.dry_run.remediate) == (notify, remediate)
    playbooks = _one(objects, "ConfigMap", "tritonguard-playbooks")
    books = [
        b
        for name, text in playbooks["data"].items()
        for b in load_playbooks_text(text, name, catalog())
    ]
    acting = {b.name for b in books if not b.guards.dry_run}
    expected = {"notify-on-call"}
    if overlay == "act":
        expected.add("batching-delay-lower-queue-delay")
    assert acting == expected


def test_act_example_is_the_shipped_playbook_with_its_dry_run_off() -> None:
    """The act overlay's playbook differs from the shipped batching_delay one in dry_run only."""
    example = (DEPLOY / "overlays" / "act" / "playbooks" / "batching_delay.yaml").read_text()
    shipped = (ROOT / "playbooks" / "batching_delay.yaml").read_text()
    [act] = load_playbooks_text(example, "act.yaml", catalog())
    [base] = load_playbooks_text(shipped, "shipped.yaml", catalog())
    assert base.guards.dry_run and not act.guards.dry_run
    off = base.model_copy(update={"guards": base.guards.model_copy(update={"dry_run": False})})
    # ``source`` (file:line) is left out of the dump: only the playbook itself is compared.
    assert act.model_dump() == off.model_dump()
