"""Mounted ConfigMaps through the real client against the fake API: kubectl edits, the daemon names it.

Triton pods mount their model repository's ``config.pbtxt`` from ConfigMap ``models-config``
(one directly, one through a projected volume beside another ConfigMap). Debian's ``kubectl
edit`` raises the batcher's delay in it; the daemon's discovery, with ``watch_config_maps`` on,
sees the new resourceVersion on its watch, diffs the data against the read it took when the pod
appeared, and an incident on either pod names the ConfigMap, the key and the line, in its JSON,
the Slack root and the Kubernetes Event. With the switch off (the shipped default) no ConfigMap
is asked for at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import structlog

from tests import waiting
from tests.fakes.kube import FakeKube
from tests.unit.test_rollout_changes import incident
from tritonguard.clients.kubernetes_api import CONFIG_MAP_PAGE, KubernetesClient, KubernetesError
from tritonguard.core.cluster_events import note_for_incident
from tritonguard.core.findings import Subject
from tritonguard.core.slack_message import what_changed
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings

NS = "ml"
CONFIG = (
    'name: "ranker"\n'
    "max_batch_size: 8\n"
    "dynamic_batching {\n"
    "  max_queue_delay_microseconds: 500\n"
    "}\n"
)


@contextlib.asynccontextmanager
async def daemon(fake: FakeKube, tmp_path: Path, *, watch: bool) -> AsyncIterator[DaemonApp]:
    """Run a daemon's discovery against the fake, ConfigMap watching on or off."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake.kubeconfig(namespace=NS))
    settings = Settings(
        listen="127.0.0.1:0",
        kube={"kubeconfig": kubeconfig},
        discovery={
            "namespaces": [NS],
            "label_selector": "app=triton",
            "metrics_port": "8002",
            "http_port": "8000",
            "watch_timeout_s": 5,
            "watch_config_maps": watch,
        },
    )
    app = DaemonApp(settings)
    assert app.discovery is not None
    task = asyncio.create_task(app.discovery.run())
    try:
        yield app
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await app._close_clients()


