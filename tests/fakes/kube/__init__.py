"""A fake Kubernetes API server on loopback that speaks the real REST paths, for tests."""

from tests.fakes.kube.middleware import RequestRecord
from tests.fakes.kube.server import FakeKube

__all__ = ["FakeKube", "RequestRecord"]
