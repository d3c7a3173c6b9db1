"""Collect the ``bench_*.py`` modules when pytest is pointed at this directory."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Treat ``bench_*.py`` like test modules, so ``pytest benchmarks/`` runs them."""
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
