"""Catalog of every configuration property Tidemark knows, per connector.

The connector property lists were taken from Debezium 3.6.3's own `Field` definitions
(`PostgresConnectorConfig`, `MySqlConnectorConfig` and the common/topic/signal/heartbeat
configs they pull in), with the defaults Debezium uses; Tidemark-specific deviations are
marked `# tidemark:`. `connectors.settings.config` validates against this module; nothing here
imports anything heavy.

Types: ``str``, ``int``, ``bool``, ``list`` (comma separated), ``enum`` (one of `choices`,
matched case-insensitively and stored lower-case), ``regex-list`` (comma separated Java
regexes, ``\\,`` escapes a comma; matched case-insensitively against the whole name, as
Debezium does) and ``password`` (a string that is never logged).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from connectors.settings.descriptions import CONNECTOR_DESCRIPTIONS, DESCRIPTIONS
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
    choices,
)

PropType = Literal["str", "int", "bool", "list", "enum", "regex-list", "password"]


@dataclass(frozen=True, slots=True)
class Prop:
    """One known property: name, type, Debezium's default (already typed), for enums the valid
    values, and a one-line description (what it controls; attached per connector from
    `descriptions.py`)."""

    name: str
    type: PropType
    default: Any = None
    choices: tuple[str, ...] = ()
    description: str = ""
    at_least: int | None = None  # an int property's smallest valid value (Debezium's validator)


def P(  # noqa: N802
    name: str,
    type: PropType,
    default: Any = None,
    choices: tuple[str, ...] = (),
    *,
    at_least: int | None = None,
) -> Prop:
    return Prop(name, type, default, choices, at_least=at_least)


# --------------------------------------------------------------------------- connector classes
CONNECTOR_CLASSES: dict[str, Connector] = {
    "io.debezium.connector.postgresql.postgresconnector": "postgres",
    "postgres": "postgres",
    "postgresql": "postgres",
    "io.debezium.connector.mysql.mysqlconnector": "mysql",
    "mysql": "mysql",
    "io.debezium.connector.mariadb.mariadbconnector": "mariadb",
    "mariadb": "mariadb",
}
"""`connector.class` values (lower-cased) → Tidemark connector name."""

# --------------------------------------------------------------------------- snapshot modes
POSTGRES_AVAILABLE_SNAPSHOT_MODES: frozenset[str] = frozenset(
    {"always", "configuration_based", "initial", "initial_only", "never", "no_data", "when_needed"}
)
"""PostgreSQL `snapshot.mode` values this Tidemark release implements (add here as they land)."""

MYSQL_AVAILABLE_SNAPSHOT_MODES: frozenset[str] = frozenset(
    {
        "always",
        "configuration_based",
        "initial",
        "initial_only",
        "never",
        "no_data",
        "recovery",
        "when_needed",
    }
)
"""MySQL/MariaDB `snapshot.mode` values this Tidemark release implements."""

AVAILABLE_SNAPSHOT_MODES: dict[Connector, frozenset[str]] = {
    "postgres": POSTGRES_AVAILABLE_SNAPSHOT_MODES,
    "mysql": MYSQL_AVAILABLE_SNAPSHOT_MODES,
    "mariadb": MYSQL_AVAILABLE_SNAPSHOT_MODES,
}

DEFAULT_SNAPSHOT_MODE: dict[Connector, str] = {
    "postgres": "initial",
    "mysql": "initial",
    "mariadb": "initial",
}
"""Used when `snapshot.mode` is not set, while Debezium's default (`initial`) is not available; a
warning says so. Set to "initial" once initial snapshots land."""

SNAPSHOT_MODE_HINT: dict[Connector, str] = {
    "postgres": "use initial, initial_only, always, when_needed, configuration_based, no_data or never",
    "mysql": "use initial, initial_only, always, when_needed, recovery, configuration_based, no_data or never",
    "mariadb": "use initial, initial_only, always, when_needed, recovery, configuration_based, no_data or never",
}

# --------------------------------------------------------------------------- common properties
COMMON: tuple[Prop, ...] = (
    P("name", "str"),  # tidemark: defaults to topic.prefix
    P("connector.class", "str"),
    P("heartbeat.interval.ms", "int", 0, at_least=0),
    P("binary.handling.mode", "enum", "bytes", choices(BinaryMode)),
    P("column.exclude.list", "regex-list"),
    P("column.include.list", "regex-list"),
    P("column.propagate.source.type", "regex-list"),
    P("connection.validation.timeout.ms", "int", 60000, at_least=1),
    P("converters", "str"),
    P("custom.metric.tags", "list"),
    P(
        "custom.sanitize.pattern",
        "str",
        ".*secret$|.*password$|.*sasl\\.jaas\\.config$|.*basic\\.auth\\.user\\.info|.*registry\\.auth\\.client-secret|.*credentials\\.json$|.*connectionstring$|.*connection\\.string$",
    ),
    P("database.hostname", "str"),
    P("database.initial.statements", "str"),
    P("database.password", "password"),
    P("database.query.timeout.ms", "int", 600000),
    P("database.user", "str"),
    P("datatype.propagate.source.type", "regex-list"),
    P("decimal.handling.mode", "enum", "precise", choices(DecimalMode)),
    P("errors.max.retries", "int", -1),
    P("event.converting.failure.handling.mode", "enum", "warn", ("fail", "skip", "warn")),
    P("event.processing.failure.handling.mode", "enum", "fail", choices(FailureMode)),
    P("executor.shutdown.timeout.ms", "int", 4000, at_least=1),
    P("extended.headers.enabled", "bool", True),  # the __debezium.context.* headers (sinks/__init__.py)
    P("field.name.adjustment.mode", "enum", "none", choices(NameAdjustment)),
    P("guardrail.collections.limit.action", "enum", "warn", ("fail", "warn")),
    P("guardrail.collections.max", "int", 0, at_least=0),
    P("heartbeat.action.query", "str"),
    P("include.schema.comments", "bool", False),
    P("incremental.snapshot.allow.schema.changes", "bool", False),
    P("incremental.snapshot.chunk.size", "int", 1024, at_least=0),
    P(
        "incremental.snapshot.watermarking.strategy",
        "enum",
        "insert_insert",
        ("insert_delete", "insert_insert"),
    ),
    P("internal.advanced.metrics.enable", "bool", False),
    P("internal.log.position.check.enable", "bool", True),
    P("internal.snapshot.scan.all.columns.force", "bool", False),
    P("legacy.snapshot.max.threads", "bool", False),
    P("max.batch.size", "int", 2048, at_least=1),
    P("max.queue.size", "int", 8192, at_least=1),
    P("max.queue.size.in.bytes", "int", 0, at_least=0),
    P("memory.management.schemas.class", "str", "io.debezium.relational.ConcurrentMapTableMappingStorage"),
    P("memory.management.tables.class", "str", "io.debezium.relational.ConcurrentMapTableMappingStorage"),
    P("message.key.columns", "str"),
    P("notification.enabled.channels", "list"),
    P("notification.sink.topic.name", "str"),
    P("openlineage.integration.config.file.path", "str", "./openlineage.yml"),
    P("openlineage.integration.dataset.kafka.bootstrap.servers", "str"),
    P("openlineage.integration.enabled", "bool", False),
    P("openlineage.integration.job.description", "str", "Debezium change data capture job"),
    P("openlineage.integration.job.namespace", "str"),
    P("openlineage.integration.job.owners", "list"),
    P("openlineage.integration.job.tags", "list"),
    P("poll.interval.ms", "int", 500, at_least=1),
    P("post.processors", "str"),
    P("provide.transaction.metadata", "bool", False),
    P("query.fetch.size", "int", 0, at_least=0),
    P("queue.provider.type", "str", "memory"),
    P("read.only", "bool", False),
    P("retriable.restart.connector.wait.ms", "int", 10000, at_least=1),
    P("schema.exclude.list", "regex-list"),
    P("schema.include.list", "regex-list"),
    P("schema.name.adjustment.mode", "enum", "none", choices(NameAdjustment)),
    P("signal.data.collection", "list"),
    P("signal.enabled.channels", "list", ["source"]),
    P("signal.file", "str"),
    P("signal.kafka.bootstrap.servers", "str"),
    P("signal.kafka.groupId", "str", "kafka-signal"),
    P("signal.kafka.poll.timeout.ms", "int", 0, at_least=0),
    P("signal.kafka.topic", "str"),
    P("signal.poll.interval.ms", "int", 5000, at_least=1),
    P("skip.messages.without.change", "bool", False),
    P("skipped.operations", "list", ["t"], choices(Operation)),
    P("snapshot.delay.ms", "int", 0, at_least=0),
    P("snapshot.fetch.size", "int", at_least=0),
    P("snapshot.include.collection.list", "regex-list"),
    P("snapshot.lock.timeout.ms", "int", 10000),
    P("snapshot.locking.mode.custom.name", "str"),
    P("snapshot.max.threads", "int", 1, at_least=1),
    P("snapshot.max.threads.multiplier", "int", 1, at_least=1),
    P("snapshot.mode.configuration.based.snapshot.data", "bool", False),
    P("snapshot.mode.configuration.based.snapshot.on.data.error", "bool", False),
    P("snapshot.mode.configuration.based.snapshot.on.schema.error", "bool", False),
    P("snapshot.mode.configuration.based.snapshot.schema", "bool", False),
    P("snapshot.mode.configuration.based.start.stream", "bool", False),
    P("snapshot.mode.custom.name", "str"),
    P("snapshot.query.mode", "enum", "select_all", choices(SnapshotQueryMode)),
    P("snapshot.query.mode.custom.name", "str"),
    P("snapshot.select.statement.overrides", "str"),
    P("snapshot.tables.order.by.row.count", "enum", "disabled", choices(SnapshotTableOrder)),
    P("statistics.metrics.enabled", "bool", True),
    P("streaming.delay.ms", "int", 0, at_least=0),
    P("table.exclude.list", "regex-list"),
    P("table.ignore.builtin", "bool", True),
    P("table.include.list", "regex-list"),
    P("tombstones.on.delete", "bool", True),
    P("topic.cache.size", "int", 10000),
    P("topic.delimiter", "str", "."),
    P("topic.heartbeat.name", "str"),
    P("topic.heartbeat.prefix", "str", "__debezium-heartbeat"),
    P("topic.prefix", "str"),
    P("topic.transaction", "str", "transaction"),
    P(
        "transaction.metadata.factory",
        "str",
        "io.debezium.pipeline.txmetadata.DefaultTransactionMetadataFactory",
    ),
    P("unavailable.value.placeholder", "str", "__debezium_unavailable_value"),
)

# --------------------------------------------------------------------------- PostgreSQL only
POSTGRES: tuple[Prop, ...] = (
    P("database.dbname", "str"),
    P("database.port", "int", 5432),
    P("database.sslcert", "str"),
    P("database.sslfactory", "str"),
    P("database.sslkey", "str"),
    P(
        "database.sslmode",
        "enum",
        "prefer",
        choices(PgSslMode),
    ),
    P("database.sslpassword", "password"),
    P("database.sslrootcert", "str"),
    P("database.tcpKeepAlive", "bool", True),
    P("flush.lsn.source", "bool", True),
    P("hstore.handling.mode", "enum", "json", choices(HstoreMode)),
    P("include.unknown.datatypes", "bool", False),
    P("internal.create.slot.command.timeout", "int", 90),
    P("internal.slot.seek.to.known.offset.on.start", "bool", False),
    P("interval.handling.mode", "enum", "numeric", choices(IntervalMode)),
    P("lsn.flush.mode", "enum", None, ("connector", "connector_and_driver", "manual")),
    P("lsn.flush.timeout.action", "enum", "fail", ("fail", "ignore", "warn")),
    P("lsn.flush.timeout.ms", "int", 30000, at_least=1),
    P("message.prefix.exclude.list", "regex-list"),
    P("message.prefix.include.list", "regex-list"),
    P("money.fraction.digits", "int", 2),
    P(
        "offset.mismatch.strategy",
        "enum",
        "no_validation",
        ("no_validation", "trust_greater_lsn", "trust_offset", "trust_slot"),
    ),
    P("plugin.name", "enum", "pgoutput", choices(PluginName)),  # tidemark: Debezium lists decoderbufs
    P(
        "publication.autocreate.mode",
        "enum",
        "all_tables",
        choices(PublicationMode),
    ),
    P("publication.name", "str", "dbz_publication"),
    P("publish.via.partition.root", "bool", False),
    P("replica.identity.autoset.values", "str"),
    P(
        "schema.refresh.mode",
        "enum",
        "columns_diff",
        ("columns_diff", "columns_diff_exclude_unchanged_toast"),
    ),
    P("slot.drop.on.stop", "bool", False),
    P("slot.failover", "bool", False),
    P("slot.max.retries", "int", 6),
    P("slot.name", "str", "debezium"),
    P("slot.retry.delay.ms", "int", 10000),
    P("slot.stream.params", "str"),
    P(
        "snapshot.isolation.mode",
        "enum",
        "serializable",
        ("read_committed", "read_uncommitted", "repeatable_read", "serializable"),
    ),
    P("snapshot.locking.mode", "enum", "none", choices(PgSnapshotLocking)),
    P("snapshot.mode", "enum", "initial", choices(PgSnapshotMode)),
    P("sourceinfo.struct.maker", "str", "io.debezium.connector.postgresql.PostgresSourceInfoStructMaker"),
    P("status.update.interval.ms", "int", 10000, at_least=1),
    P("time.precision.mode", "enum", "adaptive", choices(PgTimePrecision)),
    P("topic.naming.strategy", "str", "io.debezium.schema.SchemaTopicNamingStrategy"),
    P("xmin.fetch.interval.ms", "int", 0, at_least=0),
)

# --------------------------------------------------------------------------- MySQL (and MariaDB)
MYSQL: tuple[Prop, ...] = (
    P("bigint.unsigned.handling.mode", "enum", "long", choices(BigintUnsignedMode)),
    P("binlog.buffer.size", "int", 0, at_least=0),
    P("binlog.net.read.timeout", "int", 0, at_least=0),
    P("binlog.net.write.timeout", "int", 0, at_least=0),
    P("connect.keep.alive", "bool", True),
    P("connect.keep.alive.interval.ms", "int", 60000, at_least=1),
    P("connect.timeout.ms", "int", 30000, at_least=1),
    P("database.exclude.list", "regex-list"),
    P("database.include.list", "regex-list"),
    P("database.jdbc.driver", "str", "com.mysql.cj.jdbc.Driver"),
    P("database.port", "int", 3306),
    P("database.protocol", "str", "jdbc:mysql"),
    P("database.server.id", "int", at_least=1),  # Debezium picks a random id in 5400..6399 when unset
    P("database.server.id.offset", "int", 10000),
    P("database.ssl.keystore", "str"),
    P("database.ssl.keystore.password", "password"),
    P("database.ssl.mode", "enum", "preferred", choices(MySqlSslMode)),
    P("database.ssl.truststore", "str"),
    P("database.ssl.truststore.password", "password"),
    P("ddl.parser.type", "enum", "default", ("default", "legacy")),
    P("enable.time.adjuster", "bool", True),
    P("event.deserialization.failure.handling.mode", "enum", "fail", ("fail", "ignore", "skip", "warn")),
    P("gtid.ignore.on.recovery", "bool", False),
    P("gtid.source.excludes", "regex-list"),
    P("gtid.source.filter.dml.events", "bool", True),
    P("gtid.source.includes", "regex-list"),
    P("include.query", "bool", False),
    P("include.schema.changes", "bool", True),
    P("inconsistent.schema.handling.mode", "enum", "fail", ("fail", "ignore", "skip", "warn")),
    P("min.row.count.to.stream.results", "int", 1000, at_least=0),
    P("schema.history.internal.name", "str"),
    P("schema.history.internal.prefer.ddl", "bool", False),
    P("schema.history.internal.skip.unparseable.ddl", "bool", False),
    P("schema.history.internal.store.only.captured.databases.ddl", "bool", False),
    P("schema.history.internal.store.only.captured.tables.ddl", "bool", False),
    P(
        "snapshot.locking.mode",
        "enum",
        "minimal",
        choices(MySqlSnapshotLocking),
    ),
    P("snapshot.mode", "enum", "initial", choices(MySqlSnapshotMode)),
    P("sourceinfo.struct.maker", "str", "io.debezium.connector.mysql.MySqlSourceInfoStructMaker"),
    # `adaptive` is a value of Debezium's enum that its binlog connectors refuse (validate.py says why)
    P(
        "time.precision.mode",
        "enum",
        "adaptive_time_microseconds",
        choices(MySqlTimePrecision) + ("adaptive",),
    ),
    P("topic.naming.strategy", "str", "io.debezium.schema.DefaultTopicNamingStrategy"),
    P("use.nongraceful.disconnect", "bool", False),
)

# MariaDB: Debezium's MariaDbConnectorConfig differs from MySQL's in these properties only.
MARIADB_OVERRIDES: tuple[Prop, ...] = (
    P("database.jdbc.driver", "str", "org.mariadb.jdbc.Driver"),
    P("database.protocol", "str", "jdbc:mariadb"),
    P("database.ssl.mode", "enum", "disable", choices(MariaDbSslMode)),
    P("snapshot.locking.mode", "enum", "minimal", choices(MariaDbSnapshotLocking)),
    P("sourceinfo.struct.maker", "str", "io.debezium.connector.mariadb.MariaDbSourceInfoStructMaker"),
)


def _describe(name: str, connector: Connector | None) -> str:
    override = CONNECTOR_DESCRIPTIONS.get((connector, name)) if connector else None
    return override if override is not None else DESCRIPTIONS.get(name, "")


def _catalog(connector: Connector, *groups: tuple[Prop, ...]) -> dict[str, Prop]:
    out: dict[str, Prop] = {}
    for group in groups:
        for prop in group:
            out[prop.name] = dataclasses.replace(prop, description=_describe(prop.name, connector))
    return out


CATALOG: dict[Connector, dict[str, Prop]] = {
    "postgres": _catalog("postgres", COMMON, POSTGRES),
    "mysql": _catalog("mysql", COMMON, MYSQL),
    "mariadb": _catalog("mariadb", COMMON, MYSQL, MARIADB_OVERRIDES),
}
"""Connector property name → Prop, per connector (current names only)."""

REQUIRED: dict[Connector, tuple[str, ...]] = {
    "postgres": ("database.hostname", "database.user", "database.dbname", "topic.prefix"),
    "mysql": ("database.hostname", "database.user", "topic.prefix"),
    "mariadb": ("database.hostname", "database.user", "topic.prefix"),
}
"""Connector properties without which nothing can start (`connector.class` is checked first)."""

# --------------------------------------------------------------------------- legacy names
_FILTER_ALIASES = {
    f"{family}.{old}": f"{family}.{new}"
    for family in ("schema", "table", "column", "database")
    for old, new in (("whitelist", "include.list"), ("blacklist", "exclude.list"))
}
ALIASES: dict[str, str] = {
    "database.server.name": "topic.prefix",
    "toasted.value.placeholder": "unavailable.value.placeholder",
    "heartbeat.topics.prefix": "topic.heartbeat.prefix",
    **_FILTER_ALIASES,
}
"""Deprecated property name → current name. Normalised on load with one warning per alias."""

VALUE_ALIASES: dict[Connector, dict[str, dict[str, str]]] = {
    "postgres": {"snapshot.mode": {"schema_only": "no_data", "exported": "initial"}},
    "mysql": {"snapshot.mode": {"schema_only": "no_data", "schema_only_recovery": "recovery"}},
    "mariadb": {"snapshot.mode": {"schema_only": "no_data", "schema_only_recovery": "recovery"}},
}
"""Deprecated enum values → current value, per connector and property (each connector had its own)."""

INCLUDE_EXCLUDE_PAIRS: tuple[tuple[str, str], ...] = (
    ("database.include.list", "database.exclude.list"),
    ("schema.include.list", "schema.exclude.list"),
    ("table.include.list", "table.exclude.list"),
    ("column.include.list", "column.exclude.list"),
    ("message.prefix.include.list", "message.prefix.exclude.list"),
    ("gtid.source.includes", "gtid.source.excludes"),
)
"""Filter pairs of which Debezium refuses to have both set."""

UNSUPPORTED_PLUGINS: frozenset[str] = frozenset(
    {"decoderbufs", "wal2json", "wal2json_rds", "wal2json_streaming", "wal2json_rds_streaming"}
)

HASH_ALGORITHMS: dict[str, str] = {
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA1": "sha1",
    "SHA-224": "sha224",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
    "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256",
    "SHA3-224": "sha3_224",
    "SHA3-256": "sha3_256",
    "SHA3-384": "sha3_384",
    "SHA3-512": "sha3_512",
}
"""Java MessageDigest names accepted in `column.mask.hash.<alg>...` → hashlib names (upper-case
keys; matched case-insensitively). Java's MD2 is left out: Python's hashlib has no MD2."""

# --------------------------------------------------------------------------- prefix families
PrefixKind = Literal["mask", "hash", "hash_v2", "truncate", "select_override", "passthrough", "unsupported"]


@dataclass(frozen=True, slots=True)
class PrefixFamily:
    """Keys matching `pattern` (fullmatch) are known; their value has type `type`."""

    pattern: re.Pattern[str]
    type: PropType
    kind: PrefixKind
    connectors: frozenset[str] = frozenset({"postgres", "mysql", "mariadb"})


PREFIX_FAMILIES: tuple[PrefixFamily, ...] = (
    PrefixFamily(re.compile(r"column\.mask\.with\.(\d+)\.chars"), "regex-list", "mask"),
    PrefixFamily(re.compile(r"column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)"), "regex-list", "hash_v2"),
    PrefixFamily(re.compile(r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)"), "regex-list", "hash"),
    PrefixFamily(re.compile(r"column\.truncate\.to\.(\d+)\.chars"), "regex-list", "truncate"),
    PrefixFamily(re.compile(r"snapshot\.select\.statement\.overrides\.(.+)"), "str", "select_override"),
    PrefixFamily(re.compile(r"signal\.consumer\..+"), "str", "passthrough"),
    # Kafka Connect SMTs: Java classes that change the records; refused (see config._support).
    PrefixFamily(re.compile(r"(?:transforms|predicates)(?:\..+)?"), "str", "unsupported"),
)
"""Connector-property families whose names carry parameters."""

# --------------------------------------------------------------------------- ignored keys
IGNORED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"offset\.storage(\..+)?|offset\.flush\..+"), "Tidemark keeps offsets in Delta"),
    (
        re.compile(
            r"schema\.history\.internal(\.(kafka|file|producer|consumer|jdbc|redis|s3|azure|rocketmq)\..+)?"
            r"|database\.history(\..+)?"
        ),
        "Tidemark keeps schema history in Delta",
    ),
    (
        re.compile(r"(key|value|header)\.converter(\..+)?"),
        "the Kafka Connect JSON format is built in (use debezium.format.*.schemas.enable)",
    ),
    (re.compile(r"quarkus\..+|debezium\.(api|server)\..+"), "Debezium Server runtime settings do not apply"),
    (re.compile(r"tasks\.max"), "there is always exactly one task"),
    (re.compile(r"errors\.(?!max\.retries$).+"), "Kafka Connect error handling does not apply"),
    (
        re.compile(
            r"topic\.creation\..+|config\.(action\.reload|providers)(\..+)?"
            r"|connector\.client\.config\.override\.policy"
        ),
        "Kafka Connect worker settings do not apply",
    ),
    (
        re.compile(r"driver\..+"),
        "JDBC driver settings do not apply (Tidemark connects with psycopg2 / PyMySQL)",
    ),
    (
        re.compile(r"sanitize\.field\.names"),
        "removed in Debezium 2.0; use schema.name.adjustment.mode / field.name.adjustment.mode",
    ),
    (re.compile(r"truncate\.handling\.mode"), "removed in Debezium 2.0; use skipped.operations"),
)
"""Connector-level keys Debezium/Kafka Connect know but Tidemark has no use for → reason."""

# --------------------------------------------------------------------------- support of catalog keys
# Every catalog key is either read by the connectors, or listed in exactly one of the three tables
# below (tests/test_config.py checks this against the source tree).
_JDBC = "JDBC driver settings do not apply (Tidemark connects with psycopg2 / PyMySQL)"
_JAVA = "settings of Debezium's Java runtime (executors, caches, sockets) that Tidemark does not have"
_JMX = "JMX metrics settings; Tidemark serves Prometheus metrics with tidemark run --metrics-port"
_NO_QUEUE = (
    "Tidemark has no change-event queue: a batch is read, written to every sink and "
    "confirmed before the next is read"
)
_HISTORY = "Tidemark keeps schema history in Delta"
_ONLY_WITH = "applies only with {}, which Tidemark does not support yet"

NO_EFFECT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"max\.queue\.size(\.in\.bytes)?|queue\.provider\.type"), _NO_QUEUE),
    (
        re.compile(r"database\.(jdbc\.driver|protocol|sslfactory|query\.timeout\.ms)|query\.fetch\.size"),
        _JDBC,
    ),
    (
        re.compile(
            r"executor\.shutdown\.timeout\.ms|memory\.management\.(schemas|tables)\.class"
            r"|topic\.cache\.size|use\.nongraceful\.disconnect|internal\.create\.slot\.command\.timeout"
        ),
        _JAVA,
    ),
    (
        re.compile(r"custom\.metric\.tags|statistics\.metrics\.enabled|internal\.advanced\.metrics\.enable"),
        _JMX,
    ),
    (
        re.compile(r"connection\.validation\.timeout\.ms"),
        "Kafka Connect's configuration validation does not apply",
    ),
    (
        re.compile(r"retriable\.restart\.connector\.wait\.ms|connect\.keep\.alive(\.interval\.ms)?"),
        "Tidemark reconnects by itself with capped backoff (errors.max.retries bounds the attempts)",
    ),
    (
        re.compile(r"internal\.log\.position\.check\.enable"),
        "Tidemark always checks at start that the stored position is still on the server",
    ),
    (
        re.compile(r"lsn\.flush\.timeout\.(ms|action)"),
        "Tidemark confirms the LSN in the replication stream's status updates and never waits for it",
    ),
    (
        re.compile(r"streaming\.delay\.ms"),
        "Tidemark starts streaming at once (there is no snapshot to wait for)",
    ),
    (re.compile(r"ddl\.parser\.type"), "Tidemark parses DDL with its own parser (sqlglot)"),
    (
        re.compile(r"snapshot\.max\.threads\.multiplier"),
        "Tidemark sizes snapshot chunks by rows (tidemark.snapshot.chunk.rows), not per thread",
    ),
    (re.compile(r"schema\.history\.internal\.(name|prefer\.ddl)"), _HISTORY),
    (
        re.compile(r"database\.server\.id\.offset"),
        "used only by Debezium's legacy parallel snapshot connections",
    ),
    (re.compile(r"gtid\.source\.filter\.dml\.events"), _ONLY_WITH.format("gtid.source.includes/excludes")),
    (re.compile(r"guardrail\.collections\.limit\.action"), _ONLY_WITH.format("guardrail.collections.max")),
    (
        re.compile(r"openlineage\.integration\.(?!enabled$).+"),
        _ONLY_WITH.format("openlineage.integration.enabled"),
    ),
)
"""Catalog keys whose value cannot change what Tidemark does → the reason. Their values are still
type-checked; setting one gives the single "ignoring properties" warning."""


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A catalog key of which Tidemark implements only the default: `missing` says what a
    non-default value would ask for."""

    missing: str
    accepted: tuple[Any, ...] = ()  # values accepted besides the catalog default


