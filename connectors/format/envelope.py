"""Debezium envelope, source block, transaction metadata and heartbeat schemas.

Field lists and names follow Debezium 3.x (checked against records captured from Debezium 3.6,
tests/golden/). Payload builders are plain dict literals: they run once per event.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import orjson

from connectors.api import Record
from connectors.format.schema import Schema, prim, struct

VERSION = "3.6.0.Final"  # the Debezium event format we reproduce; consumers may read it

_SNAPSHOT_ENUM = prim(
    "string",
    optional=True,
    name="io.debezium.data.Enum",
    version=1,
    parameters={
        "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
    },
    default="false",
)

_COMMON_HEAD = [
    ("version", prim("string")),
    ("connector", prim("string")),
    ("name", prim("string")),
    ("ts_ms", prim("int64")),
    ("snapshot", _SNAPSHOT_ENUM),
    ("db", prim("string")),
    ("sequence", prim("string", optional=True)),
    ("ts_us", prim("int64", optional=True)),
    ("ts_ns", prim("int64", optional=True)),
]

PG_SOURCE = struct(
    "io.debezium.connector.postgresql.Source",
    _COMMON_HEAD
    + [
        ("schema", prim("string")),
        ("table", prim("string")),
        ("txId", prim("int64", optional=True)),
        ("lsn", prim("int64", optional=True)),
        ("xmin", prim("int64", optional=True)),
        ("origin", prim("string", optional=True)),
        ("origin_lsn", prim("int64", optional=True)),
    ],
    version=1,
)

MYSQL_SOURCE = struct(
    "io.debezium.connector.mysql.Source",
    _COMMON_HEAD
    + [
        ("table", prim("string", optional=True)),
        ("server_id", prim("int64")),
        ("gtid", prim("string", optional=True)),
        ("file", prim("string")),
        ("pos", prim("int64")),
        ("row", prim("int32")),
        ("thread", prim("int64", optional=True)),
        ("query", prim("string", optional=True)),
    ],
    version=1,
)

MARIADB_SOURCE = struct(
    "io.debezium.connector.mariadb.Source", [(f.name, f.schema) for f in MYSQL_SOURCE.fields], version=1
)

TRANSACTION_BLOCK = struct(
    "event.block",
    [
        ("id", prim("string")),
        ("total_order", prim("int64")),
        ("data_collection_order", prim("int64")),
    ],
    optional=True,
    version=1,
)


def envelope_schema(name_prefix: str, value: Schema, source: Schema) -> Schema:
    """`<prefix>.<ns>.<table>.Envelope`, version 2 as in Debezium 3.x."""
    opt_value = value.with_optional(True)
    return struct(
        f"{name_prefix}.Envelope",
        [
            ("before", opt_value),
            ("after", opt_value),
            ("source", source),
            ("transaction", TRANSACTION_BLOCK),
            ("op", prim("string")),
            ("ts_ms", prim("int64", optional=True)),
            ("ts_us", prim("int64", optional=True)),
            ("ts_ns", prim("int64", optional=True)),
        ],
        version=2,
    )


# --------------------------------------------------------------------------- transaction metadata
TX_KEY = struct("io.debezium.connector.common.TransactionMetadataKey", [("id", prim("string"))], version=1)
TX_VALUE = struct(
    "io.debezium.connector.common.TransactionMetadataValue",
    [
        ("status", prim("string")),
        ("id", prim("string")),
        ("event_count", prim("int64", optional=True)),
        (
            "data_collections",
            Schema(
                "array",
                optional=True,
                items=struct(
                    "event.collection",
                    [
                        ("data_collection", prim("string")),
                        ("event_count", prim("int64")),
                    ],
                    optional=True,
                    version=1,
                ),
            ),
        ),
        ("ts_ms", prim("int64")),
    ],
    version=1,
)

# --------------------------------------------------------------------------- heartbeats
HEARTBEAT_KEY = struct(
    "io.debezium.connector.common.ServerNameKey", [("serverName", prim("string"))], version=1
)
HEARTBEAT_VALUE = struct("io.debezium.connector.common.Heartbeat", [("ts_ms", prim("int64"))], version=1)


def change_value(before: Any, after: Any, source: dict[str, Any], op: str, block: Any) -> dict[str, Any]:
    """The Envelope payload of one change event; `ts_*` are the connector's processing time."""
    ns = time.time_ns()
    return {
        "before": before,
        "after": after,
        "source": source,
        "transaction": block,
        "op": op,
        "ts_ms": ns // 1_000_000,
        "ts_us": ns // 1000,
        "ts_ns": ns,
    }


def key_header(key_schema: Schema | None, key: Any) -> bytes:
    """A key as Kafka Connect's JSON header converter writes it (`__debezium.oldkey`/`newkey`)."""
    schema = key_schema.json_text if key_schema is not None else b"null"
    return b'{"schema":' + schema + b',"payload":' + orjson.dumps(key) + b"}"


def time_fields(ts_ns: int) -> tuple[int, int, int]:
    """(ms, µs, ns) from nanoseconds since the epoch."""
    return ts_ns // 1_000_000, ts_ns // 1_000, ts_ns


NEWKEY = "__debezium.newkey"
OLDKEY = "__debezium.oldkey"


def heartbeat(topic: str, server_name: str) -> Record:
    """A heartbeat record (`__debezium-heartbeat.<prefix>`), as both sources emit it."""
    return Record(
        topic, {"serverName": server_name}, {"ts_ms": int(time.time() * 1000)}, HEARTBEAT_KEY, HEARTBEAT_VALUE
    )


CONTEXT_HEADER_PREFIX = "__debezium.context."
# Debezium's `connectorName` context header is the connector type, as in the source block.
CONNECTOR_NAMES = {"postgres": "postgresql", "mysql": "mysql", "mariadb": "mariadb"}


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 version 7), as Debezium's per-run `runId` (Python 3.11
    has no uuid.uuid7)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62 | rand & ((1 << 62) - 1)
    )
    return str(uuid.UUID(int=value))


def _string_header(value: str) -> bytes:
    return b'{"schema":{"type":"string","optional":false},"payload":' + orjson.dumps(value) + b"}"


def context_headers(
    topic_prefix: str, connector: str, run_id: str | None = None
) -> tuple[tuple[str, bytes], ...]:
    """`extended.headers.enabled` (Debezium's default): the four `__debezium.context.*` headers
    Debezium 3.6 puts on every data-change record (changes, their tombstones, truncates) and
    schema-change record (not on transaction or message records), after any key-change header,
    in JSON-converter form. `runId` is new for every connector start."""
    values = (
        ("connectorLogicalName", topic_prefix),
        ("taskId", "0"),
        ("connectorName", CONNECTOR_NAMES.get(connector, connector)),
        ("runId", run_id or uuid7()),
    )
    return tuple((CONTEXT_HEADER_PREFIX + k, _string_header(v)) for k, v in values)
