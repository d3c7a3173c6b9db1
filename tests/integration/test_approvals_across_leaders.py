"""A pending approval survives a leader change: the next leader waits for it and a click decides it.

Two replicas are built as ``tritonguard run`` builds them (``leader_pair.service_pair``), each
on its own audit file, with leader election on the fake Kubernetes API's Lease, slack_sdk's
real Web API and Socket Mode clients against the one fake Slack, and the real Kubernetes
client scaling the Deployment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import playbook_harness
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tests.integration.leader_pair import lease_api, service_pair
from tests.integration.test_slack_approvals import (
    ALICE,
    Clock,
    buttons,
    by_status,
    click,
    connect,
    root,
    settle,
    still_open,
    wait_for,
)
from tritonguard.core.slack_message import APPROVE_ACTION, REJECT_ACTION


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """Yield a fake API server with the lease's namespace and a Deployment of two replicas."""
    async with lease_api() as server:
        yield server


async def test_the_next_leader_keeps_the_approval_and_a_click_there_decides_it(
    tmp_path: Path, fake_slack: FakeSlack, kube: FakeKube
) -> None:
    """The leader asks, publishes the approval on the Lease and stops; the next one decides it.

    The follower adopts the approval (same deadline) and its thread. Once it leads, its
    Socket Mode connection takes the click on the old leader's buttons: the scale runs there,
    and the decision and the steps after it go into the one thread, whose root and request
    lose their buttons. The old leader, a follower now, settles its own copy as handed once
    the new leader stops publishing it, and does not expire it at the deadline.
    """
    clock = Clock()
    async with service_pair(tmp_path, fake_slack, kube, clock) as (a, b):
        assert a.elector is not None and b.elector is not None
        # Each replica opens the incident at its own evaluation, so under its own id.
        for replica_ in (a, b):
            event = playbook_harness.incident("cpu_bottleneck", at=clock.now)
            replica_.after_evaluation([event], clock.now)
            await settle(replica_)
            still_open(replica_, event)
        [asked] = a.store.pending_approvals()
        assert by_status(b, "awaiting_approval") == []
        assert buttons(root(fake_slack)) == [APPROVE_ACTION, REJECT_ACTION]

        assert await a.elector.step()  # the renewal publishes the approval
        assert not await b.elector.step()  # the follower adopts it
        [handed] = b.store.pending_approvals()
        assert (handed.approval_id, handed.expires_at) == (asked.approval_id, asked.expires_at)
        await a.elector.release()

        assert await b.elector.step()
        assert not await a.elector.step()  # a follows: b publishes the approval it holds
        await connect(b, fake_slack)
        clock.now += 60
        await click(fake_slack, root(fake_slack), APPROVE_ACTION, ALICE)
        await wait_for(lambda: bool(by_status(b, "approved")))
        await settle(b)

        assert kube.replicas("Deployment", "prod", "triton") == 3
        [approved] = by_status(b, "approved")
        assert approved.detail["decided_by"] == ALICE
        message = root(fake_slack)  # still the one root: no second thread
        assert buttons(message) == []
        assert f"`kubernetes.scale` approved by <@{ALICE}>" in str(message.blocks)
        thread = fake_slack.thread_of(message)
        assert not [m for m in thread if buttons(m)]
        said = "\n".join(m.text for m in thread)
        assert said.count("Approved*") == 1
        assert "added a replica to resnet" in said

        assert await b.elector.step()  # decided: no longer published
        assert not await a.elector.step()
        found = a.store.approval(asked.approval_id)
        assert found is not None and found[1]["state"] == "handed"
        clock.now = asked.expires_at + 1
        a.after_evaluation([], clock.now)
        await settle(a)
        assert by_status(a, "expired") == []
        assert "Expired" not in "\n".join(m.text for m in fake_slack.thread_of(message))
