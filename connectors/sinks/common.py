"""What every sink shares: one serialization of a batch however many sinks need the Kafka bytes
(Kafka, jsonl), the `__debezium.context.*` headers, and small settings helpers."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from connectors.api import Batch, ConfigError, Record
from connectors.format.serde import to_json_bytes

KeyValue = tuple[bytes | None, bytes | None]


def serialized(record: Record, key_schemas: bool = True, value_schemas: bool = True) -> KeyValue:
    """The Kafka key and value bytes of one record (JsonConverter form; None stays None)."""
    return (
        to_json_bytes(record.key_schema, record.key, key_schemas),
        to_json_bytes(record.value_schema, record.value, value_schemas),
    )


# One-slot cache: the engine hands the same Batch to each sink in turn, so the last batch's
# bytes are all we need. Keyed by the identity of `batch.records` (held strongly, so the id
# cannot be reused while cached) plus the two schema switches. Bounded: one batch.
_cache: tuple[list[Record], int, bool, bool, list[KeyValue]] | None = None
_cache_lock = threading.Lock()


def serialized_batch(batch: Batch, key_schemas: bool = True, value_schemas: bool = True) -> list[KeyValue]:
    """`serialized(r)` for every record of the batch, computed once per batch and flags."""
    global _cache
    records = batch.records
    c = _cache
    if (
        c is not None
        and c[0] is records
        and c[1] == len(records)
        and c[2] == key_schemas
        and c[3] == value_schemas
    ):
        return c[4]
    out = [
        (
            to_json_bytes(r.key_schema, r.key, key_schemas),
            to_json_bytes(r.value_schema, r.value, value_schemas),
        )
        for r in records
    ]
    with _cache_lock:
        _cache = (records, len(records), key_schemas, value_schemas, out)
    return out


def sink_types(cfg: Any) -> list[str]:
    raw = getattr(cfg, "sink_types", None) or (getattr(cfg, "sink", {}) or {}).get("type") or []
    if isinstance(raw, str):
        raw = [s for s in (p.strip() for p in raw.split(",")) if s]
    return [str(s).strip().lower() for s in raw]


def context_headers_for(cfg: Any) -> tuple[tuple[str, bytes], ...]:
    """The `__debezium.context.*` headers when `extended.headers.enabled` is on (the default)."""
    source = getattr(cfg, "source", {}) or {}
    if not source.get("extended.headers.enabled", True):
        return ()
    from connectors.format.envelope import context_headers

    return context_headers(str(getattr(cfg, "topic_prefix", "")), str(getattr(cfg, "connector", "")))


def with_context(record: Record, ctx: tuple[tuple[str, bytes], ...]) -> tuple[tuple[str, bytes], ...]:
    """A record's Kafka headers: its own, then the context headers on data-change records."""
    if not ctx or not record.has_context:
        return record.headers
    return record.headers + ctx if record.headers else ctx


def sub_config(sink_cfg: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """`{rest: value}` for every key of `sink_cfg` starting with `prefix` (e.g. 'kafka.producer.')."""
    return {k[len(prefix) :]: v for k, v in sink_cfg.items() if k.startswith(prefix)}


def as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def schema_flags(cfg: Any) -> tuple[bool, bool]:
    """(key schemas enabled, value schemas enabled) from the connector config, default true."""
    ks = getattr(cfg, "key_schemas_enable", True)
    vs = getattr(cfg, "value_schemas_enable", True)
    return (
        as_bool(ks, "debezium.format.key.schemas.enable"),
        as_bool(vs, "debezium.format.value.schemas.enable"),
    )
