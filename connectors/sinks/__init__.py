"""Sinks: Kafka, Delta change log, JSON lines. All take `api.Batch`; `build_sinks` makes the
ones a configuration names. What they share (one serialization per batch, context headers,
settings helpers) lives in `sinks.common`."""

from __future__ import annotations

from connectors.api import Sink
from connectors.settings.config import ConnectorConfig
from connectors.sinks.common import context_headers_for


def build_sinks(cfg: ConnectorConfig) -> list[Sink]:
    """Sinks named by `debezium.sink.type` (`cfg.sink_types`), in order, built from the config."""
    from connectors.sinks.delta import DeltaChangeLogSink
    from connectors.sinks.jsonl import JsonLinesSink
    from connectors.sinks.kafka import KafkaSink

    # One runId per connector start, shared by every sink that carries headers.
    ctx = context_headers_for(cfg)
    out: list[Sink] = []
    for t in cfg.sink.type:  # the configuration admits only these three
        if t == "kafka":
            out.append(KafkaSink.from_config(cfg, context=ctx))
        elif t == "delta":
            out.append(DeltaChangeLogSink.from_config(cfg, context=ctx))
        else:
            out.append(JsonLinesSink.from_config(cfg))  # a jsonl line has no headers
    return out


__all__ = ["build_sinks"]
