"""The engine's memory stays within its budget under pod churn, measured as the process's RSS."""

from __future__ import annotations

import subprocess
import sys

# Pods come and go every 5 s evaluation (50 new ones, 5 series each) beside 200 steady pods:
# after 100 rounds the churned series alone would take 32 MB of a 24 MiB series budget.
CHURN = """
import sys
from tritonguard.core.engine import Engine, EngineConfig
from tritonguard.core.samples import Sample, make_labels

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

budget = int(sys.argv[1]) * 2**20
engine = Engine(EngineConfig(memory_budget_bytes=budget))
names = [
    "nv_inference_request_success", "nv_inference_exec_count",
    "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
]
base = peak = rss()
t = 0.0
for rnd in range(100):
    t += 5.0
    batch = []
    for pod in range(250):
        name = f"triton-{rnd}-{pod}" if pod < 50 else f"steady-{pod}"
        labels = make_labels({"model": f"m{pod % 10}", "version": "1", "namespace": "prod",
                              "pod": name, "instance": f"10.{rnd % 250}.{pod}.1:8002"})
        value = 100.0 + rnd if pod < 50 else 100.0 * rnd
        batch += [Sample(n, labels, value, t) for n in names]
    engine.ingest(batch, t)
    engine.evaluate(t)
    peak = max(peak, rss())
m = engine.memory()
print(peak - base, m["series_shed"], m["series_bytes"], m["baseline_bytes"])
"""


def test_rss_under_churn_stays_within_the_budget() -> None:
    """A 32 MiB engine budget holds under churn that would take more; the excess is shed.

    The bound checked is the budget plus 12 MiB: one evaluation's transient objects (a
    batch of samples, features and findings of every subject) and the allocator's slack.
    """
    budget_mb = 32
    out = subprocess.run(
        [sys.executable, "-c", CHURN, str(budget_mb)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown, shed, series_bytes, baseline_bytes = (int(x) for x in out.stdout.split())
    assert shed > 0, "the churn must outgrow the budget for this test to mean anything"
    assert series_bytes + baseline_bytes <= budget_mb * 2**20
    assert grown <= (budget_mb + 12) * 2**20, f"RSS grew {grown / 2**20:.1f} MiB"
