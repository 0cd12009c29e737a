"""Wiring: a loaded connector configuration → the engine with its source, sinks and offset store.

The one place that knows which source class serves which connector; the CLI, the demo (and
later the Spark jobs and the Airflow operators) build their engines here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.api import Sink, Source
from connectors.engine.loop import Engine
from connectors.settings.config import ConnectorConfig
from connectors.sinks import build_sinks
from connectors.sinks.delta import DeltaChangeLogSink
from connectors.state.offsets import DeltaOffsetStore
from connectors.state.storage import check_writable


def build_engine(
    cfg: ConnectorConfig, *, until_caught_up: bool = False, max_seconds: float | None = None
) -> Engine:
    """Wire source, sinks and offset store for a loaded config."""
    source_class, offset_key = _source(cfg)

    live: Any = None  # set-binlog-position: the source it moves (signals/binlog_position.py)

    def factory() -> Source:
        src = source_class(cfg, until_caught_up=until_caught_up, max_seconds=max_seconds)
        if live is not None:
            live.set(src)
        if incremental is not None and (incremental.gtid is not None or incremental.spark):
            src.wants_position = incremental.wants_position  # type: ignore[attr-defined]
        if incremental is not None and cfg.connector != "postgres":
            src.on_schema_change = incremental.schema_changed  # type: ignore[attr-defined]  # MySqlSource
        return src

    from connectors.signals.processor import SignalProcessor

    # Before the sinks: a signal/notification setting that is wrong fails before anything opens.
    signals = SignalProcessor.from_config(cfg)
    incremental = blocking = None
    if signals is not None:
        from connectors.snapshot import blocking as blocking_snapshots
        from connectors.snapshot.incremental import build

        incremental = build(cfg, signals.notifier, signals.settings.data_collection)
        incremental.register(signals.handlers)
        if cfg.connector != "postgres":
            from connectors.signals.binlog_position import register

            processor = signals
            live = register(cfg, signals.handlers, lambda: processor.current_offset())
        blocking = blocking_snapshots.build(cfg, signals.notifier)
        blocking.register(signals.handlers)  # execute-snapshot with "type": "blocking"
    sinks = build_sinks(cfg)
    _check_storage(cfg, sinks)
    return Engine(
        factory,
        sinks,
        DeltaOffsetStore(cfg.warehouse, cfg.name),
        offset_key=offset_key,
        max_retries=cfg.source.errors_max_retries,
        commit_max_events=cfg.runtime.commit_max_events,
        offsets_flush_s=cfg.runtime.offsets_flush_interval_ms / 1000,
        signals=signals,
        incremental=incremental,
        blocking=blocking,
    )


def resume_point(cfg: ConnectorConfig) -> tuple[int, dict[str, Any] | None]:
    """(the seq of the next batch, the offset the next run resumes from — None when nothing is
    stored or it was reset) for `cfg`: what the snapshot modes decide on."""
    from connectors.engine.loop import close_all

    sinks = build_sinks(cfg)
    try:
        _, offset_key = _source(cfg)
        engine = Engine(_no_source, sinks, DeltaOffsetStore(cfg.warehouse, cfg.name), offset_key=offset_key)
        return engine.resume_point()
    finally:
        close_all(sinks)


class StoredOffsets:
    """The newest offset any of `cfg`'s sinks holds (the incremental snapshot's stored state is in
    it), read again on every call: what the chunk job follows the stream by."""

    def __init__(self, cfg: ConnectorConfig) -> None:
        self.sinks = build_sinks(cfg)
        _, offset_key = _source(cfg)
        self.engine = Engine(
            _no_source, self.sinks, DeltaOffsetStore(cfg.warehouse, cfg.name), offset_key=offset_key
        )

    def newest(self) -> dict[str, Any] | None:
        return self.engine._durable(quiet=True)[3]

    def close(self) -> None:
        from connectors.engine.loop import close_all

        close_all(self.sinks)


def reserve_seq(cfg: ConnectorConfig, seq: int) -> None:
    """Take batch seq `seq` for rows that are not a stream batch (a snapshot's, in the Delta change
    log: `(batch_seq, event_index)` orders that log), so the stream's next batch comes after them.
    The stored offset is kept as it is: it is saved again under `seq` (or, with none stored, a
    marker that holds only the seq)."""
    store = DeltaOffsetStore(cfg.warehouse, cfg.name)
    latest = store.load()
    store.save(seq, latest[1] if latest is not None else {"seq_only": True})


def _no_source() -> Source:
    raise AssertionError("an engine built to read the stored offsets never runs")


def reset_offsets(cfg: ConnectorConfig) -> None:
    """Forget the stored offsets: the next run starts where the server stands (or where a
    snapshot taken now puts it). The Delta change log keeps its rows and its app-transaction
    markers, so rows already landed are never written twice."""
    store = DeltaOffsetStore(cfg.warehouse, cfg.name)
    seqs = [store.last_seq() or 0]
    if "delta" in cfg.sink_types:
        own = DeltaChangeLogSink.from_config(cfg).last_offset()
        seqs.append(own[0] if own else 0)
    # A marker newer than every stored offset.
    store.save(max(seqs) + 1, {"reset": True})


def _source(cfg: ConnectorConfig) -> tuple[Callable[..., Source], Callable[[dict[str, Any] | None], tuple]]:
    """The source class of the configured connector and its offsets' total order. Imported here,
    not at the top: a PostgreSQL-only process never loads the binlog reader, and vice versa."""
    if cfg.connector == "postgres":
        from connectors.sources.postgres import source as pg

        return pg.PostgresSource, pg.offset_key
    from connectors.snapshot.watermarks import load_cover
    from connectors.sources.mysql import source as my

    def mysql_source(cfg: ConnectorConfig, **kw: Any) -> Source:
        # The stream skips what a lock-free snapshot's chunks already hold (snapshot/watermarks.py).
        src = my.MySqlSource(cfg, **kw)
        src.cover_loader = lambda s: load_cover(cfg, s)
        return src

    return mysql_source, my.offset_key


def _check_storage(cfg: ConnectorConfig, sinks: list[Sink]) -> None:
    """Refuse unwritable storage before the source connects (and creates a slot or takes a
    binlog position): the warehouse when something is kept there (offsets for sinks that keep
    none, MySQL's schema history), and each Delta change log."""
    for s in sinks:
        if isinstance(s, DeltaChangeLogSink):
            check_writable(s.table_uri, "the Delta change log", storage_options=s.storage_options)
    if cfg.connector != "postgres" or not all(getattr(s, "keeps_offsets", False) for s in sinks):
        check_writable(cfg.warehouse, "the warehouse (tidemark.warehouse)")
