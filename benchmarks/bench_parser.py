"""pytest-benchmark: our exposition parser vs prometheus_client's on a real Triton scrape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tritonguard.core.exposition import parse_exposition

CAPTURE = Path(__file__).parent / "data" / "triton_50_models.prom"


def parse_ours(text: str) -> int:
    """Parse with tritonguard's parser and return the number of samples."""
    return len(parse_exposition(text).samples)


def parse_prometheus_client(text: str) -> int:
    """Parse with prometheus_client, consuming every sample, and return their number."""
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def test_bench_ours(benchmark: Any) -> None:
    """Time tritonguard's parser on the 50-model capture."""
    text = CAPTURE.read_text()
    assert benchmark(parse_ours, text) == parse_prometheus_client(text)


def test_bench_prometheus_client(benchmark: Any) -> None:
    """Time prometheus_client's parser on the 50-model capture."""
    text = CAPTURE.read_text()
    assert benchmark(parse_prometheus_client, text) > 2000
