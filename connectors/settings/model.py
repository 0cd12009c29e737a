"""Typed, frozen settings: what the connectors, sinks and engine read.

`config.load` validates a file against the catalog (every problem in one error), fills the
catalog's defaults and then builds these objects once. Field names are the Debezium property
names with `.` → `_` (the alias is the property name); every field is required, so a default
lives in exactly one place — the catalog — and a reader never restates one. Secrets are
`SecretStr` (shown as `**********`; `.get_secret_value()` where a driver needs the text).

Only properties Tidemark acts on have fields; the catalog knows every Debezium property
(`config explain` shows them all).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from connectors.settings.catalog import HASH_ALGORITHMS
from connectors.settings.modes import (
    BigintUnsignedMode,
    BinaryMode,
    Connector,
    DecimalMode,
    FailureMode,
    HstoreMode,
    IncrementalReader,
    IntervalMode,
    KafkaClient,
    MariaDbSnapshotLocking,
    MariaDbSslMode,
    MySqlSnapshotLocking,
    MySqlSnapshotMethod,
    MySqlSnapshotMode,
    MySqlSslMode,
    MySqlTimePrecision,
    NameAdjustment,
    Operation,
    PgSnapshotLocking,
    PgSnapshotMode,
    PgSslMode,
    PgTimePrecision,
    PluginName,
    PublicationMode,
    SinkType,
    SnapshotQueryMode,
    SnapshotTableOrder,
    WireFormat,
)

Patterns = tuple[str, ...]  # a regex-list property: Java regexes, matched whole and case-insensitively


def _dotted(field_name: str) -> str:
    return field_name.replace("_", ".")


class _Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=_dotted,
        populate_by_name=True,
        arbitrary_types_allowed=True,
    )


@dataclass(frozen=True, slots=True)
class ColumnRule:
    """One column transform: `column.mask.with.<length>.chars`, `column.mask.hash[.v2].<alg>.with.salt.<salt>`
    or `column.truncate.to.<length>.chars`. `patterns` match `schema.table.column` / `db.table.column`."""

    kind: str  # "mask" | "hash" | "hash_v2" | "truncate"
    patterns: tuple[re.Pattern[str], ...]
    length: int | None = None
    algorithm: str | None = None  # Java MessageDigest name, e.g. SHA-256
    salt: str | None = None

    @property
    def hashlib_name(self) -> str | None:
        return HASH_ALGORITHMS.get(self.algorithm.upper()) if self.algorithm else None


class SourceSettings(_Frozen):
    """Connector properties every connector reads."""

    name: str | None
    topic_prefix: str
    database_hostname: str
    database_port: int
    database_user: str
    database_password: SecretStr | None
    database_initial_statements: SecretStr | None  # may set secrets (SET PASSWORD, keys)
    heartbeat_interval_ms: int
    heartbeat_action_query: str | None
    max_batch_size: int
    poll_interval_ms: int
    errors_max_retries: int
    binary_handling_mode: BinaryMode
    decimal_handling_mode: DecimalMode
    event_processing_failure_handling_mode: FailureMode
    extended_headers_enabled: bool
    field_name_adjustment_mode: NameAdjustment
    schema_name_adjustment_mode: NameAdjustment
    provide_transaction_metadata: bool
    skip_messages_without_change: bool
    skipped_operations: tuple[Operation, ...]
    tombstones_on_delete: bool
    topic_delimiter: str
    topic_heartbeat_prefix: str
    topic_transaction: str
    unavailable_value_placeholder: str
    table_include_list: Patterns
    table_exclude_list: Patterns
    table_ignore_builtin: bool
    column_include_list: Patterns
    column_exclude_list: Patterns
    column_propagate_source_type: Patterns
    datatype_propagate_source_type: Patterns
    message_key_columns: str | None
    snapshot_mode: str  # each connector's Literal (PgSnapshotMode, MySqlSnapshotMode)
    snapshot_locking_mode: str  # each connector's Literal
    snapshot_mode_configuration_based_snapshot_data: bool
    snapshot_mode_configuration_based_snapshot_schema: bool
    snapshot_mode_configuration_based_start_stream: bool
    snapshot_mode_configuration_based_snapshot_on_schema_error: bool
    snapshot_mode_configuration_based_snapshot_on_data_error: bool
    snapshot_include_collection_list: Patterns
    snapshot_fetch_size: int | None
    snapshot_max_threads: int
    snapshot_tables_order_by_row_count: SnapshotTableOrder
    snapshot_delay_ms: int
    snapshot_lock_timeout_ms: int
    snapshot_query_mode: SnapshotQueryMode
    # `column.mask.*` / `column.truncate.*` families, in configuration order
    column_rules: tuple[ColumnRule, ...] = Field(alias="column_rules")
    # `snapshot.select.statement.overrides.<table>` → SELECT
    select_overrides: Mapping[str, str] = Field(alias="select_overrides")


class PostgresSettings(SourceSettings):
    database_dbname: str
    database_sslmode: PgSslMode
    database_sslcert: str | None
    database_sslkey: str | None
    database_sslrootcert: str | None
    database_sslpassword: SecretStr | None
    database_tcp_keep_alive: bool = Field(alias="database.tcpKeepAlive")
    snapshot_mode: PgSnapshotMode
    snapshot_locking_mode: PgSnapshotLocking
    time_precision_mode: PgTimePrecision
    hstore_handling_mode: HstoreMode
    interval_handling_mode: IntervalMode
    include_unknown_datatypes: bool
    money_fraction_digits: int
    plugin_name: PluginName
    publication_name: str
    publication_autocreate_mode: PublicationMode
    publish_via_partition_root: bool
    slot_name: str
    slot_drop_on_stop: bool
    slot_max_retries: int
    slot_retry_delay_ms: int
    status_update_interval_ms: int
    schema_include_list: Patterns
    schema_exclude_list: Patterns
    message_prefix_include_list: Patterns
    message_prefix_exclude_list: Patterns


class MySqlSettings(SourceSettings):
    database_server_id: int
    database_include_list: Patterns
    database_exclude_list: Patterns
    database_ssl_mode: MySqlSslMode
    database_ssl_truststore: str | None
    database_ssl_truststore_password: SecretStr | None
    database_ssl_keystore: str | None
    database_ssl_keystore_password: SecretStr | None
    connect_timeout_ms: int
    snapshot_mode: MySqlSnapshotMode
    snapshot_locking_mode: MySqlSnapshotLocking
    time_precision_mode: MySqlTimePrecision
    bigint_unsigned_handling_mode: BigintUnsignedMode
    enable_time_adjuster: bool
    include_query: bool
    include_schema_changes: bool
    schema_history_internal_skip_unparseable_ddl: bool
    schema_history_internal_store_only_captured_tables_ddl: bool
    schema_history_internal_store_only_captured_databases_ddl: bool


class MariaDbSettings(MySqlSettings):
    database_ssl_mode: MariaDbSslMode  # type: ignore[assignment]  # MariaDB's connector has its own names
    snapshot_locking_mode: MariaDbSnapshotLocking  # a subset: no Percona modes


class KafkaSinkSettings(_Frozen):
    """`debezium.sink.kafka.*`."""

    client: KafkaClient
    # debezium.sink.kafka.producer.* pass-through; values may be secrets (sasl.jaas.config, ...)
    producer: Mapping[str, str] = Field(alias="producer", repr=False)
    topic_creation_enable: bool
    topic_creation_partitions: int
    topic_creation_replication_factor: int
    flush_timeout_ms: int | None


class DeltaSinkSettings(_Frozen):
    """`debezium.sink.delta.*`."""

    table_path: str | None  # default <warehouse>/<topic.prefix>/changelog
    compact_files: int  # compact the change log after this many added files (0: never)
    storage: Mapping[str, SecretStr]  # delta-rs storage options: every value is treated as a secret


class JsonlSinkSettings(_Frozen):
    path: str | None


class SinkSettings(_Frozen):
    """`debezium.sink.*`: which sinks run, and each one's settings."""

    type: tuple[SinkType, ...]
    kafka: KafkaSinkSettings
    delta: DeltaSinkSettings
    jsonl: JsonlSinkSettings


