"""What Alertmanager is answered after forwarding, and the address a follower forwards to."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tritonguard.runtime.leader_forwarding import (
    ADDRESS_ANNOTATION,
    Delivery,
    Outcome,
    answer,
    encode_address,
    leader_address,
)
from tritonguard.settings import KubeSettings


def _kept(lease: str = "tritonguard-leader", status: int = 200) -> Delivery:
    outcome: Outcome = "delivered" if status < 300 else "refused"
    return Delivery(lease, "tritonguard-a", outcome, status, {"received": 1})


def test_the_leaders_status_is_passed_on_when_it_kept_the_post() -> None:
    """One leader that answered 200: Alertmanager gets 200, with what the leader said."""
    status, body = answer(1, [_kept()])
    assert status == 200
    assert body["received"] == 1 and body["forwarded"][0]["detail"] == {"received": 1}


@pytest.mark.parametrize(
    ("deliveries", "want"),
    [
        # Not reached, or no leader to reach: retry.
        ([Delivery("l", "a", "unreachable", None, "refused")], 503),
        ([Delivery("l", None, "no_leader", None, "no replica holds it")], 503),
        # The replicas disagree about the token, or the webhook is off on the leader: retry,
        # never the 401 that would make Alertmanager drop the notification.
        ([_kept(status=401)], 502),
        ([_kept(status=404)], 502),
        # A redirect is not followed, so nothing was kept: retry, never the 3xx Alertmanager
        # would drop.
        ([_kept(status=307)], 502),
        ([_kept(status=301)], 502),
        # The leader's own 5xx, passed on; its 400 too (a retry would be refused the same).
        ([_kept(status=500)], 500),
        ([_kept(status=400)], 400),
        # Shards: one leader kept it and one was not reached, so the whole is retried.
        ([_kept("s-0"), Delivery("s-1", "b", "unreachable", None, "timeout")], 503),
        ([_kept("s-0"), _kept("s-1")], 200),
    ],
)
def test_alertmanager_retries_whenever_some_leader_did_not_keep_the_post(
    deliveries: list[Delivery], want: int
) -> None:
    """A 5xx whenever a leader may still take the post; 200 only when every leader kept it."""
    assert answer(1, deliveries)[0] == want


def _lease(holder: str | None, annotation: str | None) -> dict[str, object]:
    notes = {} if annotation is None else {ADDRESS_ANNOTATION: annotation}
    return {"metadata": {"annotations": notes}, "spec": {"holderIdentity": holder}}


def test_only_the_holders_own_address_is_used() -> None:
    """An address under another identity (a former holder's, merged in) or unreadable is none."""
    mine = encode_address("tritonguard-a", "http://10.0.0.7:9108")
    assert leader_address(_lease("tritonguard-a", mine)) == (
        "tritonguard-a",
        "http://10.0.0.7:9108",
    )
    assert leader_address(_lease("tritonguard-b", mine)) == ("tritonguard-b", None)
    assert leader_address(_lease("tritonguard-a", "{not json")) == ("tritonguard-a", None)
    assert leader_address(_lease(None, mine)) == (None, None)
    assert leader_address(None) == (None, None)


def test_the_advertised_url_defaults_to_the_pod_ip_and_listen_port() -> None:
    """POD_IP (IPv6 in brackets) and the port; an explicit advertise_url wins; else none."""
    kube = KubeSettings()
    assert kube.advertised_url(9108, pod_ip="10.1.2.3") == "http://10.1.2.3:9108"
    assert kube.advertised_url(9108, pod_ip="fd00::7") == "http://[fd00::7]:9108"
    assert kube.advertised_url(9108, pod_ip="") is None
    assert kube.advertised_url(0, pod_ip="10.1.2.3") is None
    explicit = KubeSettings(advertise_url="https://tg-0.tg.svc:9108/")
    assert explicit.advertised_url(9108, pod_ip="10.1.2.3") == "https://tg-0.tg.svc:9108"


def test_the_advertised_url_reads_pod_ip_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The downward API's POD_IP, as deploy/base sets it, is the default's address."""
    monkeypatch.setenv("POD_IP", "10.4.5.6")
    assert KubeSettings().advertised_url(9108) == "http://10.4.5.6:9108"


@pytest.mark.parametrize(
    "url",
    [
        "10.0.0.7:9108",
        "ftp://10.0.0.7",
        "http://user:pw@10.0.0.7",
        "http://10.0.0.7/?a=1",
        "http://",
    ],
)
def test_an_advertise_url_that_is_not_a_plain_base_is_refused(url: str) -> None:
    """The followers send their token there: only http(s)://host[:port][/path], no secrets."""
    with pytest.raises(ValidationError, match="advertise_url"):
        KubeSettings(advertise_url=url)