_JAVA_CLASS = "a custom Java class (only Debezium's default is built in)"
DEFAULT_ONLY: dict[str, Unsupported] = {
    # Cheap to implement (candidates for the connectors' owners).
    "binlog.net.read.timeout": Unsupported("net_read_timeout for the binlog connection"),
    "binlog.net.write.timeout": Unsupported("net_write_timeout for the binlog connection"),
    "slot.failover": Unsupported("failover replication slots (PostgreSQL 17)"),
    "guardrail.collections.max": Unsupported("a limit on the number of captured tables"),
    "replica.identity.autoset.values": Unsupported("setting REPLICA IDENTITY of captured tables at start"),
    "xmin.fetch.interval.ms": Unsupported("the xmin field in the source block"),
    "flush.lsn.source": Unsupported("leaving the slot's confirmed LSN to another process"),
    "lsn.flush.mode": Unsupported("leaving the slot's confirmed LSN to another process", ("connector",)),
    "include.schema.comments": Unsupported("column comments in the schemas"),
    "topic.heartbeat.name": Unsupported("a fixed heartbeat topic name (use topic.heartbeat.prefix)"),
    # Behaviour Tidemark does not have.
    "event.converting.failure.handling.mode": Unsupported("other handling of values that fail to convert"),
    "event.deserialization.failure.handling.mode": Unsupported(
        "skipping or logging binlog events that fail to decode"
    ),
    "inconsistent.schema.handling.mode": Unsupported(
        "skipping or logging rows of tables with an unknown schema"
    ),
    "binlog.buffer.size": Unsupported("a look-ahead buffer for binlog transactions that end in ROLLBACK"),
    "gtid.source.includes": Unsupported("filtering binlog events by GTID source"),
    "gtid.source.excludes": Unsupported("filtering binlog events by GTID source"),
    "gtid.ignore.on.recovery": Unsupported(
        "starting although the server purged GTIDs the stored offset needs"
    ),
    "offset.mismatch.strategy": Unsupported("reconciling the stored offset with the slot's position"),
    "internal.slot.seek.to.known.offset.on.start": Unsupported(
        "moving the slot to the stored offset at start"
    ),
    "schema.refresh.mode": Unsupported("columns_diff_exclude_unchanged_toast schema refreshes"),
    "slot.stream.params": Unsupported("extra logical decoding plug-in parameters"),
    "openlineage.integration.enabled": Unsupported("OpenLineage events"),
    "post.processors": Unsupported(f"post processors, {_JAVA_CLASS}"),
    "topic.naming.strategy": Unsupported(f"another topic naming strategy, {_JAVA_CLASS}"),
    "sourceinfo.struct.maker": Unsupported(f"another source block, {_JAVA_CLASS}"),
    "transaction.metadata.factory": Unsupported(f"another transaction metadata factory, {_JAVA_CLASS}"),
}
"""Catalog keys of which only the default (or unset) is accepted; any other value is refused with
"not supported yet"."""

