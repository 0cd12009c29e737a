"""Sinks: Kafka, Delta change log, JSON lines. All take `api.Batch`; `build_sinks` makes the
ones a configuration names. What they share (one serialization per batch, context headers,
settings helpers) lives in `sinks.common`."""

from __future__ import annotations

from typing import Any

from connectors.api import ConfigError, Sink
from connectors.sinks.common import context_headers_for, sink_types


def build_sinks(cfg: Any) -> list[Sink]:
    """Sinks named by `debezium.sink.type` (`cfg.sink_types`), in order, built from the config."""
    from connectors.sinks.delta import DeltaChangeLogSink
    from connectors.sinks.jsonl import JsonLinesSink
    from connectors.sinks.kafka import KafkaSink

    factories = {"kafka": KafkaSink, "delta": DeltaChangeLogSink, "jsonl": JsonLinesSink}
    # One runId per connector start, shared by every sink that carries headers.
    ctx = context_headers_for(cfg)
    out: list[Sink] = []
    for t in sink_types(cfg):
        if t not in factories:
            raise ConfigError(
                f"unknown sink type {t!r} in debezium.sink.type", f"valid values: {', '.join(factories)}"
            )
        if t == "jsonl":
            out.append(JsonLinesSink.from_config(cfg))  # a jsonl line has no headers
        else:
            out.append(factories[t].from_config(cfg, context=ctx))
    return out


__all__ = ["build_sinks"]