async def kubectl_edit(kubeconfig: Path, home: Path, editor: str, *args: str) -> str:
    """Run Debian's ``kubectl edit`` with ``editor`` as KUBE_EDITOR; return its output."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home), "KUBE_EDITOR": editor}
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "edit",
        # The fake serves no OpenAPI document for client-side validation to fetch.
        "--validate=false",
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _pods(fake: FakeKube) -> None:
    fake.set_config_map(NS, "models-config", {"config.pbtxt": CONFIG, "labels.txt": "a\nb\n"})
    fake.set_config_map(NS, "warmup", {"warmup.json": "{}"})
    fake.add_pod(NS, "triton-0", {"app": "triton"}, ip="127.0.0.1", config_maps=("models-config",))
    fake.add_pod(
        NS, "triton-1", {"app": "triton"}, ip="127.0.0.2", config_maps=("warmup", "models-config")
    )
    fake.add_pod(NS, "triton-2", {"app": "triton"}, ip="127.0.0.3")


async def test_a_kubectl_edit_of_a_mounted_config_map_is_named_by_incidents_on_its_pods(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """The edited key and line, with the versions, reach the change of both mounting pods only."""
    _pods(fake_kube)
    async with daemon(fake_kube, tmp_path, watch=True) as app:
        await waiting.wait_for(lambda: len(app.known_targets()) == 3, 10.0)
        discovery: Any = app.discovery
        await waiting.wait_for(lambda: len(discovery._config_maps) == 2, 10.0)
        before = fake_kube.get_object("configmaps", NS, "models-config")
        edited_at = time.time()
        await kubectl_edit(
            tmp_path / "kubeconfig",
            tmp_path,
            # kubectl runs an editor with arguments through the shell.
            "sed -i 's/delay_microseconds: 500$/delay_microseconds: 150000/'",
            "configmap",
            "models-config",
        )
        after = fake_kube.get_object("configmaps", NS, "models-config")
        assert before is not None and after is not None
        assert "150000" in after["data"]["config.pbtxt"]
        onset = edited_at + 30.0
        subjects = {pod: Subject(NS, "ranker", pod) for pod in ("triton-0", "triton-1")}
        await waiting.wait_for(
            lambda: all(app.engine.change_before(s, onset) for s in subjects.values()), 10.0
        )
        assert app.engine.change_before(Subject(NS, "ranker", "triton-2"), onset) is None
        for subject in subjects.values():
            change = app.engine.change_before(subject, onset)
            assert change is not None and change.config_map is not None
            out = change.as_dict(onset=onset)
            assert out["kind"] == "config_map"
            mounted = out["config_map"]
            assert mounted["keys"] == ["config.pbtxt"]
            assert mounted["previous_version"] == before["metadata"]["resourceVersion"]
            assert mounted["resource_version"] == after["metadata"]["resourceVersion"]
            assert mounted["changes"] == [
                {
                    "path": "config.pbtxt:4",
                    "old": "max_queue_delay_microseconds: 500",
                    "new": "max_queue_delay_microseconds: 150000",
                }
            ]
            # Seen on a watch in sync: dated to when it was seen, not to the first read.
            assert mounted["at_latest"] - mounted["at_earliest"] < 5.0
            assert 25.0 < mounted["seen_before_onset_s"] <= 30.0
        ev = incident(app.engine.change_before(subjects["triton-0"], onset), opened_at=onset)
        note = note_for_incident(ev)
        assert note is not None
        assert "After: ConfigMap models-config key config.pbtxt changed" in note.note
        assert "s before onset (config.pbtxt:4: max_queue_delay_microseconds: 500 →" in note.note
        assert "ConfigMap models-config key config.pbtxt" in what_changed(ev)


async def test_with_the_switch_off_no_config_map_is_read(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """The shipped default grants and asks for no ConfigMap; an edit names nothing."""
    _pods(fake_kube)
    async with daemon(fake_kube, tmp_path, watch=False) as app:
        await waiting.wait_for(lambda: len(app.known_targets()) == 3, 10.0)
        fake_kube.set_config_map(NS, "models-config", {"config.pbtxt": CONFIG + "# edited\n"})
        await asyncio.sleep(0.5)
        assert app.engine.change_before(Subject(NS, "ranker", "triton-0"), time.time()) is None
    assert not [r for r in fake_kube.requests if "configmaps" in r.path]


async def test_the_config_map_watch_relists_after_410_and_marks_what_it_found_listed(
    fake_kube: FakeKube,
) -> None:
    """A change made while the API was away, its history compacted, comes from the relist.

    Changes on a watch in sync come as they happen; the relist's is marked ``listed``: it
    may date from any time since the watch failed.
    """
    fake_kube.set_config_map(NS, "models-config", {"config.pbtxt": CONFIG})
    kube = KubernetesClient.for_host(fake_kube.url, timeout_s=2.0)
    errors: list[KubernetesError] = []
    watch = kube.watch_config_maps(
        NS, initial_backoff_s=0.1, max_backoff_s=0.2, on_error=errors.append
    )
    try:
        async with contextlib.aclosing(watch) as events:
            first = await asyncio.wait_for(anext(events), 5)
            assert (first.type, first.listed, first.config_map.name) == (
                "ADDED",
                True,
                "models-config",
            )
            fake_kube.set_config_map(NS, "models-config", {"config.pbtxt": CONFIG + "#\n"})
            live = await asyncio.wait_for(anext(events), 5)
            assert (live.type, live.listed) == ("MODIFIED", False)
            assert live.config_map.data["config.pbtxt"].endswith("#\n")
            await fake_kube.stop()
            fake_kube.set_config_map(NS, "models-config", {"config.pbtxt": "changed"})
            fake_kube.compact()  # the watch's resourceVersion is now too old: 410 Gone
            pending = asyncio.ensure_future(asyncio.wait_for(anext(events), 10))
            await asyncio.sleep(0.5)
            await fake_kube.start()
            relisted = await pending
            assert (relisted.type, relisted.listed) == ("MODIFIED", True)
            assert relisted.config_map.data == {"config.pbtxt": "changed"}
            assert int(relisted.config_map.resource_version) > int(live.config_map.resource_version)
    finally:
        kube.close()
    assert errors and all(e.kind == "down" for e in errors)
    lists = [
        r
        for r in fake_kube.requests
        if r.method == "GET" and "/configmaps" in r.path and "watch" not in r.query
    ]
    assert len(lists) == 2  # the initial list and the relist after 410


async def test_the_config_map_list_is_read_in_pages_keeping_only_the_mounted_ones(
    fake_kube: FakeKube,
) -> None:
    """600 ConfigMaps, some 100 KB, are listed a page at a time and only mounted ones kept.

    One response of a namespace's every ConfigMap with its data would be held whole; pages
    of ``CONFIG_MAP_PAGE`` are asked for with ``limit`` and followed by ``continue``, and
    only the two ``keep`` wants come out of the list.
    """
    big = "x" * 100_000 + "\n"
    for i in range(600):
        data = {"config.pbtxt": big if i % 10 == 0 else f"# {i}\n"}
        fake_kube.set_config_map(NS, f"cm-{i:04d}", data)
    mounted = {"cm-0007", "cm-0420"}
    asked: list[tuple[str, str]] = []

    def keep(namespace: str, name: str) -> bool:
        asked.append((namespace, name))
        return name in mounted

    kube = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    watch = kube.watch_config_maps(NS, keep=keep)
    try:
        async with contextlib.aclosing(watch) as events:
            listed = [await asyncio.wait_for(anext(events), 10) for _ in mounted]
    finally:
        kube.close()
    assert {(e.type, e.listed, e.config_map.name) for e in listed} == {
        ("ADDED", True, name) for name in mounted
    }
    assert {e.config_map.name: e.config_map.data["config.pbtxt"] for e in listed} == {
        "cm-0007": "# 7\n",
        "cm-0420": big,
    }
    assert len(asked) == 600
    pages = [
        r
        for r in fake_kube.requests
        if r.method == "GET" and "/configmaps" in r.path and "watch" not in r.query
    ]
    assert len(pages) == -(-600 // CONFIG_MAP_PAGE)
    assert all(r.query.get("limit") == str(CONFIG_MAP_PAGE) for r in pages)
    assert "continue" not in pages[0].query and all(r.query.get("continue") for r in pages[1:])


async def test_a_mounted_secret_change_is_logged_and_named_without_the_secret_off_the_loop(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """An edited pbtxt token parameter and PEM key reach the log line and the change hidden.

    The diff runs in a worker thread, not on the event loop that scrapes every pod.
    """
    secret_config = CONFIG + (
        'parameters {\n  key: "hf_token"\n  value: {\n    string_value: "hf_OLDTOKEN42"\n  }\n}\n'
    )
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvOLDKEYBYTES\n-----END PRIVATE KEY-----\n"
    fake_kube.set_config_map(NS, "models-config", {"config.pbtxt": secret_config, "tls.key": pem})
    fake_kube.add_pod(
        NS, "triton-0", {"app": "triton"}, ip="127.0.0.1", config_maps=("models-config",)
    )
    # The log's events as the renderer gets them: which stream the rendered line reaches
    # depends on what configured logging earlier in the same process.
    with structlog.testing.capture_logs() as events:
        shown = await _edit_secrets(fake_kube, tmp_path, secret_config, pem)
    assert any(e.get("event") == "mounted ConfigMap changed" for e in events)
    rendered = json.dumps(events, default=str)
    assert "max_batch_size: 16" in rendered
    for text in (shown, rendered):
        assert "TOKEN42" not in text and "KEYBYTES" not in text


async def _edit_secrets(fake_kube: FakeKube, tmp_path: Path, secret_config: str, pem: str) -> str:
    """Edit the mounted token and key under a running daemon; return the change as shown."""
    async with daemon(fake_kube, tmp_path, watch=True) as app:
        discovery: Any = app.discovery
        await waiting.wait_for(lambda: len(discovery._config_maps) == 1, 10.0)
        threads: list[threading.Thread] = []
        reads = discovery._config_maps
        read = reads.read

        def recording(*args: Any, **kw: Any) -> Any:
            threads.append(threading.current_thread())
            return read(*args, **kw)

        reads.read = recording
        edited = {
            "config.pbtxt": secret_config.replace("OLD", "NEW").replace("8", "16"),
            "tls.key": pem.replace("OLD", "NEW"),
        }
        fake_kube.set_config_map(NS, "models-config", edited)
        subject = Subject(NS, "ranker", "triton-0")
        onset = time.time() + 30.0
        await waiting.wait_for(lambda: app.engine.change_before(subject, onset) is not None, 10.0)
        change = app.engine.change_before(subject, onset)
        assert change is not None and change.config_map is not None
        shown = json.dumps(change.as_dict(onset=onset)) + change.config_map.summary()
    assert threads and all(t is not threading.main_thread() for t in threads)
    return shown
