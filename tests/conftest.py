"""Shared pytest fixtures: the fake Kubernetes and Slack APIs and a real Prometheus factory."""

from tests.fixtures_fakes import fake_kube, fake_kube_thread, fake_slack
from tests.fixtures_prometheus import prometheus_factory

__all__ = ["fake_kube", "fake_kube_thread", "fake_slack", "prometheus_factory"]
