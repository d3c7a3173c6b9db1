"""Alertmanager posting to the follower: the post is forwarded to the leader on the Lease.

Two daemons are built as ``tritonguard run`` builds them, electing on the fake Kubernetes
API; a real Debian ``prometheus-alertmanager`` with the shipped receiver posts to the
FOLLOWER's port, as the ``tritonguard`` Service does half the time. Debian's kubectl reads the
address the leader publishes on its Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.kube import FakeKube
from tests.fixtures_alertmanager import (  # noqa: F401 - alertmanager_starter: the fixture
    StartAlertmanager,
    alertmanager_starter,
    prometheus_alert,
    webhook_config,
)
from tests.fixtures_prometheus import free_port
from tests.integration.test_discovery_rollouts import kubectl
from tests.webhook_harness import PLAYBOOK, TOKEN, armed, daemon, notification, wait_until
from tests.webhook_harness import alert as webhook_alert
from tritonguard.runtime.leader_forwarding import ADDRESS_ANNOTATION, FORWARDED_BY_HEADER
from tritonguard.settings import Settings

pytestmark = pytest.mark.live

HOME = "tritonguard"
LEASE = "tritonguard-leader"
REQUESTS = 'alertmanager_notification_requests_total{integration="webhook"}'
REQUESTS_FAILED = 'alertmanager_notification_requests_failed_total{integration="webhook"}'
FIRING = "tritonguard_alertmanager_alerts_total"
FORWARDS = "tritonguard_alertmanager_forwards_total"
UNAUTHORIZED = "tritonguard_api_unauthorized_total"


class Replica:
    """One daemon replica on a fixed loopback port, campaigning on the shared Lease."""

    def __init__(
        self,
        tmp_path: Path,
        kubeconfig: Path,
        identity: str,
        *,
        token: str = TOKEN,
        advertise: str | None = None,
        shards: int = 1,
    ) -> None:
        self.identity = identity
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        home = tmp_path / identity
        books = home / "books"
        books.mkdir(parents=True)
        (books / "alerts.yaml").write_text(PLAYBOOK)
        (home / "token").write_text(token + "\n")
        settings = Settings(
            listen=f"127.0.0.1:{self.port}",
            evaluation_interval_s=0.2,
            shutdown_grace_s=2.0,
            playbook_dirs=[books],
            audit_db_path=home / "audit.sqlite3",
            api={"token_file": home / "token"},
            kube={
                "kubeconfig": kubeconfig,
                "namespace": HOME,
                "leader_election": True,
                "identity": identity,
                "advertise_url": advertise or self.base,
            },
            shard={"count": shards},
        )
        self.app, self.service = daemon(settings)

    def leads(self) -> bool:
        """Return whether the replica holds its Lease now."""
        state = self.service.leadership()
        return state is not None and bool(state["leader"])

    def metric(self, name: str, **labels: str) -> float:
        """Return one of the replica's own metrics (0 when absent)."""
        return self.app.registry.get_sample_value(name, labels) or 0.0


@contextlib.asynccontextmanager
async def serving(replica: Replica, *, lead: bool) -> AsyncIterator[Replica]:
    """Run the replica; wait until it leads (``lead``) or has lost its first round."""
    task = asyncio.create_task(replica.app.run(install_signals=False))
    try:
        if lead:
            await wait_until(replica.leads, timeout_s=15)
        else:
            await wait_until(
                lambda: (replica.service.leadership() or {}).get("holder") not in (None, ""),
                timeout_s=15,
            )
            assert not replica.leads()
        yield replica
    finally:
        replica.app.request_stop("test finished")
        await asyncio.wait_for(task, timeout=15)
        replica.service.store.close()


@pytest.fixture
def kubeconfig(fake_kube: FakeKube, tmp_path: Path) -> Path:
    """Return a kubeconfig for the fake API, which has tritonguard's namespace."""
    fake_kube.add_namespace(HOME)
    path = tmp_path / "kubeconfig"
    path.write_text(fake_kube.kubeconfig(namespace=HOME))
    return path


def _credentials(tmp_path: Path) -> Path:
    path = tmp_path / "alertmanager-token"
    path.write_text(TOKEN)
    return path


async def _post(base: str, body: Any, headers: Mapping[str, str]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/api/alertmanager", json=body, headers=dict(headers)) as resp,
    ):
        return resp.status, await resp.json()


