"""The Slack outbox: every message persisted before it is sent, delivered once, in order.

Messages wait in a table of the audit database (``slack_outbox``) until Slack has them; the
root's ``ts`` per thread is kept beside them (``slack_threads``). A worker delivers each
thread's messages strictly in order, retrying with exponential backoff, and waits as long as a
429's ``Retry-After`` asks (the whole outbox waits: Slack limits the workspace). A call whose
answer was lost (timeout, dropped connection, 5xx) may have landed, so before it is made again
the thread is searched for the message's key in its metadata: a retry never posts twice. A
restarted daemon finds the table as it was; a new leader (or a restart that lost the database)
finds an incident's open thread by its metadata and goes on in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from tritonguard.core.slack_thread import Outgoing
from tritonguard.logs import get_logger

_SCHEMA = """
CREATE TABLE IF NOT EXISTS slack_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    thread TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    ts TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    ambiguous INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS slack_outbox_pending ON slack_outbox (state, thread, id);
CREATE INDEX IF NOT EXISTS slack_outbox_thread ON slack_outbox (thread, id);
CREATE TABLE IF NOT EXISTS slack_threads (
    thread TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    root_ts TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Pending:
    """One message in the outbox waiting for delivery."""

    item_id: int
    item: Outgoing
    attempts: int
    created_at: float
    ambiguous: bool


@dataclass(frozen=True, slots=True)
class DeliveryStats:
    """How delivery stands: messages waiting, how long the oldest has, how many were given up."""

    pending: int = 0
    oldest_pending_age_s: float = 0.0
    given_up: int = 0


@dataclass(frozen=True, slots=True)
class ThreadRef:
    """Where an incident's thread is in Slack: the channel ID and the root's ``ts``."""

    channel: str
    root_ts: str


class SlackOutbox:
    """The persisted queue; one small SQLite transaction per call, like the audit store."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise OSError(f"{self.path}: cannot open the Slack outbox: {exc}") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def enqueue(self, items: Iterable[Outgoing], now: float) -> int:
        """Persist messages to send (a key already queued is not queued again); return how many."""
        added = 0
        for item in items:
            cur = self._exec(
                "INSERT OR IGNORE INTO slack_outbox (key, thread, kind, payload, created_at,"
                " next_at) VALUES (?,?,?,?,?,?)",
                (item.key, item.thread, item.kind, json.dumps(item.as_dict()), now, now),
            )
            added += cur.rowcount
        return added

    def heads(self) -> list[Pending]:
        """Return the oldest pending message of each thread, threads in order of their first."""
        rows = self._exec(
            "SELECT o.id, o.payload, o.attempts, o.created_at, o.ambiguous FROM slack_outbox o"
            " JOIN (SELECT thread, MIN(id) AS id FROM slack_outbox WHERE state = 'pending'"
            " GROUP BY thread) h ON o.id = h.id ORDER BY o.id"
        ).fetchall()
        return [
            Pending(
                int(r[0]), Outgoing.from_dict(json.loads(r[1])), int(r[2]), float(r[3]), bool(r[4])
            )
            for r in rows
        ]

    def next_at(self, item_id: int) -> float:
        """Return when a message may be tried next."""
        row = self._exec("SELECT next_at FROM slack_outbox WHERE id = ?", (item_id,)).fetchone()
        return float(row[0]) if row is not None else 0.0

    def newer_update(self, pending: Pending) -> bool:
        """Whether a later root update of the same thread waits: this one is stale then."""
        row = self._exec(
            "SELECT 1 FROM slack_outbox WHERE thread = ? AND kind = 'update_root'"
            " AND state = 'pending' AND id > ? LIMIT 1",
            (pending.item.thread, pending.item_id),
        ).fetchone()
        return row is not None

    def mark(self, item_id: int, state: str, *, ts: str = "", error: str = "") -> None:
        """Set a message's final state: sent (with its ts), superseded, or dead (with why)."""
        self._exec(
            "UPDATE slack_outbox SET state = ?, ts = ?, last_error = ? WHERE id = ?",
            (state, ts, error, item_id),
        )

    def retry_later(self, item_id: int, at: float, error: str, *, ambiguous: bool) -> None:
        """Count a failed attempt and when to try again; remember if the answer was lost."""
        self._exec(
            "UPDATE slack_outbox SET attempts = attempts + 1, next_at = ?, last_error = ?,"
            " ambiguous = MAX(ambiguous, ?) WHERE id = ?",
            (at, error, int(ambiguous), item_id),
        )

    def thread(self, thread: str) -> ThreadRef | None:
        """Return where a thread's root is, once it was posted (or adopted)."""
        row = self._exec(
            "SELECT channel, root_ts FROM slack_threads WHERE thread = ?", (thread,)
        ).fetchone()
        return None if row is None else ThreadRef(str(row[0]), str(row[1]))

    def set_thread(self, thread: str, ref: ThreadRef, now: float) -> None:
        """Remember where a thread's root is."""
        self._exec(
            "INSERT OR REPLACE INTO slack_threads (thread, channel, root_ts, created_at)"
            " VALUES (?,?,?,?)",
            (thread, ref.channel, ref.root_ts, now),
        )

    def adopt_thread(
        self, thread: str, ref: ThreadRef, sent: Iterable[tuple[Outgoing, str]], now: float
    ) -> None:
        """Take over a thread another replica posted: where it is and messages already sent.

        ``sent`` are (message, its ts) as that replica's outbox has them; they are never sent
        again from here, but adopting the thread reads them (the root, an approval request).
        A thread this outbox already knows keeps its own record.
        """
        if self.thread(thread) is None:
            self.set_thread(thread, ref, now)
        for item, ts in sent:
            self._exec(
                "INSERT OR IGNORE INTO slack_outbox (key, thread, kind, payload, created_at,"
                " next_at, state, ts) VALUES (?,?,?,?,?,?,'sent',?)",
                (item.key, item.thread, item.kind, json.dumps(item.as_dict()), now, now, ts),
            )

    def drop_thread(self, thread: str, error: str) -> int:
        """Give up every pending message of a thread whose root cannot be posted."""
        cur = self._exec(
            "UPDATE slack_outbox SET state = 'dead', last_error = ? WHERE thread = ?"
            " AND state = 'pending'",
            (error, thread),
        )
        return cur.rowcount

    def items(self, thread: str) -> list[tuple[Outgoing, str]]:
        """Return a thread's messages with their states, oldest first (adopting a thread)."""
        return [(item, state) for item, state, _ in self.sent_items(thread)]

    def sent_items(self, thread: str) -> list[tuple[Outgoing, str, str]]:
        """Return a thread's messages with their states and ts (once sent), oldest first."""
        rows = self._exec(
            "SELECT payload, state, ts FROM slack_outbox WHERE thread = ? ORDER BY id", (thread,)
        ).fetchall()
        return [(Outgoing.from_dict(json.loads(r[0])), str(r[1]), str(r[2])) for r in rows]

    def root_pending(self, thread: str) -> bool:
        """Whether a thread's root waits in the outbox, not posted yet."""
        row = self._exec(
            "SELECT 1 FROM slack_outbox WHERE thread = ? AND kind = 'post_root'"
            " AND state = 'pending' LIMIT 1",
            (thread,),
        ).fetchone()
        return row is not None

    def sent_ts(self, key: str) -> str | None:
        """Return the ``ts`` of a message that was sent, or None."""
        row = self._exec(
            "SELECT ts FROM slack_outbox WHERE key = ? AND state = 'sent'", (key,)
        ).fetchone()
        return str(row[0]) if row is not None and row[0] else None

    def backlog(self, now: float) -> tuple[int, float]:
        """Return how many messages wait and how long the oldest has (0 with none)."""
        row = self._exec(
            "SELECT COUNT(*), MIN(created_at) FROM slack_outbox WHERE state = 'pending'"
        ).fetchone()
        count = int(row[0])
        return count, (max(0.0, now - float(row[1])) if count else 0.0)

    def counts(self) -> dict[str, int]:
        """Return how many messages are in each state."""
        rows = self._exec("SELECT state, COUNT(*) FROM slack_outbox GROUP BY state").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def rows(self, thread: str | None = None) -> list[dict[str, Any]]:
        """Return the outbox rows, oldest first (tests and the CLI look at them)."""
        where, args = ("WHERE thread = ?", (thread,)) if thread else ("", ())
        cur = self._exec(
            "SELECT id, key, thread, kind, state, attempts, ts, last_error FROM slack_outbox"
            f" {where} ORDER BY id",
            args,
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


class DeliveryError(Exception):
    """A delivery attempt failed; ``retry_after_s`` when Slack asked to wait."""

    def __init__(
        self,
        message: str,
        *,
        ambiguous: bool,
        permanent: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous
        self.permanent = permanent
        self.retry_after_s = retry_after_s


class Transport(Protocol):
    """Where the outbox delivers to: Slack, the console, or a recording."""

    async def deliver(self, item: Outgoing, thread: ThreadRef | None, *, check: bool) -> ThreadRef:
        """Deliver one message and return where it landed (for a root: the new thread).

        ``check``: an earlier attempt may have landed; look for it before sending again.
        Raises DeliveryError.
        """
        ...


# Waits for an upload's file (its ``Outgoing.file``) to be written; False: it never will be.
FileReady = Callable[[dict[str, str]], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait after the n-th failed attempt: doubling from ``initial_s`` to ``max_s``."""

    initial_s: float = 1.0
    max_s: float = 60.0
    give_up_after_s: float = 6 * 3600.0

    def delay(self, attempts: int) -> float:
        """Return the wait after ``attempts`` failures (1 → initial)."""
        return float(min(self.max_s, self.initial_s * 2.0 ** max(0, attempts - 1)))


class OutboxWorker:
    """Delivers the outbox: each thread in order, retries with backoff, 429s waited out."""

    def __init__(
        self,
        outbox: SlackOutbox,
        transport: Transport,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        file_ready: FileReady | None = None,
    ) -> None:
        self.outbox = outbox
        self.transport = transport
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.sleep = sleep
        self.file_ready = file_ready
        self.paused_until = 0.0
        # Messages this process gave up on (a counter: the outbox keeps them as ``dead``).
        self.given_up = 0
        self._wake = asyncio.Event()
        self._log = get_logger("tritonguard.slack")

    def wake(self) -> None:
        """Deliver soon: something was queued."""
        self._wake.set()

    def stats(self) -> DeliveryStats:
        """Return the backlog and the give-ups so far (the daemon's /metrics)."""
        pending, age = self.outbox.backlog(self.clock())
        return DeliveryStats(pending, age, self.given_up)

    async def deliver_due(self) -> int:
        """Deliver every message that may go now; return how many went (or were settled)."""
        done = 0
        progress = True
        while progress:
            progress = False
            for head in self.outbox.heads():
                now = self.clock()
                if now < self.paused_until:
                    return done
                if self.outbox.next_at(head.item_id) > now:
                    continue
                if await self._one(head, now):
                    done += 1
                    progress = True
        return done

    def next_due(self) -> float | None:
        """Return when the next attempt is due, or None with nothing pending."""
        heads = self.outbox.heads()
        if not heads:
            return None
        return max(self.paused_until, min(self.outbox.next_at(h.item_id) for h in heads))

    async def _one(self, head: Pending, now: float) -> bool:
        """Try one message; return True when it is settled (sent, superseded or given up)."""
        item = head.item
        if item.kind == "update_root" and self.outbox.newer_update(head):
            self.outbox.mark(head.item_id, "superseded")
            return True
        thread = self.outbox.thread(item.thread)
        if item.kind == "update_reply":
            target = self.outbox.sent_ts(str(item.metadata.get("target", "")))
            if target is None:
                # The reply it rewrites never landed: there is nothing to change.
                self.outbox.mark(head.item_id, "superseded", error="its reply was never posted")
                return True
            item = replace(item, metadata={**item.metadata, "ts": target})
        if item.kind != "post_root" and thread is None:
            # The root never made it (given up): nothing of the thread can follow it.
            dropped = self.outbox.drop_thread(item.thread, "the thread's root was never posted")
            self.given_up += dropped
            self._log.error("slack thread given up", thread=item.thread, messages=dropped)
            return True
        if item.kind == "upload" and not await self._file_ready(head):
            return True
        try:
            ref = await self.transport.deliver(item, thread, check=head.ambiguous)
        except DeliveryError as exc:
            return self._failed(head, exc, now)
        if item.kind == "post_root":
            self.outbox.set_thread(item.thread, ref, now)
        self.outbox.mark(head.item_id, "sent", ts=ref.root_ts)
        return True

    async def _file_ready(self, head: Pending) -> bool:
        """Wait for an upload's file to be written; drop the upload if it never will be.

        The file is drawn off the loop (``IncidentCharts``) after the upload was queued. One
        that was not drawn is no delivery failure: the upload is settled (``dead``, with why,
        never tried again, so never uploaded twice), not counted as given up, and the
        thread's next messages go on.
        """
        if self.file_ready is None or head.item.file is None:
            return True
        if await self.file_ready(head.item.file):
            return True
        self.outbox.mark(head.item_id, "dead", error="chart not drawn")
        self._log.warning(
            "slack chart upload dropped: the chart was not drawn",
            thread=head.item.thread,
            chart=head.item.file.get("path"),
        )
        return False

    def _failed(self, head: Pending, exc: DeliveryError, now: float) -> bool:
        item = head.item
        age = now - head.created_at
        if exc.permanent or age >= self.backoff.give_up_after_s:
            self.outbox.mark(head.item_id, "dead", error=str(exc))
            self.given_up += 1
            if item.kind == "post_root":
                self.given_up += self.outbox.drop_thread(item.thread, f"root not posted: {exc}")
            self._log.error(
                "slack message given up",
                thread=item.thread,
                kind=item.kind,
                attempts=head.attempts + 1,
                error=str(exc),
                text=item.message.text if item.message is not None else "",
            )
            return True
        if exc.retry_after_s is not None:
            self.paused_until = now + exc.retry_after_s
            at = self.paused_until
        else:
            at = now + self.backoff.delay(head.attempts + 1)
        self.outbox.retry_later(head.item_id, at, str(exc), ambiguous=exc.ambiguous)
        self._log.warning(
            "slack delivery failed; will retry",
            thread=item.thread,
            kind=item.kind,
            attempts=head.attempts + 1,
            retry_in_s=round(at - now, 3),
            error=str(exc),
        )
        return False

    async def run(self) -> None:
        """Deliver until cancelled: at once when woken, else when the next retry is due."""
        while True:
            self._wake.clear()
            try:
                await self.deliver_due()
            except Exception as exc:  # a bug must not stop delivery for good; log it loudly
                self._log.error("slack outbox failed", exc_info=exc)
            due = self.next_due()
            wait = 30.0 if due is None else max(0.0, due - self.clock())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def drain(self, *, max_rounds: int = 10_000) -> None:
        """Deliver until nothing is pending, sleeping through backoffs (tests, replay, shutdown)."""
        for _ in range(max_rounds):
            await self.deliver_due()
            due = self.next_due()
            if due is None:
                return
            await self.sleep(max(0.0, due - self.clock()))
        raise RuntimeError("the Slack outbox did not drain")
