"""No client follows a redirect, and credentials in a target URL authenticate but never show."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web

from tests import waiting
from tritonguard.clients.metrics_scraper import MetricsScraper, ScrapeTarget
from tritonguard.clients.prometheus_query import PrometheusQueryClient, PrometheusQueryError
from tritonguard.clients.triton_api import ACCESS_TOKEN_HEADER, TritonClient, TritonError
from tritonguard.core.samples import label
from tritonguard.logs import configure_logging
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.settings import Settings, target_from_url
from tritonguard.sources.scrape import ScrapeSource

CAPTURE = Path(__file__).parents[1] / "fixtures" / "expositions" / "triton_2_models.prom"
TOKEN = "tok-s3cret-value"
USER, PASSWORD = "user", "pass"


def _basic(user: str, password: str) -> str:
    """Return the Authorization header a server expects, computed apart from the product."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


GOOD_AUTH = _basic(USER, PASSWORD)
PROMETHEUS_EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


@dataclass
class Seen:
    """One request as a server received it."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Recorder:
    """A real HTTP server on a free loopback port that records every request it receives."""

    answer: Callable[[web.Request], Awaitable[web.StreamResponse]]
    seen: list[Seen] = field(default_factory=list)
    base: str = ""

    @property
    def host_port(self) -> str:
        """Return ``127.0.0.1:PORT``."""
        return self.base.removeprefix("http://")


@asynccontextmanager
async def _recording(
    answer: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[Recorder]:
    recorder = Recorder(answer)

    async def handle(request: web.Request) -> web.StreamResponse:
        recorder.seen.append(Seen(request.method, request.path_qs, dict(request.headers)))
        return await recorder.answer(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    recorder.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield recorder
    finally:
        await runner.cleanup()


def _redirecting_to(other: Recorder, status: int) -> Callable[[web.Request], Awaitable[Any]]:
    async def answer(request: web.Request) -> web.StreamResponse:
        # The Location carries credentials too: an error naming it must not show them.
        location = f"http://{USER}:{PASSWORD}@{other.host_port}{request.path_qs}"
        return web.Response(status=status, headers={"Location": location})

    return answer


async def _json_ok(request: web.Request) -> web.StreamResponse:
    return web.json_response(PROMETHEUS_EMPTY if request.path.startswith("/api/") else {})


@pytest.mark.parametrize("status", [302, 307])
async def test_triton_client_follows_no_redirect_and_keeps_its_token_home(status: int) -> None:
    """A redirect to another server is an error; neither token nor credentials reach it.

    The first server does get the token and the basic authentication: they are sent to the
    configured origin, and only there.
    """
    async with _recording(_json_ok) as other, _recording(_json_ok) as origin:
        origin.answer = _redirecting_to(other, status)
        url = f"http://admin:pw-s3cret@{origin.host_port}"
        async with TritonClient(url, access_token=TOKEN, timeout_s=5.0) as client:
            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "POST /v2/repository/index": client.repository_index,
                "POST /v2/repository/models/m/load": lambda: client.load("m", {"name": "m"}),
                "POST /v2/repository/models/m/unload": lambda: client.unload("m"),
                "GET /v2/models/m/config": lambda: client.model_config("m"),
                "POST /v2/models/m/infer": lambda: client.infer("m", []),
            }
            errors = {}
            for name, call in calls.items():
                with pytest.raises(TritonError) as caught:
                    await call()
                errors[name] = caught.value
            ready = await client.server_ready()

    assert other.seen == []
    assert ready is False
    for name, error in errors.items():
        method, path = name.split()
        assert str(error).startswith(f"{method} {origin.base}{path}: HTTP {status} redirect to ")
        assert "redirects are not followed" in str(error)
        assert error.status == status
        assert "s3cret" not in str(error) and PASSWORD not in str(error)
    restricted = [s for s in origin.seen if s.path.startswith("/v2/repository/")]
    assert len(restricted) == 3
    assert all(s.headers.get(ACCESS_TOKEN_HEADER) == TOKEN for s in restricted)
    assert {s.headers.get("Authorization") for s in origin.seen} == {_basic("admin", "pw-s3cret")}


@pytest.mark.parametrize("status", [302, 307])
async def test_scraper_follows_no_redirect(status: int) -> None:
    """A scrape answered with a redirect is an error naming it; nothing reaches the other host."""
    async with _recording(_json_ok) as other, _recording(_json_ok) as origin:
        origin.answer = _redirecting_to(other, status)
        scraper = MetricsScraper(timeout_s=5.0)
        target = ScrapeTarget(
            "t", f"http://{USER}:{PASSWORD}@{origin.host_port}/metrics", {"X-Tenant": "ml"}
        )
        result = await scraper.scrape(target)
        await scraper.close()

    assert other.seen == []
    assert not result.ok and result.status == status and result.text is None
    assert result.error is not None
    assert result.error.startswith(f"HTTP {status} ")
    assert f"to http://{other.host_port}/metrics: redirects are not followed" in result.error
    assert PASSWORD not in result.error
    (seen,) = origin.seen
    assert seen.headers.get("Authorization") == GOOD_AUTH
    assert seen.headers.get("X-Tenant") == "ml"


@pytest.mark.parametrize("status", [302, 307])
async def test_prometheus_client_follows_no_redirect(status: int) -> None:
    """A query answered with a redirect fails; the headers and credentials stay at home."""
    async with _recording(_json_ok) as other, _recording(_json_ok) as origin:
        origin.answer = _redirecting_to(other, status)
        client = PrometheusQueryClient(
            f"http://admin:pw-s3cret@{origin.host_port}",
            timeout_s=5.0,
            headers={"X-Scope-OrgID": "tenant-1"},
        )
        try:
            with pytest.raises(PrometheusQueryError) as caught:
                await client.instant_query("up")
        finally:
            await client.close()

    assert other.seen == []
    message = str(caught.value)
    assert message.startswith(f"{origin.base}: HTTP {status} redirect to http://{other.host_port}")
    assert "redirects are not followed" in message
    assert "s3cret" not in message and PASSWORD not in message
    (seen,) = origin.seen
    assert seen.headers.get("X-Scope-OrgID") == "tenant-1"
    assert seen.headers.get("Authorization") == _basic("admin", "pw-s3cret")


async def test_prometheus_client_still_queries_a_server_that_answers() -> None:
    """Without a redirect the query goes through, authenticated by the URL's credentials."""
    async with _recording(_json_ok) as prometheus:
        client = PrometheusQueryClient(f"http://admin:pw@{prometheus.host_port}", timeout_s=5.0)
        try:
            assert await client.instant_query("up") == []
        finally:
            await client.close()
    assert client.url == prometheus.base
    (seen,) = prometheus.seen
    assert seen.headers.get("Authorization") == _basic("admin", "pw")


