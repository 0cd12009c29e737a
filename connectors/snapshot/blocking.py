"""Blocking snapshots (Debezium's `execute-snapshot` with `"type": "blocking"`).

The signal handler (processor thread) records the request in `<warehouse>/_state/blocking_snapshots`
(one `requested` row, keyed by the signal's journal key, before the journal marks the signal
processed) and asks the engine to pause. The engine finishes the batch in hand, stores its offset,
closes the source and, before it opens the source again, runs every pending request
(`run_pending`): the initial snapshot's job (`spark_jobs/snapshot.py --blocking`) reads the
requested tables in primary-key chunks (its `additional-conditions` as SELECT overrides) and
writes them to the sinks as `op: r` rows with the initial snapshot's `source.snapshot` markers,
under a batch seq reserved after the last streamed batch. Then a `completed` row, and streaming
resumes from the stored offset: the position where it paused (PostgreSQL's slot keeps the WAL,
MySQL's binlog position is in the offsets). Changes made while the snapshot ran follow its rows.

Crash safety: a request without `completed` is run again at the next start, before streaming;
the job resumes the snapshot's plan from its progress rows (`_state/snapshots` under the
partition `<connector>#blocking`, so it never mixes with the initial snapshot's), and chunks
already in the Delta change log are not written again (their app transactions).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa

from connectors.settings.config import ConnectorConfig
from connectors.signals.model import ExecuteSnapshot, Request, SignalError, SignalRecord, _plain
from connectors.signals.notify import Notifier
from connectors.signals.tables import StateTable, now
from connectors.snapshot.jobs import ChildJob

log = logging.getLogger(__name__)

REQUESTED, COMPLETED, FAILED = "requested", "completed", "failed"
SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),  # the signal's journal key
        pa.field("status", pa.string(), nullable=False),  # requested | completed | failed
        pa.field("snapshot_id", pa.string(), nullable=False),
        pa.field("request", pa.string()),  # JSON: tables, conditions, correlation id
        pa.field("message", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def progress_key(connector: str) -> str:
    """The `_state/snapshots` partition of a connector's blocking snapshots."""
    return f"{connector}#blocking"


class _Signal:
    """The execute-snapshot handler: blocking requests here, the others to `other`."""

    def __init__(self, owner: BlockingSnapshots, other: Any) -> None:
        self.owner, self.other = owner, other

    def handle(self, request: Request, signal: SignalRecord) -> str | None:
        if isinstance(request, ExecuteSnapshot) and request.snapshot_type == "blocking":
            return self.owner.request(request, signal)
        if self.other is None:
            raise SignalError("no action is registered for this snapshot type")
        result: str | None = self.other.handle(request, signal)
        return result


class BlockingSnapshots:
    def __init__(self, cfg: ConnectorConfig, notifier: Notifier) -> None:
        self.cfg = cfg
        self.notifier = notifier
        self.table = StateTable(cfg.warehouse, "blocking_snapshots", SCHEMA)
        self._lock = threading.RLock()  # the signal thread and the engine share the table
        self.pause_stream: Callable[[], None] = lambda: None  # set by the engine
        self._job = ChildJob()
        self._stopping = False
        self.log_level = logging.getLevelName(logging.getLogger().getEffectiveLevel())

    def register(self, handlers: Any) -> None:
        from connectors.signals.model import EXECUTE_SNAPSHOT

        handlers.register(EXECUTE_SNAPSHOT, _Signal(self, handlers.get(EXECUTE_SNAPSHOT)))

    # ------------------------------------------------------------------ state
    def _rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self.table.rows(self.cfg.name), key=lambda r: r["at"])

    def pending(self) -> list[dict[str, Any]]:
        """The requests not yet completed (or failed), oldest first."""
        rows = self._rows()
        ended = {r["snapshot_id"] for r in rows if r["status"] != REQUESTED}
        return [r for r in rows if r["status"] == REQUESTED and r["snapshot_id"] not in ended]

    def _record(self, row: dict[str, Any], status: str, message: str | None = None) -> None:
        with self._lock:
            self.table.append(
                [{**row, "connector": self.cfg.name, "status": status, "message": message, "at": now()}]
            )

    # ------------------------------------------------------------------ the signal
    def request(self, request: ExecuteSnapshot, signal: SignalRecord) -> str:
        tables = list(request.tables) or [_plain(c) for c in request.data_collections]
        if not tables:
            return "no data-collections: nothing to snapshot"
        conditions = {c.table: c.sql for c in request.conditions}
        with self._lock:
            rows = self._rows()
            mine = [r for r in rows if r["key"] == signal.key]
            if mine:  # a crash between the request and the journal's `processed` row
                self.pause_stream()
                return f"already requested as blocking snapshot {mine[0]['snapshot_id']}"
            busy = [t for r in self.pending() for t in orjson.loads(r["request"])["tables"] if t in tables]
            if busy:
                raise SignalError(
                    f"a blocking snapshot of {', '.join(sorted(set(busy)))} is already pending or running"
                )
            sid = uuid.uuid4().hex[:16]
            body = {"tables": tables, "conditions": conditions, "correlation_id": signal.id or None}
            self._record(
                {"key": signal.key, "snapshot_id": sid, "request": orjson.dumps(body).decode()}, REQUESTED
            )
        log.info(
            "blocking snapshot %s of %s requested: streaming pauses while it runs", sid, ", ".join(tables)
        )
        self.pause_stream()
        return f"blocking snapshot {sid} of {', '.join(tables)}"

    # ------------------------------------------------------------------ the engine side
    def stop(self) -> None:
        """Stop a running snapshot job (the next start resumes it)."""
        self._stopping = True
        self._job.stop()

    def run_pending(self, next_seq: Callable[[], int]) -> None:
        """Run every pending blocking snapshot to its end (the stream is paused: its source is
        closed). `next_seq`: the seq the next stream batch would take (the snapshot's rows take
        it). A failed snapshot is recorded and reported; streaming goes on, as for Debezium."""
        while not self._stopping:
            todo = self.pending()
            if not todo:
                return
            row = todo[0]
            body = orjson.loads(row["request"])
            sid = row["snapshot_id"]
            log.info("streaming paused for blocking snapshot %s of %s", sid, ", ".join(body["tables"]))
            code, err = self._run_job(sid, body, next_seq())
            if self._stopping:
                return  # stopped: the snapshot stays pending, the next start resumes it
            if code == 0:
                self._record(row, COMPLETED)
                log.info("blocking snapshot %s completed; streaming resumes where it paused", sid)
            else:
                message = err or f"the snapshot job failed (exit {code})"
                self._record(row, FAILED, message)
                log.error("blocking snapshot %s failed: %s; streaming resumes", sid, message)
                self.notifier.signals.error(
                    body.get("correlation_id") or sid, "execute-snapshot", "blocking", message
                )

    def _run_job(self, sid: str, body: dict[str, Any], seq: int) -> tuple[int, str | None]:
        request = {"raw": dict(self.cfg.origin.raw), "snapshot_id": sid, "batch_seq": seq, **body}
        return self._job.run("spark_jobs.snapshot", "--blocking", request, self.log_level)


def build(cfg: ConnectorConfig, notifier: Notifier) -> BlockingSnapshots:
    return BlockingSnapshots(cfg, notifier)
