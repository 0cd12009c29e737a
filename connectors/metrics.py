"""Streaming metrics (Debezium's MBean names as Prometheus metrics), in a private registry so
several engines in one process (tests) do not clash. `tidemark run --metrics-port N` serves them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

if TYPE_CHECKING:
    from connectors.api import Batch


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events = Counter("tidemark_total_number_of_events_seen", "TotalNumberOfEventsSeen", registry=r)
        self.events_by_op = Counter("tidemark_events_by_op", "Create/Update/Delete events seen", ["op"], registry=r)
        self.filtered = Counter("tidemark_number_of_events_filtered", "NumberOfEventsFiltered", registry=r)
        self.committed_tx = Counter("tidemark_number_of_committed_transactions",
                                    "NumberOfCommittedTransactions", registry=r)
        self.batches = Counter("tidemark_batches", "Batches delivered to every sink", registry=r)
        self.disconnects = Counter("tidemark_number_of_disconnects", "NumberOfDisconnects", registry=r)
        self.connected = Gauge("tidemark_connected", "Connected", registry=r)
        self.behind_ms = Gauge("tidemark_milliseconds_behind_source", "MilliSecondsBehindSource", registry=r)
        self.last_event = Gauge("tidemark_last_event_timestamp_seconds", "Time of the last event", registry=r)

    def observe_batch(self, batch: "Batch") -> None:
        self.batches.inc()
        n = len(batch.records)
        if n:
            self.events.inc(n)
            self.last_event.set(time.time())
        src_ts = batch.extra.get("source_ts_ms")
        if src_ts:
            self.behind_ms.set(max(0.0, time.time() * 1000 - src_ts))
        tx = batch.extra.get("transactions")
        if tx:
            self.committed_tx.inc(tx)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