async def test_alertmanager_posting_to_the_follower_reaches_the_leaders_playbook(
    tmp_path: Path, kubeconfig: Path, alertmanager: StartAlertmanager
) -> None:
    """Alertmanager posts to the follower only; the leader's alert book arms its playbook.

    The leader's address is on the Lease (read with kubectl); the follower keeps the alert
    too, as it may lead next, and the resolution reaches the leader the same way.
    """
    a = Replica(tmp_path, kubeconfig, "tritonguard-a")
    b = Replica(tmp_path, kubeconfig, "tritonguard-b")
    async with serving(a, lead=True), serving(b, lead=False):
        lease = json.loads(await kubectl(kubeconfig, "get", "lease", LEASE, "-o", "json"))
        published = json.loads(lease["metadata"]["annotations"][ADDRESS_ANNOTATION])
        assert published == {"identity": "tritonguard-a", "url": a.base}

        am = await asyncio.to_thread(alertmanager, webhook_config(b.base, _credentials(tmp_path)))
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: a.service.alerts.count == 1, timeout_s=30)
        firing = await armed(a.service)
        assert b.service.alerts.count == 1
        assert b.metric(FORWARDS, outcome="delivered") >= 1
        assert a.metric(FORWARDS, outcome="delivered") == 0
        await wait_until(lambda: am.metric(REQUESTS) >= 1, timeout_s=10)
        assert am.metric(REQUESTS_FAILED) == 0

        await asyncio.to_thread(am.post_alerts, [prometheus_alert(resolved=True)])
        await wait_until(lambda: a.service.alerts.count == 0, timeout_s=30)
        after_resolve = await armed(a.service)
    assert [(r.playbook, r.status) for r in firing] == [("reload-on-slo-burn", "planned")]
    assert after_resolve == []


