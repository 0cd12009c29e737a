"""Exactly-once signal processing: the journal `<warehouse>/_state/signal_log`.

A signal is `received` (one Delta commit) before the channel may forget it, and `processed`
(a second commit, with the outcome) after its action ran. At start the journal is read back:
keys already there are never taken again (a channel that delivers a signal twice, a source
batch replayed after a crash, a file not yet emptied), and signals received but not processed
(the process died in between) are processed now. So a restart or a SIGKILL neither repeats a
signal nor loses one; the one window left is between an action and its `processed` commit,
where a crash repeats that action once (an action that keeps state must know its signal key).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from connectors.signals.model import SignalRecord
from connectors.signals.tables import JOURNAL_SCHEMA, StateTable, now

log = logging.getLogger(__name__)

RECEIVED, PROCESSED = "received", "processed"


class Journal:
    def __init__(self, warehouse: str | Path, connector: str) -> None:
        self.connector = connector
        self.table = StateTable(warehouse, "signal_log", JOURNAL_SCHEMA)
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self.loaded = False

    def load(self) -> list[SignalRecord]:
        """Read the journal: remember every key; return the signals received but never
        processed, in the order they were received."""
        rows = self.table.rows(self.connector)
        done = {r["key"] for r in rows if r["status"] == PROCESSED}
        pending: dict[str, SignalRecord] = {}
        for r in sorted(rows, key=lambda r: r["at"]):
            if r["status"] == RECEIVED and r["key"] not in done and r["key"] not in pending:
                pending[r["key"]] = SignalRecord(
                    r["id"] or "",
                    r["type"] or "",
                    r["data"],
                    r["channel"],
                    r["key"],
                    r["channel_offset"],
                    problem=r["message"],  # a received row's message: why it is no readable signal
                )
        with self._lock:
            self._known = {r["key"] for r in rows}
        self.loaded = True
        if pending:
            log.info("signals: %d received before the last stop and not yet processed", len(pending))
        return list(pending.values())

    def seen(self, key: str) -> bool:
        with self._lock:
            return key in self._known

    def receive(self, records: list[SignalRecord]) -> list[SignalRecord]:
        """Record new signals durably; returns those not seen before (in order). Duplicates in
        `records` itself are dropped too."""
        with self._lock:
            fresh: list[SignalRecord] = []
            keys: set[str] = set()
            for r in records:
                if r.key in self._known or r.key in keys:
                    log.info("signal '%s' (%s) was taken before; ignoring this delivery", r.id, r.key)
                    continue
                keys.add(r.key)
                fresh.append(r)
            if not fresh:
                return []
            at = now()
            self.table.append([self._row(r, RECEIVED, None, r.problem, at) for r in fresh])
            self._known |= keys
            return fresh

    def processed(self, record: SignalRecord, outcome: str, message: str | None) -> None:
        self.table.append([self._row(record, PROCESSED, outcome, message, now())])

    def last_channel_offset(self, channel: str, prefix: str) -> int | None:
        """The highest `channel_offset` taken from `channel` under keys starting with `prefix`
        (Kafka: where the topic partition was left)."""
        rows = self.table.rows(self.connector, ["key", "channel", "channel_offset"])
        offsets = [
            r["channel_offset"]
            for r in rows
            if r["channel"] == channel and r["channel_offset"] is not None and r["key"].startswith(prefix)
        ]
        return max(offsets) if offsets else None

    def _row(
        self, r: SignalRecord, status: str, outcome: str | None, message: str | None, at: Any
    ) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "key": r.key,
            "status": status,
            "channel": r.channel,
            "id": r.id,
            "type": r.type,
            "data": r.data,
            "channel_offset": r.channel_offset,
            "outcome": outcome,
            "message": message,
            "at": at,
        }
