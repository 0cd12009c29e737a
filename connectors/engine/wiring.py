"""Wiring: a loaded connector configuration → the engine with its source, sinks and offset store.

The one place that knows which source class serves which connector; the CLI, the demo (and
later the Spark jobs and the Airflow operators) build their engines here.
"""

from __future__ import annotations

from typing import Any


def build_engine(cfg: Any, *, until_caught_up: bool = False, max_seconds: float | None = None) -> Any:
    """Wire source, sinks and offset store for a loaded config."""
    from connectors.engine.loop import Engine
    from connectors.sinks import build_sinks
    from connectors.state.offsets import DeltaOffsetStore

    if cfg.connector == "postgres":
        from connectors.sources.postgres.source import PostgresSource, offset_key

        def factory() -> Any:
            return PostgresSource(cfg, until_caught_up=until_caught_up, max_seconds=max_seconds)
    else:
        from connectors.sources.mysql.source import MySqlSource, offset_key  # type: ignore[no-redef]

        def factory() -> Any:
            return MySqlSource(cfg, until_caught_up=until_caught_up, max_seconds=max_seconds)

    sinks = build_sinks(cfg)
    _check_storage(cfg, sinks)
    offsets = DeltaOffsetStore(cfg.warehouse, cfg.name)
    retries = int(cfg.source.get("errors.max.retries", -1))
    own = cfg.tidemark
    return Engine(
        factory,
        sinks,
        offsets,
        offset_key=offset_key,
        max_retries=retries,
        commit_max_events=int(own.get("commit.max.events", 4096)),
        offsets_flush_s=int(own.get("offsets.flush.interval.ms", 1000)) / 1000,
    )


def _check_storage(cfg: Any, sinks: list[Any]) -> None:
    """Refuse unwritable storage before the source connects (and creates a slot or takes a
    binlog position): the warehouse when something is kept there (offsets for sinks that keep
    none, MySQL's schema history), and each Delta change log."""
    from connectors.state.storage import check_writable

    for s in sinks:
        if s.name == "delta":
            check_writable(s.table_uri, "the Delta change log", storage_options=s.storage_options)
    if cfg.connector != "postgres" or not all(getattr(s, "keeps_offsets", False) for s in sinks):
        check_writable(cfg.warehouse, "the warehouse (tidemark.warehouse)")
