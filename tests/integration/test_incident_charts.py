"""The incident chart: drawn from the engine's store, uploaded into the incident's thread.

A recorded lab trace goes through the real engine; the thread planner asks the daemon's chart
maker (runtime/incident_charts.py) for the chart when the thread opens and when it resolves,
and the outbox uploads it with slack_sdk's real ``files_upload_v2`` (three calls: an upload
URL, the bytes, completeUploadExternal) into the fake Slack. Without a token the console
prints the chart's path and the structured log carries it.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import structlog
from PIL import Image

from tests.fakes.fake_slack import FakeSlack, StoredMessage
from tests.slack_harness import Replayed, replay
from tests.waiting import wait_for
from tritonguard.clients.slack_api import SlackNotifier
from tritonguard.core.action_records import ActionRecord
from tritonguard.core.chart_data import ChartData
from tritonguard.core.engine import Engine
from tritonguard.core.findings import IncidentEvent
from tritonguard.core.slack_thread import ChartMaker, ThreadPlanner, ThreadSettings, short_key
from tritonguard.runtime import incident_charts
from tritonguard.runtime.incident_charts import (
    IncidentCharts,
    chart_dir,
    chart_maker,
    prune,
    render_incident_chart,
)
from tritonguard.runtime.playbook_service import build_service
from tritonguard.runtime.slack_outbox import Backoff, OutboxWorker, SlackOutbox
from tritonguard.runtime.slack_threads import SlackThreads, build_threads
from tritonguard.runtime.slack_transport import SlackTransport
from tritonguard.settings import Settings

CHANNEL = "#tritonguard-alerts"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHART_SIZE = (1000, 620)


def png_size(content: bytes) -> tuple[int, int]:
    """Return a PNG's width and height as PIL reads them (it fails on anything else)."""
    assert content.startswith(PNG_SIGNATURE)
    with Image.open(io.BytesIO(content)) as image:
        assert image.format == "PNG"
        image.verify()
        return image.size


def posted(replayed: Replayed, event: IncidentEvent) -> ActionRecord:
    """Return the notification that opens the incident's thread, as the daemon runs it."""
    return ActionRecord(
        at=event.at,
        incident_id=event.incident_id,
        event="opened",
        playbook="notify",
        subject=event.subject.key(),
        action="slack.post",
        params={"text": event.summary},
        dry_run=False,
        status="ran",
    )


def life(replayed: Replayed) -> tuple[IncidentEvent, list[ActionRecord], IncidentEvent]:
    """Return the labelled incident, the records of its playbooks and its resolution."""
    opened = replayed.opened()
    records = [r for r in replayed.records if r.incident_id == opened.incident_id]
    end = replayed.steps[-1][0]
    resolved = replace(opened, event="resolved", at=end)
    return opened, [posted(replayed, opened), *records], resolved


def threads_to(
    fake: FakeSlack, planner: ThreadPlanner, backoff: Backoff | None = None
) -> SlackThreads:
    """Return threads delivering through slack_sdk to the fake (no SDK retries)."""
    api = SlackNotifier(fake.token, base_url=fake.base_url, timeout_s=5, retries=False)
    outbox = SlackOutbox(":memory:")
    worker = OutboxWorker(outbox, SlackTransport(api), backoff=backoff)
    return SlackThreads(planner, outbox, worker, closers=[api.close])


def uploads(fake: FakeSlack, root: StoredMessage) -> list[StoredMessage]:
    """Return the replies of a thread that carry a file."""
    return [m for m in fake.thread_of(root) if m.files]


@dataclass
class OnTheConsole:
    """A recorded incident's thread as the daemon delivers it without a token: the console."""

    opened: IncidentEvent
    records: list[ActionRecord]
    resolved: IncidentEvent
    charts: ChartMaker | None
    threads: SlackThreads
    out: list[str]

    async def open(self) -> None:
        """Open the incident's thread with its playbooks' records, and deliver it all."""
        self.threads.observe_events([self.opened])
        self.threads.observe_records(self.records)
        await self.threads.worker.drain()

    def printed(self) -> str:
        """Return what the console printed."""
        return "\n".join(self.out)


async def on_the_console(tmp_path: Path, trace: str = "retry_storm") -> OnTheConsole:
    """Replay ``trace``; build the daemon's token-less threads and chart maker for its incident."""
    replayed = await replay(trace)
    opened, records, resolved = life(replayed)
    settings = Settings(audit_db_path=tmp_path / "audit.sqlite3")
    out: list[str] = []
    charts = chart_maker(settings, replayed.engine)
    threads = build_threads(settings, console=out.append, chart=charts)
    return OnTheConsole(opened, records, resolved, charts, threads, out)


