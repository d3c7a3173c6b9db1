"""Seed the fake Kubernetes API with the Deployment playbooks act on, and point settings at the fakes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.fakes.fake_slack import FakeSlack
from tests.fakes.kube import FakeKube
from tritonguard.settings import KubeSettings, Settings, SlackSettings

CHANNEL = "#tritonguard-alerts"


def seed_triton_deployment(server: FakeKube) -> FakeKube:
    """Add namespace ``prod`` and its Deployment ``triton`` of two replicas; return the server."""
    server.add_namespace("prod")
    server.add_deployment("prod", "triton", replicas=2)
    return server


def service_settings(
    tmp_path: Path,
    slack: FakeSlack,
    kube: FakeKube,
    playbooks: Mapping[str, str],
    **slack_settings: Any,
) -> Settings:
    """Daemon settings: ``playbooks`` (file name → YAML), an audit file, Slack, the fake API.

    ``slack_settings`` add to the Slack token, channel and address (an app token, approvals).
    """
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    for name, text in playbooks.items():
        (books / name).write_text(text)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube.kubeconfig())
    return Settings(
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        slack=SlackSettings(
            token=slack.token, channel=CHANNEL, base_url=slack.base_url, **slack_settings
        ),
        kube=KubeSettings(kubeconfig=kubeconfig),
        dry_run=False,
    )
