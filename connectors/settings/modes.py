"""The value sets of the enumerated properties Tidemark reads, defined once as `Literal` types.

The catalog takes its `choices` from these (`choices(DecimalMode)`), and the typed settings use
them as field types, so the accepted values and the types the readers see cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

Connector = Literal["postgres", "mysql", "mariadb"]
SinkType = Literal["kafka", "delta", "jsonl"]
KafkaClient = Literal["confluent", "kafka-python"]
WireFormat = Literal["json"]

BinaryMode = Literal["base64", "base64-url-safe", "bytes", "hex"]
DecimalMode = Literal["double", "precise", "string"]
FailureMode = Literal["fail", "ignore", "skip", "warn"]
NameAdjustment = Literal["avro", "avro_unicode", "none"]
Operation = Literal["c", "u", "d", "t", "r", "none"]

PgSnapshotMode = Literal[
    "always", "configuration_based", "custom", "initial", "initial_only", "never", "no_data", "when_needed"
]
PgSnapshotLocking = Literal["custom", "none", "shared"]
SnapshotTableOrder = Literal["ascending", "descending", "disabled"]
SnapshotQueryMode = Literal["custom", "select_all"]
PgTimePrecision = Literal[
    "adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"
]
PgSslMode = Literal["allow", "disable", "prefer", "require", "verify-ca", "verify-full"]
HstoreMode = Literal["json", "map"]
IntervalMode = Literal["numeric", "string"]
PluginName = Literal["pgoutput"]  # decoderbufs and wal2json need server extensions
PublicationMode = Literal["all_tables", "disabled", "filtered", "no_tables"]

MySqlSnapshotLocking = Literal[
    "custom", "extended", "minimal", "minimal_percona", "minimal_percona_no_table_locks", "none"
]  # fmt: skip
MariaDbSnapshotLocking = Literal["custom", "extended", "minimal", "none"]
MySqlSnapshotMethod = Literal["locking", "watermarks"]  # tidemark.snapshot.mysql.method
IncrementalReader = Literal["thread", "spark"]  # tidemark.incremental.snapshot.reader
MySqlSnapshotMode = Literal[
    "always", "configuration_based", "custom", "initial", "initial_only", "never", "no_data", "recovery",
    "when_needed",
]  # fmt: skip
# Debezium 3.6's binlog connectors refuse `adaptive` (it cannot represent TIME beyond 24 hours).
MySqlTimePrecision = Literal[
    "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"
]
BigintUnsignedMode = Literal["long", "precise"]
MySqlSslMode = Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"]
MariaDbSslMode = Literal["disable", "trust", "verify-ca", "verify-full"]


def choices(literal: Any) -> tuple[str, ...]:
    """The values of a `Literal` type, in their order there: a catalog entry's `choices` (error
    messages list them in this order)."""
    return tuple(get_args(literal))
