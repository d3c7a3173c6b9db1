"""Leader election among daemon replicas on a coordination.k8s.io/v1 Lease, with run handover."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from tritonguard.clients.kubernetes_api import KubernetesError
from tritonguard.clients.ports import LeaseApi
from tritonguard.core.run_handover import (
    ANNOTATION,
    VERIFICATIONS_ANNOTATION,
    WINDOW_S,
    HandedApproval,
    decode_approvals,
    decode_runs,
    decode_verifications,
    encode_runs,
    encode_verifications,
)
from tritonguard.logs import get_logger
from tritonguard.runtime.audit_store import AuditStore, handed_event
from tritonguard.runtime.leader_forwarding import ADDRESS_ANNOTATION, encode_address

# Where an approval's Slack thread is, for the next leader (``SlackThreads.handover``).
ThreadOf = Callable[[str, str], dict[str, Any] | None]

# Renew every third of the lease and stop acting at two thirds without a renewal: a replica
# only takes over after seeing the lease unchanged for a whole duration, so the old leader
# has stopped acting a third of a duration before anyone else may start.
RENEW_FRACTION = 1 / 3
DEADLINE_FRACTION = 2 / 3


class LeaderElector:
    """Holds (or waits for) the daemon's leader Lease; only its holder runs playbooks.

    Every replica diagnoses and serves its API; ``leader_elsewhere()`` tells the dispatcher
    whether this one may act. The leader publishes its recent real runs in the lease's
    annotation with each renewal (and at once after a run, through ``nudge``); followers adopt
    them into their own audit store, so a replica that takes over honours the cooldowns,
    rate limits, budget and reload history of the one before. A replica that cannot reach the
    API stops acting once its renew deadline passes, before anyone else may take over.

    With ``advertise_url`` the holder also publishes where it is reached, so followers can
    forward it the Alertmanager posts the Service hands them (``leader_forwarding``).
    """

    def __init__(
        self,
        kube: LeaseApi,
        store: AuditStore,
        *,
        namespace: str,
        name: str,
        identity: str,
        duration_s: float = 15.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.store = store
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_s = max(1, round(duration_s))
        self.clock, self.monotonic = clock, monotonic
        self.holder: str | None = None
        self.last_error: str | None = None
        self.adopted = 0
        # This replica's base URL for the others; None publishes no address.
        self.advertise_url: str | None = None
        # The Slack side of approval handover (``SlackThreads``), wired by the service.
        self.thread_of: ThreadOf = lambda _incident, _approval: None
        self.take_thread: Callable[[HandedApproval], None] = lambda _approval: None
        # Approval ids the current holder publishes, and every one another holder ever did.
        self._published: frozenset[str] = frozenset()
        self._seen: set[str] = set()
        self._left_out = 0
        self._valid_until = float("-inf")
        self._wake = asyncio.Event()
        self._log = get_logger("tritonguard.leader")

    def is_leader(self) -> bool:
        """Return True while this replica holds the lease and its renew deadline has not passed."""
        return self.monotonic() < self._valid_until

    def leader_elsewhere(self) -> str | None:
        """Return None when this replica may act, else why not (for the audit trail)."""
        if self.is_leader():
            return None
        if self.last_error is not None:
            return f"cannot reach the leader lease ({self.last_error})"
        if self.holder and self.holder != self.identity:
            return f"replica {self.holder} holds the leader lease"
        return "this replica has not acquired the leader lease yet"

    def held_elsewhere(self, approval_id: str) -> bool:
        """Whether another replica leads and holds this approval: its thread is theirs to tell."""
        return not self.is_leader() and approval_id in self._published

    def nudge(self) -> None:
        """Publish soon (a run was just recorded): the next leader must know about it."""
        self._wake.set()

    async def step(self) -> bool:
        """One election round: renew, or adopt the leader's runs and try to take over."""
        started = self.monotonic()
        was_leader = self.is_leader()
        try:
            if was_leader and await self.kube.renew_lease(
                self.namespace, self.name, self.identity, self.duration_s, self._annotations()
            ):
                held = True
            else:
                await self._adopt()
                held = await self.kube.try_acquire_lease(
                    self.namespace, self.name, self.identity, self.duration_s, self._annotations()
                )
        except KubernetesError as exc:
            if self.last_error is None:
                self._log.warning("leader lease unreachable", error=str(exc), leading=was_leader)
            self.last_error = str(exc)
            return self.is_leader()
        self.last_error = None
        if held:
            self._valid_until = started + DEADLINE_FRACTION * self.duration_s
            self.holder = self.identity
            if not was_leader:
                self._log.info("became leader", identity=self.identity, lease=self.name)
        else:
            self._valid_until = float("-inf")
            if was_leader:
                self._log.warning(
                    "lost the leader lease", identity=self.identity, holder=self.holder
                )
        return held

    async def run(self) -> None:
        """Keep electing until cancelled (the supervisor stops this task last)."""
        while True:
            self._wake.clear()
            await self.step()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RENEW_FRACTION * self.duration_s):
                    await self._wake.wait()

    async def release(self) -> None:
        """Give the lease up at shutdown so another replica leads at once; errors are logged."""
        if not self.is_leader():
            return
        self._valid_until = float("-inf")
        try:
            await self.kube.renew_lease(
                self.namespace, self.name, self.identity, self.duration_s, self._annotations()
            )
            await self.kube.release_lease(self.namespace, self.name, self.identity)
        except KubernetesError as exc:
            self._log.warning("could not release the leader lease", error=str(exc))
        else:
            self._log.info("released the leader lease", identity=self.identity)

    def _annotations(self) -> dict[str, str]:
        now = self.clock()
        handed = [*self.store.handed_verifications(), *self.store.handed_approvals(self.thread_of)]
        pending, left_out = encode_verifications(handed)
        if left_out and left_out != self._left_out:
            self._log.warning(
                "pending verifications and approvals too large to hand over on the lease",
                left_out=left_out,
                annotation=VERIFICATIONS_ANNOTATION,
            )
        self._left_out = left_out
        annotations = {
            ANNOTATION: encode_runs(self.store.history(now - WINDOW_S), now),
            VERIFICATIONS_ANNOTATION: pending,
        }
        if self.advertise_url:
            annotations[ADDRESS_ANNOTATION] = encode_address(self.identity, self.advertise_url)
        return annotations

    async def _adopt(self) -> None:
        lease = await self.kube.read_lease(self.namespace, self.name)
        if lease is None:
            self.holder = None
            return
        self.holder = (lease.get("spec") or {}).get("holderIdentity") or None
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        if self.holder == self.identity:
            return
        if not self.holder:
            self._published = frozenset()
        text = annotations.get(ANNOTATION)
        if text:
            try:
                runs = decode_runs(text)
            except ValueError as exc:
                # Never guess at another replica's history; say so and keep what we know.
                self._log.warning(
                    "leader lease annotation unreadable", annotation=ANNOTATION, error=str(exc)
                )
            else:
                added = self.store.adopt_runs(runs)
                if added:
                    self.adopted += added
                    self._log.info("adopted runs from the leader", runs=added, holder=self.holder)
        pending = annotations.get(VERIFICATIONS_ANNOTATION)
        if pending and self.holder:
            try:
                handed = decode_verifications(pending)
                approvals = decode_approvals(pending)
            except ValueError as exc:
                self._log.warning(
                    "leader lease annotation unreadable",
                    annotation=VERIFICATIONS_ANNOTATION,
                    error=str(exc),
                )
                return
            new = self.store.adopt_verifications(handed, origin=self.holder)
            if new:
                self._log.info(
                    "adopted pending verifications from the leader", count=new, holder=self.holder
                )
            self._adopt_approvals(approvals)

    def _adopt_approvals(self, published: list[HandedApproval]) -> None:
        """Keep the leader's approvals waiting here too; settle those it no longer publishes.

        One the leader stopped publishing was decided (or expired) there, and is ``handed``
        here, never expired a second time. An approval this replica asked for itself and the
        leader never published (it lost the lease before its first renewal) stays this
        replica's to expire.
        """
        now = self.clock()
        wanted = {a.approval_id: a for a in published}
        self._published = frozenset(wanted)
        self._seen.update(wanted)
        for pending in self.store.pending_approvals():
            if pending.approval_id not in wanted and pending.approval_id in self._seen:
                self.store.settle_approval(pending.approval_id, "handed", self.holder or "", now)
                self.store.settle_handed_undos(pending.undo_ids)
        added = 0
        for item in wanted.values():
            if self.store.approval(item.approval_id) is None:
                adopt_approval(self.store, item)
                added += 1
            if item.thread is not None:
                self.take_thread(item)
        if added:
            self._log.info(
                "adopted pending approvals from the leader", count=added, holder=self.holder
            )


def adopt_approval(store: AuditStore, item: HandedApproval) -> None:
    """Write a handed approval down here, waiting until its deadline, with its undos."""
    store.begin_approval(
        item.approval_id,
        handed_event(item, f"{item.action} of {item.playbook} awaiting approval"),
        item.playbook,
        item.step_index,
        item.action,
        dict(item.params),
        item.approvers,
        item.requested_at,
        item.expires_at,
        store.adopt_undos(item),
        leaning_on=item.leaning_on,
    )