NOT_YET: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(incremental\.|internal\.)?snapshot\.(?!mode$).+|legacy\.snapshot\.max\.threads"
            r"|min\.row\.count\.to\.stream\.results|read\.only"
        ),
        "Tidemark's snapshots do not act on them yet",
    ),
    (re.compile(r"signal\..+"), "Tidemark's signals do not act on them yet"),
    (re.compile(r"notification\..+"), "Tidemark's notifications do not act on them yet"),
)
"""Snapshot, signal and notification keys (catalog keys and prefix families): accepted and
type-checked, with one warning that they are not used yet (unless IMPLEMENTED says otherwise)."""

_SNAPSHOT_KEYS = re.compile(
    r"snapshot\.(include\.collection\.list|select\.statement\.overrides(\..+)?|fetch\.size|max\.threads"
    r"|tables\.order\.by\.row\.count|delay\.ms|lock\.timeout\.ms|locking\.mode"
    r"|query\.mode|mode\.configuration\.based\..+)"
)
# Signals and notifications (connectors/signals/): every key, and signal.consumer.* (the kafka
# signal channel's consumer settings).
_SIGNAL_KEYS = r"|signal\..+|notification\.(enabled\.channels|sink\.topic\.name)"
# Incremental snapshots (connectors/snapshot/incremental*.py); allow.schema.changes is a MySQL
# property in Debezium (the binlog's DDL says when a chunk must be read again).
_INCREMENTAL_KEYS = r"|incremental\.snapshot\.(chunk\.size|watermarking\.strategy)"
_MYSQL_ONLY = r"|read\.only|incremental\.snapshot\.allow\.schema\.changes"
IMPLEMENTED: dict[Connector, re.Pattern[str]] = {
    "postgres": re.compile(_SNAPSHOT_KEYS.pattern + _SIGNAL_KEYS + _INCREMENTAL_KEYS),
    # read.only: read-only incremental snapshots with GTID watermarks (snapshot/incremental_gtid.py)
    "mysql": re.compile(_SNAPSHOT_KEYS.pattern + _SIGNAL_KEYS + _INCREMENTAL_KEYS + _MYSQL_ONLY),
    "mariadb": re.compile(_SNAPSHOT_KEYS.pattern + _SIGNAL_KEYS + _INCREMENTAL_KEYS + _MYSQL_ONLY),
}
"""Keys NOT_YET matches that a connector already acts on (its snapshot settings, signals and
notifications)."""