async def _relay(port: int, to_port: int) -> asyncio.Server:
    """Listen on ``port`` and pass every connection through to ``to_port`` (the leader)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", to_port)
        await asyncio.gather(
            pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True
        )

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def test_a_leader_out_of_reach_gets_alertmanager_a_5xx_and_its_retry_lands(
    tmp_path: Path, kubeconfig: Path, alertmanager: StartAlertmanager
) -> None:
    """While the leader's published address refuses connections the follower answers 503.

    Alertmanager retries on 5xx (its failed requests count, its log says it will retry); once
    the address answers again, a retry reaches the leader's alert book.
    """
    gate = free_port()
    a = Replica(tmp_path, kubeconfig, "tritonguard-a", advertise=f"http://127.0.0.1:{gate}")
    b = Replica(tmp_path, kubeconfig, "tritonguard-b")
    async with serving(a, lead=True), serving(b, lead=False):
        am = await asyncio.to_thread(alertmanager, webhook_config(b.base, _credentials(tmp_path)))
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: am.metric(REQUESTS_FAILED) >= 2, timeout_s=30)
        assert a.service.alerts.count == 0
        assert b.service.alerts.count == 1  # kept here all the same: b may lead next
        assert b.metric(FORWARDS, outcome="unreachable") >= 2
        assert "unexpected status code 503" in am.log_tail(400)
        assert "will retry later" in am.log_tail(400)

        relay = await _relay(gate, a.port)
        try:
            await wait_until(lambda: a.service.alerts.count == 1, timeout_s=40)
        finally:
            relay.close()
            await relay.wait_closed()


async def test_a_forwarded_post_with_a_bad_token_is_refused_and_alertmanager_retries(
    tmp_path: Path, kubeconfig: Path, alertmanager: StartAlertmanager
) -> None:
    """The leader checks a forwarded post's token like any other: a wrong one gets 401.

    A follower whose token is not the leader's (a rotation half rolled out) answers
    Alertmanager 502, not the 401 that would make it give up, and nothing is kept there.
    """
    a = Replica(tmp_path, kubeconfig, "tritonguard-a", token="a-token-after-rotation-7c2e")
    b = Replica(tmp_path, kubeconfig, "tritonguard-b")
    async with serving(a, lead=True), serving(b, lead=False):
        body = notification([webhook_alert("fp-1")])
        status, reply = await _post(
            a.base,
            body,
            {"Authorization": f"Bearer {TOKEN}", FORWARDED_BY_HEADER: "tritonguard-b"},
        )
        assert status == 401, reply
        assert a.service.alerts.count == 0

        am = await asyncio.to_thread(alertmanager, webhook_config(b.base, _credentials(tmp_path)))
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: am.metric(REQUESTS_FAILED) >= 2, timeout_s=30)
        assert "unexpected status code 502" in am.log_tail(400)
        assert a.service.alerts.count == 0
        refused = a.metric(UNAUTHORIZED, endpoint="/api/alertmanager", reason="wrong_token")
        assert refused >= 3


async def test_a_forwarded_post_is_never_forwarded_again(tmp_path: Path, kubeconfig: Path) -> None:
    """A marked post reaching a follower is answered 503 and goes nowhere else."""
    a = Replica(tmp_path, kubeconfig, "tritonguard-a")
    b = Replica(tmp_path, kubeconfig, "tritonguard-b")
    async with serving(a, lead=True), serving(b, lead=False):
        body = notification([webhook_alert("fp-1")])
        auth = {"Authorization": f"Bearer {TOKEN}"}
        status, reply = await _post(b.base, body, {**auth, FORWARDED_BY_HEADER: "tritonguard-x"})
        await asyncio.sleep(0.5)
        assert status == 503, reply
        assert "not forwarded again" in reply["error"]
        assert a.metric(FIRING, status="firing") == 0
        assert a.service.alerts.count == 0
        assert b.metric(FORWARDS, outcome="delivered") == 0
        # The same post, marked, is kept by the leader and goes no further.
        status, reply = await _post(a.base, body, {**auth, FORWARDED_BY_HEADER: "tritonguard-b"})
        assert (status, reply) == (200, {"received": 1})
        assert a.service.alerts.count == 1
        assert a.metric(FORWARDS, outcome="delivered") == 0


async def test_a_leader_advertising_the_follower_makes_one_hop_and_no_loop(
    tmp_path: Path, kubeconfig: Path, fake_kube: FakeKube
) -> None:
    """The Lease sends the follower to itself: its forwarded copy is refused, not passed on.

    One post to the follower is seen there twice (Alertmanager's, and its own forwarded copy,
    answered 503), never a third time, and Alertmanager would be answered 503.
    """
    a = Replica(tmp_path, kubeconfig, "tritonguard-a")
    b = Replica(tmp_path, kubeconfig, "tritonguard-b")
    async with serving(a, lead=True), serving(b, lead=False):
        # The leader's address rewritten to the follower's own, as a bad advertise_url would.
        elector = a.service.elector
        assert elector is not None
        elector.advertise_url = b.base
        elector.nudge()
        await wait_until(
            lambda: (
                b.base
                in ((fake_kube.get_object("Lease", HOME, LEASE) or {}).get("metadata") or {})
                .get("annotations", {})
                .get(ADDRESS_ANNOTATION, "")
            ),
            timeout_s=15,
        )
        body = notification([webhook_alert("fp-1")])
        status, reply = await _post(b.base, body, {"Authorization": f"Bearer {TOKEN}"})
        await asyncio.sleep(0.5)
        assert status == 503, reply
        [delivery] = reply["forwarded"]
        assert delivery["status"] == 503 and delivery["outcome"] == "refused"
        assert b.metric(FIRING, status="firing") == 2
        assert a.metric(FIRING, status="firing") == 0


async def test_with_shards_the_receiving_pod_forwards_to_every_shards_leader(
    tmp_path: Path, kubeconfig: Path, fake_kube: FakeKube, alertmanager: StartAlertmanager
) -> None:
    """Two shards, three pods: Alertmanager posts to shard 0's follower only.

    Shard 0's leader and shard 1's leader both keep the alert (each from its own Lease);
    with shard 1's leader out of reach, Alertmanager is answered 503 and retries.
    """
    gate = free_port()
    lead0 = Replica(tmp_path, kubeconfig, "tritonguard-0", shards=2)
    lead1 = Replica(
        tmp_path, kubeconfig, "tritonguard-1", shards=2, advertise=f"http://127.0.0.1:{gate}"
    )
    follower0 = Replica(tmp_path, kubeconfig, "tritonguard-2", shards=2)
    async with (
        serving(lead0, lead=True),
        serving(lead1, lead=True),
        serving(follower0, lead=False),
    ):
        lease = fake_kube.get_object("Lease", HOME, "tritonguard-leader-shard-1")
        assert lease is not None
        assert f"127.0.0.1:{gate}" in lease["metadata"]["annotations"][ADDRESS_ANNOTATION]
        am = await asyncio.to_thread(
            alertmanager, webhook_config(follower0.base, _credentials(tmp_path))
        )
        await asyncio.to_thread(am.post_alerts, [prometheus_alert()])
        await wait_until(lambda: lead0.service.alerts.count == 1, timeout_s=30)
        await wait_until(lambda: am.metric(REQUESTS_FAILED) >= 2, timeout_s=30)
        assert lead1.service.alerts.count == 0
        assert "unexpected status code 503" in am.log_tail(400)

        relay = await _relay(gate, lead1.port)
        try:
            await wait_until(lambda: lead1.service.alerts.count == 1, timeout_s=40)
        finally:
            relay.close()
            await relay.wait_closed()
        assert follower0.service.alerts.count == 1
        assert lead0.metric(FORWARDS, outcome="delivered") == 0
