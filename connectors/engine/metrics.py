"""Streaming metrics (Debezium's MBean names as Prometheus metrics), in a private registry so
several engines in one process (tests) do not clash. `tidemark run --metrics-port N` serves them."""

from __future__ import annotations

import time
from collections import Counter as Tally
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from connectors.format.rowblock import ChunkRow

if TYPE_CHECKING:
    from connectors.api import Batch


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events = Counter("tidemark_total_number_of_events_seen", "TotalNumberOfEventsSeen", registry=r)
        self.events_by_op = Counter(
            "tidemark_events_by_op", "Create/Update/Delete events seen", ["op"], registry=r
        )
        for op in ("c", "u", "d", "t"):  # exported as 0 before the first event of each kind
            self.events_by_op.labels(op=op)
        self.filtered = Counter("tidemark_number_of_events_filtered", "NumberOfEventsFiltered", registry=r)
        self.committed_tx = Counter(
            "tidemark_number_of_committed_transactions", "NumberOfCommittedTransactions", registry=r
        )
        self.batches = Counter("tidemark_batches", "Batches delivered to every sink", registry=r)
        self.disconnects = Counter("tidemark_number_of_disconnects", "NumberOfDisconnects", registry=r)
        self.connected = Gauge("tidemark_connected", "Connected", registry=r)
        self.behind_ms = Gauge("tidemark_milliseconds_behind_source", "MilliSecondsBehindSource", registry=r)
        self.last_event = Gauge("tidemark_last_event_timestamp_seconds", "Time of the last event", registry=r)

    def observe_batch(self, batch: "Batch") -> None:
        """Count a batch every sink holds. Events are change events (records whose value has an
        `op`), as Debezium counts them: tombstones, heartbeats, transaction markers and schema
        changes are not. `batch.extra["filtered"]`: changes the source dropped (table/column
        filters, skipped.operations) while reading this batch."""
        self.batches.inc()
        # One list comprehension over the batch (this runs for every record); non-string ops
        # (records without one, tombstones) are dropped from the tally afterwards.
        # An incremental snapshot's chunk row says its op without making its value (`ChunkRow`).
        ops = Tally(
            [
                r.op if type(r) is ChunkRow else v.get("op") if type(v := r.value) is dict else None
                for r in batch.records
            ]
        )
        for bad in [op for op in ops if type(op) is not str]:
            del ops[bad]
        if ops:
            for op, n in ops.items():
                self.events_by_op.labels(op=op).inc(n)
            self.events.inc(sum(ops.values()))
            self.last_event.set(time.time())
        filtered = batch.extra.get("filtered")
        if filtered:
            self.filtered.inc(filtered)
        src_ts = batch.extra.get("source_ts_ms")
        if src_ts:
            self.behind_ms.set(max(0.0, time.time() * 1000 - src_ts))
        tx = batch.extra.get("transactions")
        if tx:
            self.committed_tx.inc(tx)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