def not_yet_reason(name: str, connector: Connector) -> str | None:
    """Why `name` has no effect yet for `connector` (None: it has, or it is not a future feature)."""
    if IMPLEMENTED[connector].fullmatch(name):
        return None
    return next((reason for pattern, reason in NOT_YET if pattern.fullmatch(name)), None)


SINK_IGNORED: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"debezium\.sink\.kafka\.producer\.(key|value)\.serializer"),
        "Tidemark produces the JSON bytes itself",
    ),
)

SUPPORTED_CONVERTER_TYPES: frozenset[str] = frozenset()
"""Custom converter classes (`converters=<n>`, `<n>.type=...`) Tidemark implements. Others are
accepted with a warning and ignored (they are Java classes)."""

# --------------------------------------------------------------------------- sink / format / tidemark
SINK_TYPES: tuple[str, ...] = get_args(SinkType)  # in this order in messages

SERVER_PROPERTIES: dict[str, Prop] = {
    p.name: dataclasses.replace(p, description=_describe(p.name, None))
    for p in (
        P("debezium.sink.type", "list", None, SINK_TYPES),
        P("debezium.sink.kafka.client", "enum", "confluent", choices(KafkaClient)),
        P("debezium.sink.jsonl.path", "str"),
        P("debezium.sink.delta.table.path", "str"),  # default <warehouse>/<topic.prefix>/changelog
        # The change log is compacted after this many added files (0: never; commits slow down
        # with the table's file count).
        P("debezium.sink.delta.compact.files", "int", 200, at_least=0),
        P("debezium.sink.kafka.topic.creation.enable", "bool", True),
        P("debezium.sink.kafka.topic.creation.partitions", "int", -1),
        P("debezium.sink.kafka.topic.creation.replication.factor", "int", -1),
        P("debezium.sink.kafka.flush.timeout.ms", "int", at_least=0),
        P("debezium.format.key", "enum", "json", choices(WireFormat)),
        P("debezium.format.value", "enum", "json", choices(WireFormat)),
        P("debezium.format.key.schemas.enable", "bool", True),
        P("debezium.format.value.schemas.enable", "bool", True),
        P("tidemark.warehouse", "str", "./warehouse"),
        # Records per sink commit: consecutive full source batches are merged up to this size.
        P("tidemark.commit.max.events", "int", 4096, at_least=1),
        # Offset-table saves (for Kafka/jsonl) at most this often; the source is acknowledged after.
        P("tidemark.offsets.flush.interval.ms", "int", 1000, at_least=0),
        # Snapshots: the Spark master the snapshot job runs on, and rows per primary-key chunk.
        P("tidemark.spark.master", "str", "local[*]"),
        # The driver JVM loads Spark's classes from an archive the first job writes (JDK AppCDS).
        P("tidemark.spark.class.cache", "bool", True),
        P("tidemark.snapshot.chunk.rows", "int", 100000, at_least=1),
        # Until Spark's workers are up, the driver reads chunks itself (spark_jobs/chunk_lanes.py).
        P("tidemark.snapshot.read.during.spark.start", "bool", True),
        # MySQL/MariaDB: Debezium's lock-based consistent read, or lock-free per-chunk watermarks.
        P("tidemark.snapshot.mysql.method", "enum", "locking", choices(MySqlSnapshotMethod)),
        # Incremental snapshots: no new chunk while the stream lags more than this (the stream first).
        P("tidemark.incremental.snapshot.max.stream.lag.ms", "int", 1000, at_least=0),
        # Who reads the chunks: a thread of the connector, one at a time, or the Spark job, in parallel.
        P("tidemark.incremental.snapshot.reader", "enum", "thread", choices(IncrementalReader)),
        P("tidemark.incremental.snapshot.parallelism", "int", 4, at_least=1),
        # Airflow (dags/, plugins/): where the database connection comes from, scheduled snapshots.
        P("tidemark.airflow.connection.id", "str"),
        P("tidemark.airflow.snapshot.schedule", "str"),
        P("tidemark.airflow.snapshot.tables", "list"),
    )
}
"""Debezium Server sink/format keys and Tidemark's own keys (full names)."""

