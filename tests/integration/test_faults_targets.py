"""Scrape targets that fail in every way, while the daemon runs in-process and keeps serving.

Each faulty target is a real HTTP server (``tests/fault_servers.py``) the daemon scrapes over
real HTTP beside a healthy one. Whatever the fault, the target's data is unknown (never zero):
its incident neither resolves nor reopens, no playbook acts on it (guard ``stale``), /readyz
names the target and the reason, and the other targets go on being scraped and acted on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.fault_harness import (
    FAST,
    STALE_REASON,
    TELL,
    metrics,
    readiness,
    running,
    sample_value,
    until,
)
from tests.fault_servers import FaultyTarget, TargetMode
from tests.synthetic_triton import BatchingTriton
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent, Subject
from tritonguard.core.metric_names import is_counter
from tritonguard.core.samples import label
from tritonguard.runtime.daemon_app import DaemonApp
from tritonguard.runtime.playbook_service import PlaybookService, build_service
from tritonguard.settings import Settings, SettingsError, TargetSettings, load_settings

NS, MODEL = "search", "ranker"
# What /readyz must say for each fault (a fragment of the one-line reason).
WHY: dict[TargetMode, str] = {
    "down": "connection failed",
    "slow": "timeout after 0.3s",
    "garbage": "this looks like an HTML/XML page",
    "truncated": "body cut short",
    "unframed_cut": "body cut short",
    "huge": "larger than the 67108864-byte scrape limit (Content-Length is 104857600)",
}
STALE_FAULTS: tuple[TargetMode, ...] = tuple(WHY)
ALL_FAULTS: tuple[TargetMode, ...] = (*STALE_FAULTS, "flapping")


def namespace_of(pod: str) -> str:
    """Return the target's own namespace.

    Each target tells its own fault's story: in one namespace the same cause on the same
    model would make the targets one fleet group, whose notification one pod posts.
    """
    return f"{NS}-{pod.rsplit('-', 1)[0]}"


def subject(pod: str) -> Subject:
    """Return the subject a target's model is diagnosed as."""
    return Subject(namespace_of(pod), MODEL, pod)


@dataclass
class Fleet:
    """The targets, the daemon watching them and what it announced."""

    targets: dict[str, FaultyTarget]
    app: DaemonApp
    service: PlaybookService
    events: list[IncidentEvent] = field(default_factory=list)
    # The first incident each pod opened, and when its target turned faulty.
    opened: dict[str, IncidentEvent] = field(default_factory=dict)
    faulted_at: dict[str, float] = field(default_factory=dict)

    @property
    def engine(self) -> Engine:
        """The daemon's engine."""
        return self.app.engine

    def records(self, pod: str) -> list[tuple[str, str, str]]:
        """Return (action, status, guard) of every decision on the pod's first incident."""
        inc = self.opened.get(pod)
        if inc is None:
            return []
        return [
            (r.action, r.status, r.guard) for r in self.service.store.decisions(inc.incident_id)
        ]

    def resolved(self, pod: str) -> list[IncidentEvent]:
        """Return every resolution announced for the pod's subject."""
        return [e for e in self.events if e.subject == subject(pod) and e.event == "resolved"]

    def resets(self, pod: str) -> int:
        """Return how many counter resets the store saw in the pod's series."""
        count = 0
        for name in (
            "nv_inference_request_success",
            "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us",
            "nv_inference_count",
            "nv_inference_exec_count",
        ):
            assert is_counter(name)
            for series in self.engine.store.family(name):
                if label(series.labels, "pod") == pod:
                    count += len(series.resets)
        return count

    def series_of(self, pod: str) -> int:
        """Return how many series the store holds for the pod."""
        store = self.engine.store
        names = {"nv_inference_request_success", "nv_inference_queue_duration_us"}
        return sum(1 for n in names for s in store.family(n) if label(s.labels, "pod") == pod)


def settings(
    tmp_path: Path, targets: dict[str, FaultyTarget], *, interval_s: float, timeout_s: float
) -> Settings:
    """Daemon settings: every target scraped every ``interval_s``, dry-run."""
    books = tmp_path / "books"
    books.mkdir(exist_ok=True)
    (books / "tell.yaml").write_text(TELL)
    return Settings(
        targets=[
            TargetSettings(
                name=name, metrics_url=t.url, namespace=namespace_of(f"{name}-0"), pod=f"{name}-0"
            )
            for name, t in targets.items()
        ],
        scrape_interval_s=interval_s,
        scrape_timeout_s=timeout_s,
        scrape_jitter_s=0.0,
        evaluation_interval_s=0.25,
        listen="127.0.0.1:0",
        shutdown_grace_s=2.0,
        playbook_dirs=[books],
        audit_db_path=tmp_path / "audit.sqlite3",
        thresholds=FAST,
    )


