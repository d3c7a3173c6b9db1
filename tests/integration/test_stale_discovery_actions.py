"""A step on a namespace whose pod watch went stale fails saying so, in the audit trail.

The daemon follows pods through the real Kubernetes client against the fake API server, with
its playbook service built as ``tritonguard run`` builds it. With the API gone past
``discovery.stale_after_s`` the pod's endpoint is withheld from actions, and a ``triton.*``
step names the watch's failure, how long it has lasted, and what to check.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests import waiting
from tests.fakes.kube import FakeKube
from tests.playbook_harness import handle, incident
from tritonguard.core.engine import Engine
from tritonguard.core.guards import GuardSettings
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import build_service
from tritonguard.settings import Settings

NS = "ml"
RELOAD = """
name: reload
when: {causes: [model_reload]}
guards: {dry_run: false}
steps:
  - action: triton.load
"""


async def test_a_step_on_a_stale_namespace_says_the_watch_failed_and_what_to_check(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    """While the pod watch fails past the bound the reload changes nothing and says why.

    Its failed record (the step's result, and the audit trail's row) names the stale watch
    of ``ml``, how long it has failed, that endpoints are withheld, and what to check; not
    only that no endpoint is known.
    """
    fake_kube.add_pod(NS, "triton-0", labels={"app": "triton"}, ip="127.0.0.1")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig(namespace=NS))
    books = tmp_path / "books"
    books.mkdir()
    (books / "reload.yaml").write_text(RELOAD)
    settings = Settings(
        listen="127.0.0.1:0",
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        dry_run=False,
        kube={"kubeconfig": kubeconfig},
        discovery={
            "namespaces": [NS],
            "metrics_port": "8002",
            "http_port": "8000",
            "stale_after_s": 0.5,
            "watch_timeout_s": 5,
        },
    )
    engine = Engine()
    service = build_service(
        settings, engine, guard_settings=GuardSettings(dry_run=False, require_fresh_data=False)
    )
    app = DaemonApp(settings, engine=engine, playbooks=service, on_targets=service.use_targets)
    assert app.discovery is not None and service.tritons is not None
    tritons = service.tritons
    task = asyncio.create_task(app.discovery.run())
    try:
        await waiting.wait_for(lambda: bool(tritons.discovered), 5.0)
        await fake_kube.stop()  # the API server goes away, and with it the watch
        await waiting.wait_for(lambda: not tritons.discovered, 5.0)
        event = incident("model_reload", namespace=NS, pod="triton-0")
        [rec] = await handle(service.stage, event)
        assert (rec.action, rec.status) == ("triton.load", "failed")
        reason = rec.reason
        assert reason.startswith(f"no Triton endpoint for {NS}/triton-0/resnet: ")
        assert f"pod discovery in namespace {NS} has been failing for" in reason
        assert "withheld from actions until the watch is current again" in reason
        assert "nothing was changed" in reason
        assert f"may list and watch pods in {NS}" in reason
        [row] = [r for r in service.store.decisions(event.incident_id) if r.action == "triton.load"]
        assert (row.status, row.reason) == ("failed", reason)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await app._close_clients()
        await service.close()