SERVER_PREFIXES: tuple[tuple[str, PropType], ...] = (
    ("debezium.sink.kafka.producer.", "str"),
    ("debezium.sink.delta.storage.", "str"),  # delta-rs storage options; values are secrets
    ("tidemark.spark.conf.", "str"),  # Spark configuration for the snapshot job (spark.* keys)
)
"""Families of full keys accepted as pass-through strings (any Kafka producer setting, any
delta-rs storage option)."""

HINTS: dict[str, str] = {
    "tidemark.batch.max.events": "tidemark.commit.max.events",
    "tidemark.batch.size": "tidemark.commit.max.events",
    "debezium.sink.kafka.bootstrap.servers": "debezium.sink.kafka.producer.bootstrap.servers",
}
"""Unknown keys with a known better name that difflib would not find."""

SANITIZE_PATTERN = re.compile(
    r".*password$|.*secret$|.*sasl\.jaas\.config$|.*basic\.auth\.user\.info.*|.*ssl.*key.*password.*"
    r"|.*registry\.auth\.client-secret$|.*credentials\.json$|.*connectionstring$|.*connection\.string$"
    r"|debezium\.sink\.delta\.storage\..+|(debezium\.source\.)?database\.initial\.statements",
    re.IGNORECASE,
)
"""Keys whose values are secrets (Debezium's custom.sanitize.pattern default, plus SSL key passwords,
every delta-rs storage option: access keys, SAS tokens and service-account JSON hide under
many names, so all of them are masked, and database.initial.statements, which may set secrets)."""


def describe(name: str, connector: Connector) -> str:
    """The description of `name` as a property of `connector`: a catalog or server key, a
    parameterised family (`column.mask.with.8.chars`) or a pass-through prefix. KeyError for a
    name the catalog does not know for that connector."""
    prop = CATALOG[connector].get(name) or SERVER_PROPERTIES.get(name)
    if prop is not None:
        return prop.description
    for family in PREFIX_FAMILIES:
        if connector in family.connectors and family.pattern.fullmatch(name):
            return DESCRIPTIONS[family.pattern.pattern]
    for prefix, _type in SERVER_PREFIXES:
        if name.startswith(prefix):
            return DESCRIPTIONS[prefix]
    raise KeyError(f"no {connector} property named {name!r}")
