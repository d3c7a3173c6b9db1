"""Alertmanager posts a replica receives but does not act on, forwarded to the leader(s) that do.

The ``tritonguard`` Service hands each webhook post to one pod, often a follower. A leader
publishes where it is reached on its Lease (:data:`ADDRESS_ANNOTATION`); a replica that
receives an authenticated post it may not act on reads the Lease and posts the same body to
that address with its own bearer token, marked with :data:`FORWARDED_BY_HEADER`. A marked post
is never forwarded again, so no post travels more than one hop, and a replica never forwards
to the Lease it holds. With shards every shard's Lease is read and each shard's leader gets
the post (each keeps what it is sent; alerts about other shards' pods never match there).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter

from tritonguard.clients.kubernetes_api import KubernetesError
from tritonguard.clients.ports import LeaseApi
from tritonguard.clients.webhook_post import PostError, post_json
from tritonguard.logs import get_logger
from tritonguard.runtime.alertmanager_webhook import WEBHOOK_PATH
from tritonguard.runtime.log_throttle import LogThrottle

# On the leader's Lease: {"identity": <holder>, "url": <base URL>}. The identity is checked
# against the holder, because annotations are merged on every write: a new holder that
# publishes no address must not leave its predecessor's standing for its own.
ADDRESS_ANNOTATION = "tritonguard.io/leader-address"
# Set on a forwarded post to the identity of the replica that forwarded it.
FORWARDED_BY_HEADER = "X-Tritonguard-Forwarded-By"
# The leader answers with a short JSON object; anything longer is cut, never held whole.
MAX_REPLY_BYTES = 64 * 1024
# A replica forwarding to a dead leader would log every post; once a minute per cause is enough.
FAILURE_LOG_INTERVAL_S = 60.0
# Refusals that say the replicas disagree (another token, the webhook off on the leader, a
# body the leader timed out on), not that the alert is bad: Alertmanager should try again.
_RETRYABLE_REFUSALS = frozenset({401, 403, 404, 408})

Outcome = Literal["delivered", "refused", "unreachable", "no_leader"]
OUTCOMES: tuple[Outcome, ...] = ("delivered", "refused", "unreachable", "no_leader")


class ForwardError(Exception):
    """The leader could not be reached or answered something that is not HTTP."""


def encode_address(identity: str, url: str) -> str:
    """Return the annotation value a leader publishes: who it is and where it is reached."""
    return json.dumps({"identity": identity, "url": url}, sort_keys=True)


def leader_address(lease: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """Return (holder, its published base URL) of a Lease; either is None when unknown."""
    if lease is None:
        return None, None
    holder = (lease.get("spec") or {}).get("holderIdentity") or None
    text = ((lease.get("metadata") or {}).get("annotations") or {}).get(ADDRESS_ANNOTATION)
    if not holder or not text:
        return holder, None
    try:
        published = json.loads(text)
    except ValueError:
        return holder, None
    if not isinstance(published, dict) or published.get("identity") != holder:
        return holder, None
    url = published.get("url")
    return holder, url if isinstance(url, str) and url else None


@dataclass(frozen=True, slots=True)
class Delivery:
    """What became of the post for one Lease's leader."""

    lease: str
    holder: str | None
    outcome: Outcome
    # The leader's HTTP status; None when it was not reached.
    status: int | None = None
    # The leader's reply (JSON when it is), or why the post did not reach it.
    detail: Any = None

    def as_dict(self) -> dict[str, Any]:
        """Return the delivery as the webhook's answer lists it."""
        return {
            "lease": self.lease,
            "holder": self.holder,
            "outcome": self.outcome,
            "status": self.status,
            "detail": self.detail,
        }


def answer(received: int, deliveries: Sequence[Delivery]) -> tuple[int, dict[str, Any]]:
    """Return the status and body to answer Alertmanager with, from every leader's delivery.

    200 only when every leader kept the post. A leader not reached, or refusing what another
    replica accepted (tokens or settings differ), is a 5xx, so Alertmanager retries the whole
    notification (keeping it twice is harmless: the alert book is keyed by fingerprint). A
    leader's own 5xx is passed on; its other 4xx (the body itself refused) too, as a retry
    would be refused the same way. A leader's redirect (its address moved, say behind an
    http-to-https hop) is a 502: not followed, nothing was kept.
    """
    body: dict[str, Any] = {
        "received": received,
        "forwarded": [d.as_dict() for d in deliveries],
    }
    statuses = [d.status for d in deliveries]
    if any(d.outcome in ("unreachable", "no_leader") for d in deliveries):
        return 503, body
    # A redirect is not followed (the token goes only to the Lease's address), so the leader
    # never kept the post; passed on, Alertmanager would drop it as it retries 5xx only.
    if any(s in _RETRYABLE_REFUSALS or (s is not None and 300 <= s < 400) for s in statuses):
        return 502, body
    for status in statuses:
        if status is not None and status >= 500:
            return status, body
    for status in statuses:
        if status is not None and status >= 300:
            return status, body
    return (statuses[0] if statuses and statuses[0] is not None else 200), body


