"""A synthetic Triton exposition whose counters advance with wall time, for daemon tests."""

from __future__ import annotations

import time


class BatchingTriton:
    """A Triton exposition for one model whose requests wait ~90 ms in the batcher at 60 req/s.

    Counters advance with wall time, as a live server's would; ``healthy`` makes the queue
    wait vanish (the fix applied) so the incident resolves. 60 req/s puts 15 requests in each
    0.25 s scrape the daemon tests use, so every scrape is a point of the per-scrape checks
    on its own (``steady_min_requests``): at 20 req/s their 1.5 s windows held one or two
    pooled points, depending on the scrapes' jitter, and steadiness was unknown half the time.
    """

    def __init__(self, rate: float = 60.0) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.healthy = False
        self._queue_us = 0.0
        self._last = self.start

    def render(self) -> str:
        """Return the exposition now."""
        now = time.monotonic()
        per_req_queue = 500.0 if self.healthy else 90_000.0
        self._queue_us += (now - self._last) * self.rate * per_req_queue
        self._last = now
        n = 10_000 + self.rate * (now - self.start)
        labels = 'model="ranker",version="1"'
        counters = {
            "nv_inference_request_success": n,
            "nv_inference_count": n,
            "nv_inference_exec_count": n,
            "nv_inference_queue_duration_us": 10_000 * 500.0 + self._queue_us,
            "nv_inference_compute_input_duration_us": n * 50.0,
            "nv_inference_compute_infer_duration_us": n * 5_000.0,
            "nv_inference_compute_output_duration_us": n * 20.0,
        }
        counters["nv_inference_request_duration_us"] = (
            counters["nv_inference_queue_duration_us"] + n * 5_070.0
        )
        lines = []
        for name, value in counters.items():
            lines += [f"# TYPE {name} counter", f"{name}{{{labels}}} {value:.0f}"]
        lines += [
            "# TYPE nv_inference_request_failure counter",
            f'nv_inference_request_failure{{{labels},reason="REJECTED"}} 0',
            "# TYPE nv_inference_pending_request_count gauge",
            f"nv_inference_pending_request_count{{{labels}}} 0",
        ]
        return "\n".join(lines) + "\n"
