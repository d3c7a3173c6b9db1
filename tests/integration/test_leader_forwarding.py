"""The forwarder on its own: the Lease it reads on the fake API, and leaders that misbehave.

Each leader here is a real loopback server: one that never answers, one that answers far
more than a webhook reply, one that is the right address under a stale name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.fakes.kube import FakeKube
from tritonguard.clients.kubernetes_api import KubernetesClient
from tritonguard.runtime.leader_forwarding import (
    ADDRESS_ANNOTATION,
    FORWARDED_BY_HEADER,
    MAX_REPLY_BYTES,
    LeaderForwarder,
    answer,
    encode_address,
    post_to,
)

HOME = "tritonguard"
LEASE = "tritonguard-leader"
BODY = b'{"version": "4", "alerts": []}'

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubernetesClient]:
    """Yield the real client on the fake API, which has tritonguard's namespace."""
    fake_kube.add_namespace(HOME)
    client = KubernetesClient.for_host(fake_kube.url, timeout_s=5.0)
    try:
        yield client
    finally:
        client.close()


async def _lead(kube: KubernetesClient, holder: str, url: str, *, as_identity: str = "") -> None:
    """Write the Lease as ``holder``, publishing ``url`` under ``as_identity`` (or its own)."""
    address = {ADDRESS_ANNOTATION: encode_address(as_identity or holder, url)}
    assert await kube.try_acquire_lease(HOME, LEASE, holder, 15, address)


@contextlib.asynccontextmanager
async def _server(serve: Serve) -> AsyncIterator[str]:
    """Serve ``serve`` on a loopback port; yield its URL; wait for every handler after."""
    handlers: set[asyncio.Task[Any]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await serve(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()
        await asyncio.gather(*handlers, return_exceptions=True)


def _forwarder(
    kube: KubernetesClient, *, leads: bool = False, timeout_s: float = 1.0
) -> LeaderForwarder:
    return LeaderForwarder(
        kube,
        namespace=HOME,
        leases=[LEASE],
        own_lease=LEASE,
        identity="tritonguard-b",
        token="t0ken",
        leads=lambda: leads,
        timeout_s=timeout_s,
    )


async def test_a_leader_that_never_answers_costs_the_timeout_and_a_503(
    kube: KubernetesClient,
) -> None:
    """A leader that takes the connection and says nothing is given up on at timeout_s."""
    held: list[bytes] = []
    release = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(await reader.read(65536))
        await release.wait()

    async with _server(silent) as url:
        await _lead(kube, "tritonguard-a", url)
        started = time.monotonic()
        [delivery] = await _forwarder(kube, timeout_s=0.5).forward(BODY)
        took = time.monotonic() - started
        release.set()
    assert delivery.outcome == "unreachable" and "within 0.5s" in delivery.detail
    assert 0.5 <= took < 2.0
    assert answer(0, [delivery])[0] == 503
    # What reached the leader: the body, the follower's own token, and the mark.
    request = held[0].decode()
    assert request.startswith("POST /api/alertmanager HTTP/1.1\r\n")
    assert "Authorization: Bearer t0ken\r\n" in request
    assert f"{FORWARDED_BY_HEADER}: tritonguard-b\r\n" in request
    assert request.endswith(BODY.decode())


async def test_a_huge_reply_is_cut_not_held(kube: KubernetesClient) -> None:
    """A leader answering 10 MiB is read to MAX_REPLY_BYTES at most; its 200 still counts."""

    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        size = 10 * 1024 * 1024
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
        with contextlib.suppress(ConnectionError):
            for _ in range(size // 65536):
                writer.write(b"x" * 65536)
                await writer.drain()

    async with _server(huge) as url:
        status, reply = await post_to(url, BODY, {})
        await _lead(kube, "tritonguard-a", url)
        [delivery] = await _forwarder(kube, timeout_s=5.0).forward(BODY)
    assert status == 200 and 0 < len(reply) <= MAX_REPLY_BYTES
    assert (delivery.outcome, delivery.status) == ("delivered", 200)
    assert isinstance(delivery.detail, str) and len(delivery.detail) <= 500


async def test_an_address_published_by_a_former_holder_is_not_used(
    kube: KubernetesClient,
) -> None:
    """The Lease's holder is c but the address says a: nothing is posted, Alertmanager gets 503."""
    posted: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        posted.append(await reader.read(65536))

    async with _server(record) as url:
        await _lead(kube, "tritonguard-c", url, as_identity="tritonguard-a")
        [delivery] = await _forwarder(kube).forward(BODY)
    assert (delivery.outcome, delivery.holder) == ("no_leader", "tritonguard-c")
    assert "publishes no address" in delivery.detail
    assert posted == []
    assert answer(0, [delivery])[0] == 503


async def test_a_replica_named_on_the_lease_that_may_not_act_posts_to_nobody(
    kube: KubernetesClient,
) -> None:
    """The Lease still names this replica, whose renewal is overdue: no post to itself, a 503.

    A replica that leads forwards nothing at all.
    """
    await _lead(kube, "tritonguard-b", "http://127.0.0.1:9")
    [delivery] = await _forwarder(kube).forward(BODY)
    assert delivery.outcome == "no_leader" and "renewal is overdue" in delivery.detail
    assert await _forwarder(kube, leads=True).forward(BODY) == []


async def test_a_redirect_is_not_followed_with_the_token(kube: KubernetesClient) -> None:
    """A leader's address answering 307 elsewhere gets no second post: the token stays put.

    The forwarded post carries the daemon's bearer token; only the address on the Lease may
    receive it. The 307 is the leader's answer (a refusal), and the other server sees nothing.
    """
    elsewhere: list[bytes] = []

    async def other(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        elsewhere.append(await reader.read(65536))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async with _server(other) as target:

        async def moved(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65536)
            head = f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}/api/alertmanager\r\n"
            writer.write(f"{head}Content-Length: 0\r\n\r\n".encode())
            await writer.drain()

        async with _server(moved) as url:
            await _lead(kube, "tritonguard-a", url)
            [delivery] = await _forwarder(kube, timeout_s=5.0).forward(BODY)
    assert (delivery.outcome, delivery.status) == ("refused", 307)
    assert elsewhere == []
