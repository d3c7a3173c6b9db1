"""What the daemon says about leadership on /metrics: whether it needs a leader, and leads.

``TritonguardNoLeader`` reads these two gauges. A daemon with a playbook stage campaigns
for the Lease even with no playbook loaded (it owns the Slack threads, the outbox and the
Kubernetes Events); one without a stage only diagnoses, needs no leader, and says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from tests import waiting
from tests.fakes.kube import FakeKube
from tritonguard.core.engine import Engine
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import build_service
from tritonguard.settings import Settings


def _settings(**extra: object) -> Settings:
    return Settings.model_validate(
        {
            "targets": [],
            "evaluation_interval_s": 0.2,
            "listen": "127.0.0.1:0",
            "shutdown_grace_s": 2.0,
            **extra,
        }
    )


def _value(metrics: str, name: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@asynccontextmanager
async def _serving(app: DaemonApp) -> AsyncIterator[str]:
    """Run the daemon; yield its base URL; stop it and wait for a clean exit."""
    task = asyncio.create_task(app.run(install_signals=False))
    await waiting.wait_for(
        lambda: app.http is not None and app.http.port != 0,
        5,
        what="the daemon to listen",
        poll_s=0.05,
    )
    assert app.http is not None
    try:
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=10)


async def _gauges(url: str, want: tuple[float, float], timeout_s: float = 5.0) -> None:
    """Scrape /metrics until (tritonguard_leader_needed, tritonguard_leader) is ``want``."""
    seen: tuple[float | None, float | None] = (None, None)
    async with aiohttp.ClientSession() as http:

        async def scraped_as_wanted() -> bool:
            nonlocal seen
            async with http.get(f"{url}/metrics") as resp:
                text = await resp.text()
            seen = (_value(text, "tritonguard_leader_needed"), _value(text, "tritonguard_leader"))
            return seen == want

        try:
            await waiting.wait_for(scraped_as_wanted, timeout_s, poll_s=0.1)
        except AssertionError as missed:
            # Name both gauges' last values, which the bare miss (False) would not.
            raise AssertionError(f"(leader_needed, leader) is {seen}, wanted {want}") from missed


async def test_a_daemon_without_a_playbook_stage_needs_no_leader() -> None:
    """Diagnose-only: tritonguard_leader_needed 0 (and tritonguard_leader 0) from the start."""
    app = DaemonApp(_settings())
    async with _serving(app) as url:
        await _gauges(url, (0.0, 0.0))


async def test_a_daemon_with_no_playbook_loaded_still_campaigns_and_leads(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    """With a playbook stage but no playbook file, the daemon takes the Lease and reports 1/1.

    It needs a leader (it posts incident threads and writes Events), so it reports
    leader_needed 1, and once its election round holds the Lease on the fake API, leader 1.
    """
    fake_kube.add_namespace("tritonguard")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fake_kube.kubeconfig())
    books = tmp_path / "books"
    books.mkdir()
    settings = _settings(
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        kube={"kubeconfig": kubeconfig, "leader_election": True, "identity": "tritonguard-a"},
    )
    engine = Engine()
    service = build_service(settings, engine)
    state = service.playbook_state()
    assert state is not None and state.playbooks == 0
    app = DaemonApp(settings, engine=engine, playbooks=service)
    async with _serving(app) as url:
        await _gauges(url, (1.0, 1.0))
        lease = fake_kube.get_object("Lease", "tritonguard", "tritonguard-leader")
        assert lease is not None and lease["spec"]["holderIdentity"] == "tritonguard-a"
