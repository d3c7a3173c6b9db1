"""Async client for Triton's HTTP/REST API: health, config, stats, metadata, repository, infer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp

from tritonguard.clients.ports import TritonApi
from tritonguard.core.urls import redact_url, split_userinfo

ACCESS_TOKEN_HEADER = "triton-access-token"


class TritonError(RuntimeError):
    """A Triton request failed; the message is one line naming the URL and the reason."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _refuse_redirect(method: str, url: str, resp: aiohttp.ClientResponse) -> None:
    """Raise for a 3xx answer: following it could hand the access token to another host."""
    if 300 <= resp.status < 400:
        location = resp.headers.get("Location")
        where = f" to {_one_line(redact_url(location), 200)}" if location else ""
        raise TritonError(
            f"{method} {url}: HTTP {resp.status} redirect{where}: redirects are not followed; "
            "set triton_url to the server's own address",
            resp.status,
        )


class TritonClient(TritonApi):
    """One Triton server's HTTP endpoint. Use ``async with`` or call ``close()``.

    ``access_token`` is sent as the ``triton-access-token`` header, which servers started with
    ``--http-restricted-api=model-repository:...`` require for the repository API. Credentials
    in ``base_url`` (``http://user:pass@host:8000``) are sent as HTTP basic authentication and
    left out of ``base_url`` and every error message. Redirects are never followed, so the
    token and the credentials only ever go to ``base_url``.

    Every request goes on a connection of its own. Triton's HTTP server hands each connection
    to one of its worker threads, and a repository load holds its thread until the model is
    loaded: a request on a kept-alive connection of that thread waits behind the load, which
    may be stuck in the model's initialize() for minutes. A new connection goes to a thread
    that is free.
    """

    def __init__(
        self,
        base_url: str,
        *,
        access_token: str | None = None,
        timeout_s: float = 10.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url, creds = split_userinfo(base_url.rstrip("/"))
        self._auth_headers = {} if creds is None else {"Authorization": creds.authorization()}
        self.access_token = access_token
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session = session
        self._own_session = session is None

    async def __aenter__(self) -> TritonClient:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session this client opened (not one passed in)."""
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    def _sess(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self.timeout, connector=aiohttp.TCPConnector(force_close=True)
            )
            self._own_session = True
        return self._session

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        restricted: bool = False,
        timeout_s: float | None = None,
        expect_json: bool = True,
    ) -> Any:
        url = f"{self.base_url}{path}"
        headers = dict(self._auth_headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        if restricted and self.access_token:
            headers[ACCESS_TOKEN_HEADER] = self.access_token
        timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s is not None else self.timeout
        data = None if body is None else json.dumps(body)
        try:
            async with self._sess().request(
                method,
                url,
                data=data,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
            ) as resp:
                _refuse_redirect(method, url, resp)
                text = await resp.text()
                if resp.status >= 400:
                    reason = text
                    with contextlib.suppress(ValueError, AttributeError):
                        reason = str(json.loads(text).get("error", text))
                    raise TritonError(
                        f"{method} {url}: HTTP {resp.status}: {_one_line(reason)}", resp.status
                    )
                if not expect_json:
                    return text
                if not text:
                    return {}
                try:
                    return json.loads(text)
                except ValueError:
                    raise TritonError(f"{method} {url}: answer is not JSON") from None
        except TimeoutError:
            raise TritonError(f"{method} {url}: timed out") from None
        except aiohttp.ClientError as exc:
            raise TritonError(
                f"{method} {url}: {_one_line(str(exc)) or type(exc).__name__}"
            ) from None

    @staticmethod
    def _m(model: str) -> str:
        return quote(model, safe="")

    async def server_ready(self) -> bool:
        """Return True when ``/v2/health/ready`` answers 200."""
        try:
            await self._request("GET", "/v2/health/ready", expect_json=False)
        except TritonError:
            return False
        return True

    async def model_ready(self, model: str) -> bool:
        """Return True when the model answers ready."""
        try:
            await self._request("GET", f"/v2/models/{self._m(model)}/ready", expect_json=False)
        except TritonError:
            return False
        return True

    async def model_config(self, model: str) -> dict[str, Any]:
        """Return the model's live configuration (``GET /v2/models/{m}/config``)."""
        result = await self._request("GET", f"/v2/models/{self._m(model)}/config")
        if not isinstance(result, dict):
            raise TritonError(f"config of {model!r} is not a JSON object")
        return result

    async def model_stats(self, model: str) -> dict[str, Any]:
        """Return ``GET /v2/models/{m}/stats``."""
        result = await self._request("GET", f"/v2/models/{self._m(model)}/stats")
        return result if isinstance(result, dict) else {}

    async def model_metadata(self, model: str) -> dict[str, Any]:
        """Return ``GET /v2/models/{m}`` (inputs and outputs with datatype and shape)."""
        result = await self._request("GET", f"/v2/models/{self._m(model)}")
        if not isinstance(result, dict):
            raise TritonError(f"metadata of {model!r} is not a JSON object")
        return result

    async def repository_index(self) -> list[dict[str, Any]]:
        """Return the repository index (``POST /v2/repository/index``)."""
        result = await self._request("POST", "/v2/repository/index", {}, restricted=True)
        return [r for r in result if isinstance(r, dict)] if isinstance(result, list) else []

    async def load(
        self, model: str, config: dict[str, Any] | None = None, *, timeout_s: float = 120.0
    ) -> None:
        """Load (or reload) a model; with ``config`` the configuration is replaced by it."""
        body: dict[str, Any] = {}
        if config is not None:
            body = {"parameters": {"config": json.dumps(config)}}
        await self._request(
            "POST",
            f"/v2/repository/models/{self._m(model)}/load",
            body,
            restricted=True,
            timeout_s=timeout_s,
        )

    async def unload(self, model: str, *, timeout_s: float = 60.0) -> None:
        """Unload a model."""
        await self._request(
            "POST",
            f"/v2/repository/models/{self._m(model)}/unload",
            {},
            restricted=True,
            timeout_s=timeout_s,
        )

    async def wait_model_ready(self, model: str, timeout_s: float = 60.0) -> None:
        """Wait until the model is ready; raise TritonError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await self.model_ready(model):
                return
            await asyncio.sleep(0.2)
        raise TritonError(f"{self.base_url}: model {model!r} not ready after {timeout_s:.0f}s")

    async def infer(
        self,
        model: str,
        inputs: list[dict[str, Any]],
        *,
        binary_outputs: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one inference request (JSON tensors) and return the JSON part of the response.

        Outputs named in ``binary_outputs`` come back as binary data after the JSON header
        (their bytes are dropped here): warm-up requests need the execution, not the values.
        """
        body: dict[str, Any] = {"inputs": inputs}
        if binary_outputs:
            body["outputs"] = [
                {"name": n, "parameters": {"binary_data": True}} for n in binary_outputs
            ]
        url = f"{self.base_url}/v2/models/{self._m(model)}/infer"
        timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s is not None else self.timeout
        try:
            async with self._sess().post(
                url,
                data=json.dumps(body),
                headers={**self._auth_headers, "Content-Type": "application/json"},
                timeout=timeout,
                allow_redirects=False,
            ) as resp:
                _refuse_redirect("POST", url, resp)
                raw = await resp.read()
                header_len = int(resp.headers.get("Inference-Header-Content-Length", len(raw)))
                head = raw[:header_len].decode("utf-8", errors="replace")
                if resp.status >= 400:
                    reason = head
                    with contextlib.suppress(ValueError, AttributeError):
                        reason = str(json.loads(head).get("error", head))
                    raise TritonError(
                        f"POST {url}: HTTP {resp.status}: {_one_line(reason)}", resp.status
                    )
        except TimeoutError:
            raise TritonError(f"POST {url}: timed out") from None
        except aiohttp.ClientError as exc:
            raise TritonError(f"POST {url}: {_one_line(str(exc)) or type(exc).__name__}") from None
        try:
            result = json.loads(head)
        except ValueError:
            raise TritonError(f"POST {url}: answer is not JSON") from None
        return result if isinstance(result, dict) else {}