@pytest.fixture
def no_fonts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every chart drawing fail, as it does on a host without fonts."""

    def broken(_data: object) -> bytes:
        raise RuntimeError("no fonts")

    monkeypatch.setattr(incident_charts, "render_png", broken)


async def test_the_chart_is_uploaded_into_the_incidents_thread_as_a_png(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Opened and resolved: two charts, each a PNG in the root's thread, bytes as drawn."""
    replayed = await replay("batching_delay")
    opened, records, resolved = life(replayed)
    charts = IncidentCharts(replayed.engine, tmp_path / "charts")
    th = threads_to(fake_slack, ThreadPlanner(ThreadSettings(channel=CHANNEL), chart=charts))
    th.observe_events([opened])
    th.observe_records(records)
    await th.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    [first] = uploads(fake_slack, root)
    assert first.thread_ts == root.ts, "into the incident's thread, not the channel"
    assert first.text.startswith("Latency split and deciding signal for")
    [file] = first.files or []
    on_disk = tmp_path / "charts" / f"{opened.incident_id}-opened.png"
    content = fake_slack.file_content(str(file["id"]))
    assert content is not None and content == on_disk.read_bytes()
    assert png_size(content) == CHART_SIZE
    assert str(file["name"]).endswith(f"-{opened.incident_id}-opened.png")
    assert str(file["title"]).startswith("batching_delay on ranker: queue vs compute and busy")
    steps = [c.method for c in fake_slack.calls if "upload" in c.method.lower()]
    assert steps == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]

    th.observe_events([resolved])
    await th.worker.drain()
    first_name, last = str(file["name"]), uploads(fake_slack, root)[-1]
    assert len(uploads(fake_slack, root)) == 2
    [end_file] = last.files or []
    assert str(end_file["name"]).endswith("-resolved.png") and end_file["name"] != first_name
    assert last.text.endswith("how it ended")
    end_png = fake_slack.file_content(str(end_file["id"]))
    assert end_png is not None and png_size(end_png) == CHART_SIZE
    assert charts.drawn == 2 and charts.failed == 0
    await th.close()


