"""What every sink shares: one serialization of a batch however many sinks need the Kafka bytes
(Kafka, jsonl), the `__debezium.context.*` headers, and small settings helpers."""

from __future__ import annotations

import threading

from connectors.api import Batch, Record
from connectors.format.serde import to_json_bytes
from connectors.settings.config import ConnectorConfig

KeyValue = tuple[bytes | None, bytes | None]
# A value as `serialized_batch` gives it: its bytes, or pieces that concatenate to them (a record
# with `wire`: a writer of many records writes the pieces, never copying them into one value)
Pieces = tuple[bytes, ...]
KeyPieces = tuple[bytes | None, bytes | Pieces | None]


def joined(value: bytes | Pieces | None) -> bytes | None:
    """A value of `serialized_batch` as one byte string."""
    return value if value is None or isinstance(value, bytes) else b"".join(value)


def serialized(record: Record, key_schemas: bool = True, value_schemas: bool = True) -> KeyValue:
    """The Kafka key and value bytes of one record (JsonConverter form; None stays None)."""
    w = record.wire
    if w is not None and w[0] == (key_schemas, value_schemas):
        return w[1], joined(w[2])
    return (
        to_json_bytes(record.key_schema, record.key, key_schemas),
        to_json_bytes(record.value_schema, record.value, value_schemas),
    )


# One-slot cache: the engine hands the same Batch to each sink in turn, so the last batch's
# bytes are all we need. Keyed by the identity of `batch.records` (held strongly, so the id
# cannot be reused while cached) plus the two schema switches. Bounded: one batch.
_cache: tuple[list[Record], int, bool, bool, list[KeyPieces]] | None = None
_cache_lock = threading.Lock()


def serialized_batch(batch: Batch, key_schemas: bool = True, value_schemas: bool = True) -> list[KeyPieces]:
    """`serialized(r)` for every record of the batch, computed once per batch and flags; the
    value of a record with `wire` as its pieces (`joined` makes them one byte string)."""
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
    flags = (key_schemas, value_schemas)
    out: list[KeyPieces] = [
        (w[1], w[2])
        if (w := r.wire) is not None and w[0] == flags
        else (
            to_json_bytes(r.key_schema, r.key, key_schemas),
            to_json_bytes(r.value_schema, r.value, value_schemas),
        )
        for r in records
    ]
    with _cache_lock:
        _cache = (records, len(records), key_schemas, value_schemas, out)
    return out


def context_headers_for(cfg: ConnectorConfig) -> tuple[tuple[str, bytes], ...]:
    """The `__debezium.context.*` headers when `extended.headers.enabled` is on (the default)."""
    if not cfg.source.extended_headers_enabled:
        return ()
    from connectors.format.envelope import context_headers

    return context_headers(cfg.topic_prefix, cfg.connector)


def with_context(record: Record, ctx: tuple[tuple[str, bytes], ...]) -> tuple[tuple[str, bytes], ...]:
    """A record's Kafka headers: its own, then the context headers on data-change records."""
    if not ctx or not record.has_context:
        return record.headers
    return record.headers + ctx if record.headers else ctx


def schema_flags(cfg: ConnectorConfig) -> tuple[bool, bool]:
    """(key schemas enabled, value schemas enabled): the JsonConverter's `schemas.enable`."""
    return cfg.format.key_schemas_enable, cfg.format.value_schemas_enable