def _checking_auth(body: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def answer(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != GOOD_AUTH:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="m"'})
        return web.Response(text=body, content_type="text/plain")

    return answer


async def test_scrape_source_sends_url_credentials_and_labels_without_them() -> None:
    """A ``--target`` with user:pass authenticates; its name and ``instance`` hold no userinfo."""
    async with _recording(_checking_auth(CAPTURE.read_text())) as server:
        target = target_from_url(f"http://{USER}:{PASSWORD}@{server.host_port}/metrics")
        source = ScrapeSource([target], MetricsScraper(timeout_s=5.0))
        result = await source.poll()
        await source.close()

    (status,) = result.statuses
    assert status.ok and status.target == server.host_port
    assert result.samples
    assert {label(s.labels, "instance") for s in result.samples} == {server.host_port}
    assert not any(PASSWORD in value for s in result.samples for _, value in s.labels)
    assert [s.headers.get("Authorization") for s in server.seen] == [GOOD_AUTH]


@pytest.fixture
def daemon_log() -> Iterator[io.StringIO]:
    """Route the daemon's logs (JSON lines, as in a cluster) into a buffer; restore after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    config = structlog.get_config()
    stream = io.StringIO()
    configure_logging("json", "debug", stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
        structlog.configure(**config)


async def test_daemon_never_shows_the_credentials_of_a_target_url(daemon_log: io.StringIO) -> None:
    """Credentials in target URLs authenticate and show nowhere: /readyz, /metrics, the log.

    Targets are given as ``http://user:pass@host/metrics``; the password is in no name, label
    or error message. One target serves a good exposition, one a garbled one (its error quotes the URL), one
    redirects to a Location that carries credentials (its error quotes the Location).
    """
    garbled = 'nv_inference_count{model="a"} 1\nnv_inference_count{model="b" 2\n'
    async with (
        _recording(_checking_auth(CAPTURE.read_text())) as good,
        _recording(_checking_auth(garbled)) as bad,
        _recording(_json_ok) as elsewhere,
        _recording(_json_ok) as moved,
    ):
        moved.answer = _redirecting_to(elsewhere, 307)
        servers = (good, bad, moved)
        settings = Settings(
            targets=[
                target_from_url(f"http://{USER}:{PASSWORD}@{s.host_port}/metrics") for s in servers
            ],
            scrape_interval_s=0.2,
            scrape_timeout_s=0.2,
            scrape_jitter_s=0.0,
            evaluation_interval_s=0.2,
            listen="127.0.0.1:0",
            shutdown_grace_s=2.0,
        )
        app = DaemonApp(settings)
        task = asyncio.create_task(app.run(install_signals=False))
        try:

            async def listening() -> bool:
                return app.http is not None and app.http.port != 0

            await waiting.wait_for(listening, 10.0)
            assert app.http is not None
            base = f"http://127.0.0.1:{app.http.port}"
            async with aiohttp.ClientSession() as http:

                async def scraped_all_twice() -> bool:
                    async with http.get(f"{base}/readyz") as resp:
                        ready = resp.status == 200
                    return ready and all(len(s.seen) >= 2 for s in servers)

                await waiting.wait_for(scraped_all_twice, 10.0)
                async with http.get(f"{base}/readyz") as resp:
                    readyz = await resp.text()
                async with http.get(f"{base}/metrics") as resp:
                    metrics = await resp.text()
        finally:
            app.request_stop("test finished")
            await asyncio.wait_for(task, timeout=10)
    log = daemon_log.getvalue()

    for shown in (readyz, metrics, log):
        assert PASSWORD not in shown
        assert f"{USER}:{PASSWORD}" not in shown
    assert elsewhere.seen == []
    assert {s.headers.get("Authorization") for s in good.seen + bad.seen} == {GOOD_AUTH}
    targets = json.loads(readyz)["targets"]
    assert set(targets) == {f"scrape/{s.host_port}" for s in servers}
    assert targets[f"scrape/{good.host_port}"]["ok"] is True
    bad_error = targets[f"scrape/{bad.host_port}"]["error"]
    assert bad_error.startswith(f"bad exposition: http://{bad.host_port}/metrics:2:")
    moved_error = targets[f"scrape/{moved.host_port}"]["error"]
    assert f"HTTP 307 Temporary Redirect to http://{elsewhere.host_port}/metrics" in moved_error
    assert f'tritonguard_source_up{{source="scrape",target="{good.host_port}"}} 1.0' in metrics
    assert f'tritonguard_source_up{{source="scrape",target="{bad.host_port}"}} 0.0' in metrics
    assert "daemon starting" in log and good.host_port in log
    assert "source target failed" in log and "redirects are not followed" in log