class FormatSettings(_Frozen):
    """`debezium.format.*`: the JsonConverter's output."""

    key: WireFormat
    value: WireFormat
    key_schemas_enable: bool
    value_schemas_enable: bool


class RuntimeSettings(_Frozen):
    """`tidemark.*`: Tidemark's own settings."""

    warehouse: Path
    commit_max_events: int
    offsets_flush_interval_ms: int
    spark_master: str
    spark_class_cache: bool
    snapshot_chunk_rows: int
    snapshot_read_during_spark_start: bool
    snapshot_mysql_method: MySqlSnapshotMethod
    incremental_snapshot_max_stream_lag_ms: int
    incremental_snapshot_reader: IncrementalReader
    incremental_snapshot_parallelism: int
    airflow_connection_id: str | None
    airflow_snapshot_schedule: str | None
    airflow_snapshot_tables: tuple[str, ...] | None
    # `tidemark.spark.conf.<spark key>` → value, for the snapshot job's SparkSession
    spark_conf: Mapping[str, str] = Field(alias="spark_conf")


SOURCE_SETTINGS: dict[Connector, type[SourceSettings]] = {
    "postgres": PostgresSettings,
    "mysql": MySqlSettings,
    "mariadb": MariaDbSettings,
}


def property_names(model: type[_Frozen]) -> dict[str, str]:
    """Debezium property name → field name, for the fields that are properties."""
    return {f.alias or name: name for name, f in model.model_fields.items() if f.alias not in _DERIVED}


_DERIVED = {"column_rules", "select_overrides", "spark_conf"}


def build_source(connector: Connector, values: Mapping[str, Any], **derived: Any) -> SourceSettings:
    """The typed settings of `connector` from validated, default-filled property values (`None`
    for a property that is unset and has no default; an unset list is empty)."""
    model = SOURCE_SETTINGS[connector]
    data: dict[str, Any] = dict(derived)
    for prop, name in property_names(model).items():
        v = values.get(prop)
        if v is None and _is_tuple(model, name):
            v = ()
        data[prop] = tuple(v) if isinstance(v, list) else v
    return model.model_validate(data)


def _is_tuple(model: type[_Frozen], name: str) -> bool:
    ann = str(model.model_fields[name].annotation)
    return ann.startswith("tuple")