async def test_a_lost_upload_answer_is_found_by_its_name_not_uploaded_twice(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack shared the file but the answer to completeUploadExternal was lost: found, not redone."""
    replayed = await replay("retry_storm")
    opened, records, _ = life(replayed)
    complete = fake_slack._complete_upload

    def lost_answer(params: dict[str, Any]) -> dict[str, Any]:
        result = complete(params)
        fake_slack.drop_response_next(1)  # done in Slack, the connection closes unanswered
        monkeypatch.setattr(fake_slack, "_complete_upload", complete)
        return result

    monkeypatch.setattr(fake_slack, "_complete_upload", lost_answer)
    planner = ThreadPlanner(
        ThreadSettings(channel=CHANNEL), chart=IncidentCharts(replayed.engine, tmp_path)
    )
    th = threads_to(fake_slack, planner, Backoff(0.01, 0.05))
    th.observe_events([opened])
    th.observe_records(records)
    await th.worker.drain()
    [root] = fake_slack.roots_in(CHANNEL)
    [chart] = uploads(fake_slack, root)
    assert [c.method for c in fake_slack.calls].count("files.completeUploadExternal") == 1
    assert any(c.method == "conversations.replies" for c in fake_slack.calls), "looked first"
    [row] = [r for r in th.outbox.rows() if r["kind"] == "upload"]
    assert row["state"] == "sent" and row["attempts"] == 1, "one failed attempt, then found"
    assert str((chart.files or [{}])[0]["name"]).startswith(short_key(row["key"]))
    assert th.outbox.counts().get("dead", 0) == 0
    await th.close()


async def test_without_a_token_the_console_prints_the_chart_and_the_log_carries_it(
    tmp_path: Path,
) -> None:
    """No token: the thread on the console with ``[chart: path]``, the path in the log line."""
    console = await on_the_console(tmp_path)
    with structlog.testing.capture_logs() as logs:
        await console.open()
    path = tmp_path / "audit-charts" / f"{console.opened.incident_id}-opened.png"
    printed = console.printed()
    assert f"[chart: {path}]" in printed
    assert "Timed out at the ingress" in printed, "the evidence is there as well"
    assert png_size(path.read_bytes()) == CHART_SIZE
    [line] = [e for e in logs if e.get("kind") == "upload"]
    assert line["chart"] == str(path) and line["thread"] == console.opened.incident_id
    await console.threads.close()


@pytest.mark.usefixtures("no_fonts")
async def test_a_chart_that_cannot_be_drawn_leaves_the_thread_as_it_was(tmp_path: Path) -> None:
    """A drawing error is logged and the chart left out; the root and replies still go out."""
    console = await on_the_console(tmp_path)
    with structlog.testing.capture_logs() as logs:
        await console.open()
    printed = console.printed()
    assert "new thread" in printed and "[chart:" not in printed
    [warning] = [e for e in logs if e["event"] == "incident chart not drawn"]
    assert "no fonts" in warning["error"] and warning["log_level"] == "warning"
    charts = console.charts
    assert isinstance(charts, IncidentCharts) and charts.failed == 1
    await console.threads.close()


def test_the_chart_directory_keeps_the_newest_files_only(tmp_path: Path) -> None:
    """At most ``keep`` charts stay next to the audit database: the oldest go first."""
    import os

    for i in range(5):
        p = tmp_path / f"inc-{i}-opened.png"
        p.write_bytes(PNG_SIGNATURE)
        os.utime(p, (1_000 + i, 1_000 + i))
    (tmp_path / "notes.txt").write_text("not a chart")
    assert prune(tmp_path, 3) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "inc-2-opened.png",
        "inc-3-opened.png",
        "inc-4-opened.png",
        "notes.txt",
    ]
    assert chart_dir(Path("/var/lib/tritonguard/audit.sqlite3")) == Path(
        "/var/lib/tritonguard/audit-charts"
    )


async def test_render_incident_chart_writes_a_png_for_callers_outside_the_daemon(
    tmp_path: Path,
) -> None:
    """The demo's call: the engine's store, the incident and its records, a file to write."""
    replayed = await replay("cold_start")
    opened, records, _ = life(replayed)
    path = render_incident_chart(
        replayed.engine.store, opened, records, tmp_path / "cold_start.png"
    )
    assert path == tmp_path / "cold_start.png"
    assert png_size(path.read_bytes()) == CHART_SIZE
    unknown = replace(opened, subject=replace(opened.subject, model="nobody"))
    assert render_incident_chart(replayed.engine.store, unknown, [], tmp_path / "x.png") is None
    assert not (tmp_path / "x.png").exists()


async def test_the_service_gives_the_threads_a_chart_maker_unless_charts_are_off(
    tmp_path: Path,
) -> None:
    """build_service (the daemon's and the demo's path) wires the charts from settings."""
    on = build_service(Settings(audit_db_path=tmp_path / "on.sqlite3"), Engine())
    off = build_service(
        Settings(audit_db_path=tmp_path / "off.sqlite3", slack={"charts": False}), Engine()
    )
    try:
        assert on.threads is not None and off.threads is not None
        charts = on.threads.planner.chart
        assert isinstance(charts, IncidentCharts)
        assert charts.directory == tmp_path / "on-charts" and charts.minutes == 10.0
        assert off.threads.planner.chart is None
    finally:
        await on.close()
        await off.close()


@dataclass
class DrawnOffTheLoop:
    """A recorded incident's thread to the fake Slack, its chart drawn in the daemon's worker."""

    charts: IncidentCharts
    threads: SlackThreads
    api: SlackNotifier

    async def close(self) -> None:
        """Close the threads and the Slack client."""
        await self.threads.close()
        await self.api.close()


async def drawn_off_the_loop(
    fake: FakeSlack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    draw: Callable[[ChartData], bytes],
) -> DrawnOffTheLoop:
    """Open batching_delay's thread with its records; ``draw`` replaces the chart's drawing."""
    monkeypatch.setattr(incident_charts, "render_png", draw)
    replayed = await replay("batching_delay")
    opened, records, _ = life(replayed)
    settings = Settings(audit_db_path=tmp_path / "audit.sqlite3", slack={"channel": CHANNEL})
    charts = chart_maker(settings, replayed.engine)
    assert isinstance(charts, IncidentCharts)
    api = SlackNotifier(fake.token, base_url=fake.base_url, timeout_s=5, retries=False)
    th = build_threads(settings, chart=charts, transport=SlackTransport(api))
    th.observe_events([opened])
    th.observe_records(records)
    return DrawnOffTheLoop(charts, th, api)


def uploaded_chart(fake: FakeSlack) -> bytes | None:
    """Return the bytes of the one chart uploaded into the channel's one thread."""
    [root] = fake.roots_in(CHANNEL)
    [chart] = uploads(fake, root)
    return fake.file_content(str((chart.files or [{}])[0]["id"]))


async def test_a_chart_is_drawn_off_the_event_loop_and_uploaded_once_it_is_there(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's chart maker returns at once; the loop runs while it draws; then it uploads.

    The drawing waits until a coroutine on the loop has run: were it drawn on the loop, that
    coroutine could not run until the drawing gave up, and the order below would be reversed.
    """
    order: list[str] = []
    drawing = threading.Event()
    loop_ran = threading.Event()
    draw = incident_charts.render_png

    def slow(data: ChartData) -> bytes:
        drawing.set()
        loop_ran.wait(timeout=10.0)
        order.append("drawn")
        return draw(data)

    thread = await drawn_off_the_loop(fake_slack, tmp_path, monkeypatch, slow)
    th, charts = thread.threads, thread.charts
    [upload] = [r for r in th.outbox.rows() if r["kind"] == "upload"]
    assert upload["state"] == "pending", "queued with its path before the chart is drawn"
    # The loop is free to wait here (another coroutine) while the worker starts drawing.
    assert await asyncio.to_thread(drawing.wait, 10.0)
    order.append("loop")
    loop_ran.set()
    await th.worker.drain()
    assert order == ["loop", "drawn"]
    content = uploaded_chart(fake_slack)
    assert content is not None and png_size(content) == CHART_SIZE
    assert [c.method for c in fake_slack.calls].count("files.completeUploadExternal") == 1
    assert charts.drawn == 1 and charts.failed == 0
    await thread.close()


async def test_a_wait_cancelled_at_shutdown_leaves_the_last_delivery_waiting_for_the_chart(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outbox worker is cancelled while it waits for a chart; the shutdown drain uploads it.

    The daemon stops its outbox worker before the last delivery. Cancelling the wait once made
    the chart maker forget the drawing, so that delivery read a file not yet written and gave
    the upload up (a flake of the daemon playbook tests when a run ended just before a stop).
    """
    drawing = threading.Event()
    finish = threading.Event()
    draw = incident_charts.render_png

    def slow(data: ChartData) -> bytes:
        drawing.set()
        finish.wait(timeout=10.0)
        return draw(data)

    thread = await drawn_off_the_loop(fake_slack, tmp_path, monkeypatch, slow)
    th = thread.threads
    assert await asyncio.to_thread(drawing.wait, 10.0)
    worker = asyncio.create_task(th.worker.deliver_due())
    # Once the root is marked sent, the worker's next wait is the chart's (the upload is next).
    await wait_for(
        lambda: any(r["kind"] == "post_root" and r["state"] == "sent" for r in th.outbox.rows()),
        10.0,
    )
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker
    finish.set()
    await th.drain()
    content = uploaded_chart(fake_slack)
    assert content is not None and png_size(content) == CHART_SIZE
    assert th.worker.given_up == 0
    await thread.close()


@pytest.mark.usefixtures("no_fonts")
async def test_an_upload_whose_chart_fails_off_the_loop_is_dropped_and_the_thread_goes_on(
    tmp_path: Path,
) -> None:
    """Drawing fails in the worker: the upload is settled once, never sent; replies still go."""
    console = await on_the_console(tmp_path)
    th = console.threads
    with structlog.testing.capture_logs() as logs:
        await console.open()
        th.observe_events([console.resolved])
        await th.worker.drain()
    printed = console.printed()
    assert "new thread" in printed and "[chart:" not in printed
    assert "root updated" in printed, "what follows the dropped chart is still delivered"
    rows = [r for r in th.outbox.rows() if r["kind"] == "upload"]
    assert [(r["state"], r["attempts"]) for r in rows] == [("dead", 0), ("dead", 0)]
    assert all(r["last_error"] == "chart not drawn" for r in rows)
    dropped = [
        e for e in logs if e["event"] == "slack chart upload dropped: the chart was not drawn"
    ]
    assert len(dropped) == 2 and th.worker.given_up == 0
    charts = console.charts
    assert isinstance(charts, IncidentCharts) and charts.failed == 2
    await th.close()