@asynccontextmanager
async def fleet(
    tmp_path: Path,
    modes: dict[str, TargetMode],
    *,
    fault_on_open: dict[str, TargetMode] | None = None,
    interval_s: float = 0.3,
    timeout_s: float = 0.3,
) -> AsyncIterator[tuple[Fleet, str]]:
    """Run the daemon over one target per ``modes`` entry; yield the fleet and the base URL.

    A pod named in ``fault_on_open`` switches its target to that fault the moment the daemon
    announces its first incident, so the fault strikes a subject with an open incident.
    """
    targets = {
        name: await FaultyTarget(render=BatchingTriton().render, mode=mode).start()
        for name, mode in modes.items()
    }
    s = settings(tmp_path, targets, interval_s=interval_s, timeout_s=timeout_s)
    engine = Engine(s.engine_config())
    service = build_service(s, engine)
    switch = fault_on_open or {}
    out: Fleet

    async def on_events(events: list[IncidentEvent]) -> None:
        out.events.extend(events)
        for e in events:
            pod = e.subject.pod
            if e.event != "opened" or pod in out.opened:
                continue
            out.opened[pod] = e
            name = pod.removesuffix("-0")
            if name in switch:
                await targets[name].set_mode(switch[name])
                out.faulted_at[pod] = time.monotonic()

    app = DaemonApp(s, engine=engine, playbooks=service, on_events=on_events)
    out = Fleet(targets, app, service)
    try:
        async with running(app) as base:
            yield out, base
    finally:
        for t in targets.values():
            await t.stop()


async def test_a_fault_on_a_subject_with_an_open_incident_freezes_it_and_blocks_its_playbook(
    tmp_path: Path,
) -> None:
    """Every kind of scrape failure leaves the open incident open, unknown and untouched.

    Seven targets serve a model stuck in its batcher; the daemon opens an incident on each.
    The moment it does, six of them fail (down, slow, garbage, truncated, cut without
    framing, huge) and one flaps. On the six the data is unknown, never zero: no resolution,
    no counter reset, no value; the playbook, due 5 s after the opening, is skipped by the
    ``stale`` guard; /readyz names each target and its failure. The healthy target's playbook
    is planned, and it goes on being scraped throughout. The flapping target still delivers
    every other scrape, which keeps its data fresh: its failed scrapes add nothing (no zeros,
    no resets, no resolution) and its playbook acts on the real samples in between.
    """
    # Each fault's target is named after it.
    faults: dict[str, TargetMode] = {str(mode): mode for mode in ALL_FAULTS}
    modes: dict[str, TargetMode] = {name: "ok" for name in [*faults, "steady"]}
    async with fleet(tmp_path, modes, fault_on_open=faults) as (f, base):
        await until(lambda: len(f.faulted_at) == len(faults), 30.0)
        steady_hits = f.targets["steady"].hits

        def settled() -> bool:
            stale = all(("*", "skipped", "stale") in f.records(f"{n}-0") for n in STALE_FAULTS)
            planned = all(
                ("slack.post", "planned", "") in f.records(f"{n}-0") for n in ("steady", "flapping")
            )
            return stale and planned

        def state() -> object:
            return {
                pod: (f.records(pod), [e.event for e in f.events if e.subject.pod == pod])
                for pod in f.opened
            }

        await until(settled, 30.0, state)
        # Long past resolve_after (1 s) and stale_after (2 s): a zero would have shown by now.
        await asyncio.sleep(2.0)
        status, ready = await readiness(base)
        text = await metrics(base)
        now = f.app.clock()
        steady_after = f.targets["steady"].hits
        trail = {pod: f.records(pod) for pod in f.opened}
        reasons = {
            pod: [r.reason for r in f.service.store.decisions(inc.incident_id)]
            for pod, inc in f.opened.items()
        }

    assert status == 200, ready  # the healthy target keeps the daemon ready
    assert steady_after >= steady_hits + 8, "the healthy target must go on being scraped"
    targets = ready["targets"]
    for name, why in WHY.items():
        pod = f"{name}-0"
        entry = targets[f"scrape/{name}"]
        assert entry["ok"] is False, (name, entry)
        assert why in entry["error"], (name, entry)
        assert "\n" not in entry["error"]
        assert entry["last_success_age_s"] >= 2.0, (name, entry)
        assert f.resolved(pod) == [], name
        assert f.engine.book.is_open(subject(pod)), name
        assert not f.engine.is_fresh(subject(pod), now), name
        features = f.engine.features(subject(pod), now)
        assert features is not None and features.request_rate is None, name
        assert f.engine.feature_value(subject(pod), "queue_share", now) is None, name
        assert f.resets(pod) == 0, name
        assert trail[pod] == [("*", "skipped", "stale")], name
        assert reasons[pod] == [STALE_REASON]
    assert targets["scrape/steady"]["ok"] is True
    assert targets["scrape/steady"]["last_success_age_s"] < 2.0
    assert trail["steady-0"] == [("slack.post", "planned", "")]
    # Flapping: half the scrapes fail, none of them turns into data.
    errors = sample_value(
        text, 'tritonguard_source_poll_errors_total{source="scrape",target="flapping"}'
    )
    assert errors >= 4 and f.targets["flapping"].served >= 4
    assert f.resolved("flapping-0") == [] and f.resets("flapping-0") == 0
    assert trail["flapping-0"] == [("slack.post", "planned", "")]