async def post_to(
    base_url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> tuple[int, bytes]:
    """POST ``body`` to ``base_url`` + the webhook path; return (status, reply), reply bounded."""
    url = f"{base_url.rstrip('/')}{WEBHOOK_PATH}"
    try:
        return await post_json(url, body, headers, max_reply_bytes=max_reply_bytes)
    except PostError as exc:
        raise ForwardError(str(exc)) from None


class LeaderForwarder:
    """Forward authenticated webhook posts this replica may not act on to the leaders that may.

    ``leases`` are every shard's Lease (one without shards); ``own_lease`` is the one this
    replica campaigns on, and ``leads`` says whether it holds it now. Each delivery (Lease
    read and post) is bounded by ``timeout_s``; all run at once.
    """

    def __init__(
        self,
        kube: LeaseApi,
        *,
        namespace: str,
        leases: Sequence[str],
        own_lease: str,
        identity: str,
        token: str,
        leads: Callable[[], bool],
        timeout_s: float = 5.0,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.leases = list(leases)
        self.own_lease = own_lease
        self.identity = identity
        self.leads = leads
        self.timeout_s = timeout_s
        self._authorization = f"Bearer {token}"
        self._failures = LogThrottle(FAILURE_LOG_INTERVAL_S)
        self._log = get_logger("tritonguard.forwarding")
        self._counted: Counter | None = None
        if registry is not None:
            self._counted = Counter(
                "tritonguard_alertmanager_forwards",
                "Webhook posts this replica forwarded to a leader, by what became of each.",
                ["outcome"],
                registry=registry,
            )
            for outcome in OUTCOMES:
                self._counted.labels(outcome)

    def keeps_forwarded(self) -> bool:
        """Whether a post another replica forwarded here is kept: only by a leader."""
        return self.leads()

    def targets(self) -> list[str]:
        """Return the Leases whose leaders a post received here must be forwarded to."""
        return [name for name in self.leases if name != self.own_lease or not self.leads()]

    async def forward(self, body: bytes) -> list[Delivery]:
        """Post ``body`` to the leader of each Lease but the one this replica holds."""
        return list(await asyncio.gather(*(self._deliver(name, body) for name in self.targets())))

    async def _deliver(self, lease_name: str, body: bytes) -> Delivery:
        holder: str | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                try:
                    lease = await self.kube.read_lease(self.namespace, lease_name)
                except KubernetesError as exc:
                    return self._failed(lease_name, None, "no_leader", f"cannot read it: {exc}")
                holder, url = leader_address(lease)
                if holder is None:
                    return self._failed(lease_name, None, "no_leader", "no replica holds it")
                if holder == self.identity:
                    # The Lease names this replica, whose renewal deadline has passed.
                    why = "this replica holds it but may not act (its renewal is overdue)"
                    return self._failed(lease_name, holder, "no_leader", why)
                if url is None:
                    return self._failed(
                        lease_name, holder, "no_leader", "its holder publishes no address"
                    )
                headers = {"Authorization": self._authorization, FORWARDED_BY_HEADER: self.identity}
                try:
                    status, reply = await post_to(url, body, headers)
                except ForwardError as exc:
                    return self._failed(lease_name, holder, "unreachable", str(exc))
        except TimeoutError:
            return self._failed(
                lease_name, holder, "unreachable", f"no answer within {self.timeout_s:g}s"
            )
        outcome: Outcome = "delivered" if 200 <= status < 300 else "refused"
        delivery = Delivery(lease_name, holder, outcome, status, _shown(reply))
        self._count(outcome)
        if outcome == "refused":
            self._warn(delivery, f"answered {status}")
        return delivery

    def _failed(self, lease: str, holder: str | None, outcome: Outcome, why: str) -> Delivery:
        delivery = Delivery(lease, holder, outcome, None, why)
        self._count(outcome)
        self._warn(delivery, why)
        return delivery

    def _count(self, outcome: Outcome) -> None:
        if self._counted is not None:
            self._counted.labels(outcome).inc()

    def _warn(self, delivery: Delivery, why: str) -> None:
        since_last_line = self._failures.tally(f"{delivery.lease}:{delivery.outcome}")
        if since_last_line is not None:
            self._log.warning(
                "alertmanager post not kept by the leader; Alertmanager is answered 5xx or the "
                "leader's refusal, and retries",
                lease=delivery.lease,
                holder=delivery.holder,
                outcome=delivery.outcome,
                why=why,
                failures_since_last_line=since_last_line,
            )


def _shown(reply: bytes) -> Any:
    text = reply.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text[:500]