async def test_targets_faulty_from_the_start_open_nothing_and_store_nothing(
    tmp_path: Path,
) -> None:
    """A target that never gave a good scrape yields no series, no incident and no action.

    /readyz reports each one with its reason while the healthy target keeps the daemon
    ready, opens its incident and has its playbook planned.
    """
    modes: dict[str, TargetMode] = {str(mode): mode for mode in STALE_FAULTS}
    modes["steady"] = "ok"
    async with fleet(tmp_path, modes) as (f, base):
        await until(lambda: ("slack.post", "planned", "") in f.records("steady-0"), 30.0)
        status, ready = await readiness(base)
    assert status == 200
    for name, why in WHY.items():
        pod = f"{name}-0"
        entry = ready["targets"][f"scrape/{name}"]
        assert entry["ok"] is False and why in entry["error"], (name, entry)
        assert entry["last_success_age_s"] is None  # never succeeded
        assert f.series_of(pod) == 0, name
        assert [e for e in f.events if e.subject.pod == pod] == [], name
    assert set(f.opened) == {"steady-0"}


async def test_a_scrape_timeout_above_the_interval_is_refused_before_the_daemon_starts(
    tmp_path: Path,
) -> None:
    """0.5 s over a 0.25 s interval is refused, as Prometheus refuses it, in one line.

    Accepted, one slow target held every poll for the timeout and so stretched every
    target's interval to it: the healthy target was scraped every 0.5 s instead of 0.25 s,
    and its batching_delay finding fell below the opening confidence. The refusal names both
    values and what to do, and where the value came from (the file's line).
    """
    target = await FaultyTarget(render=BatchingTriton().render).start()
    try:
        with pytest.raises(ValidationError, match=r"0\.5 s is above scrape_interval_s \(0\.25 s\)"):
            settings(tmp_path, {"steady": target}, interval_s=0.25, timeout_s=0.5)
    finally:
        await target.stop()
    cfg = tmp_path / "config.yaml"
    cfg.write_text("scrape_interval_s: 0.25\nscrape_timeout_s: 0.5\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(cfg)
    line = str(refused.value)
    assert line.startswith(f"{cfg}:2: scrape_timeout_s: 0.5 s is above scrape_interval_s")
    assert "lower scrape_timeout_s to 0.25 or less, or raise scrape_interval_s" in line
    assert "\n" not in line


@pytest.mark.parametrize("timeout_s", [0.25, 0.2], ids=["timeout=interval", "timeout<interval"])
async def test_a_slow_target_within_a_valid_timeout_does_not_hold_up_the_others(
    tmp_path: Path, timeout_s: float
) -> None:
    """Beside a target that never answers in time, the healthy one is scraped 4x/s and acted on.

    At the longest timeout Prometheus allows (the interval itself) and below it, each poll
    ends by the interval: the healthy target keeps its 0.25 s interval, its incident opens
    and its playbook is planned on time, while the slow one is reported as timing out.
    """
    modes: dict[str, TargetMode] = {"slow": "slow", "steady": "ok"}
    async with fleet(tmp_path, modes, interval_s=0.25, timeout_s=timeout_s) as (f, base):
        await asyncio.sleep(1.0)
        before, started = f.targets["steady"].hits, time.monotonic()
        await asyncio.sleep(4.0)
        rate = (f.targets["steady"].hits - before) / (time.monotonic() - started)
        await until(lambda: ("slack.post", "planned", "") in f.records("steady-0"), 20.0)
        _, ready = await readiness(base)
    assert rate >= 0.75 / 0.25, f"healthy target scraped {rate:.1f}/s, not 4/s"
    assert f"timeout after {timeout_s:g}s" in ready["targets"]["scrape/slow"]["error"]
    assert set(f.opened) == {"steady-0"}
