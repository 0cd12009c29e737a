"""One-line descriptions of every configuration property Tidemark knows.

`DESCRIPTIONS` maps each catalog key (connector properties of every connector, Debezium Server
sink/format keys and Tidemark's own keys) to what it controls from a user's point of view, plus one
entry per parameterised family (keyed by the family's regex pattern string) and per pass-through
prefix. `CONNECTOR_DESCRIPTIONS` overrides a text where the same name means something different
for one connector. The texts say what a key means in Debezium; what Tidemark does with it lives in
the classification tables of the catalog module, so it is not repeated here.

The catalog attaches these to its entries (`Prop.description`); `catalog.describe(name, connector)`
also covers the parameterised families. This module holds only text (the catalog imports it).
"""

from __future__ import annotations

# --------------------------------------------------------------------------- connector properties
_COMMON: dict[str, str] = {
    "name": "Unique name of this connector instance, as shown in logs, metrics and record headers.",
    "connector.class": "Which connector runs: a Debezium connector class name or a short name (postgres, mysql, mariadb).",
    "heartbeat.interval.ms": (
        "How often, in ms, a heartbeat record is sent so offsets keep moving while captured tables are quiet; 0 turns "
        "heartbeats off."
    ),
    "binary.handling.mode": "How binary columns (bytea, BLOB, BINARY, ...) appear in events: bytes, or base64, base64-url-safe or hex text.",
    "column.exclude.list": "Regexes of fully-qualified column names to leave out of change events (the opposite of column.include.list).",
    "column.include.list": "Regexes of fully-qualified column names to keep in change events; every other column is left out.",
    "column.propagate.source.type": (
        "Regexes of fully-qualified columns whose field schemas get the original column type, length and scale as "
        "__debezium.source.column.* parameters."
    ),
    "connection.validation.timeout.ms": "Time limit, in ms, for testing the database connection when the configuration is validated.",
    "converters": "Names of custom value converters; each is set up with <name>.type (a Java class) and <name>.<option> keys.",
    "custom.metric.tags": "Extra k=v tags appended to the connector's JMX metric (MBean) names, e.g. k1=v1,k2=v2.",
    "custom.sanitize.pattern": (
        "Regex of configuration keys whose values are masked when the configuration is shown; replaces the built-in "
        "password/secret pattern."
    ),
    "database.hostname": "Database server to connect to: a host name or IP address.",
    "database.initial.statements": (
        "SQL run on every new query connection (not the log stream): ';' separates statements, ';;' is a literal "
        "semicolon; meant for session settings."
    ),
    "database.password": "Password of the database user.",
    "database.query.timeout.ms": "Time limit, in ms, for each query the connector runs on the database; 0 means no limit.",
    "database.user": "Database user the connector logs in as.",
    "datatype.propagate.source.type": (
        "Regexes of database type names whose columns' field schemas get the original type, length and scale as "
        "parameters."
    ),
    "decimal.handling.mode": "How DECIMAL/NUMERIC values are encoded: precise (Connect Decimal bytes), double, or string.",
    "errors.max.retries": "How many times a retriable error (e.g. a lost connection) is retried before the connector fails: -1 no limit, 0 none.",
    "event.converting.failure.handling.mode": (
        "What happens when a column value does not fit its schema type: fail stops; warn and skip emit null, logged "
        "at warn or debug level."
    ),
    "event.processing.failure.handling.mode": (
        "What happens when an event cannot be processed: fail stops the connector, warn logs and skips it, "
        "skip/ignore drop it quietly."
    ),
    "executor.shutdown.timeout.ms": "How long, in ms, to wait for the connector's internal task executor to stop on shutdown.",
    "extended.headers.enabled": "Whether records carry __debezium.context.* headers naming the connector, task and run that produced them.",
    "field.name.adjustment.mode": (
        "How field names are made safe for the converter: none, avro (invalid characters become _) or avro_unicode "
        "(_uxxxx escapes)."
    ),
    "guardrail.collections.limit.action": "What happens when more tables are captured than guardrail.collections.max allows: warn and go on, or fail.",
    "guardrail.collections.max": "Upper limit on the number of tables the connector may capture; 0 turns the guardrail off.",
    "heartbeat.action.query": "SQL run on the source database at each heartbeat, e.g. an UPDATE that gives a quiet database some changes.",
    "include.schema.comments": "Whether table and column comments are read into the schema metadata (uses more memory).",
    "incremental.snapshot.allow.schema.changes": (
        "Whether an incremental snapshot notices schema changes and re-reads the current chunk rather than holding DDL "
        "back."
    ),
    "incremental.snapshot.chunk.size": "Rows read per chunk by incremental snapshots: larger chunks mean fewer queries but more memory.",
    "incremental.snapshot.watermarking.strategy": (
        "How incremental snapshots mark chunk windows in the signal table: insert_insert (open and close rows) or "
        "insert_delete (close deletes the open row)."
    ),
    "internal.advanced.metrics.enable": "Internal: turns on additional, more detailed streaming metrics.",
    "internal.log.position.check.enable": "Internal: whether the connector checks at start that the stored log position still exists on the server.",
    "internal.snapshot.scan.all.columns.force": "Internal: discover columns by scanning every table, not only captured ones (the behaviour before Debezium 1.5).",
    "legacy.snapshot.max.threads": (
        "Use the old parallel snapshot scheme (one table per thread) instead of splitting tables into chunks shared "
        "by all threads."
    ),
    "max.batch.size": "Largest number of change events handed on together in one batch.",
    "max.queue.size": "Capacity, in events, of the queue between the log reader and the writer; must be larger than max.batch.size.",
    "max.queue.size.in.bytes": "Capacity of that event queue in bytes; 0 means no byte limit (only max.queue.size applies).",
    "memory.management.schemas.class": "Java class (a TableMappingStorage) that keeps the per-table event schemas in memory.",
    "memory.management.tables.class": "Java class (a TableMappingStorage) that keeps the table structure metadata in memory.",
    "message.key.columns": "Custom event keys as '<table regex>:<column>,<column>;...'; tables not listed keep their primary key.",
    "notification.enabled.channels": "Channels that receive notifications about the connector's work (e.g. snapshot progress): log, sink (a Kafka topic), delta (<warehouse>/_state/notifications).",
    "notification.sink.topic.name": "Kafka topic that notifications are written to when the sink channel is enabled (required then).",
    "openlineage.integration.config.file.path": "Path of the OpenLineage client configuration file.",
    "openlineage.integration.dataset.kafka.bootstrap.servers": "Kafka bootstrap servers named as the namespace of the output datasets in OpenLineage events.",
    "openlineage.integration.enabled": "Whether the connector emits OpenLineage events describing its input tables and output topics.",
    "openlineage.integration.job.description": "Job description sent with the OpenLineage events.",
    "openlineage.integration.job.namespace": "Job namespace sent with the OpenLineage events.",
    "openlineage.integration.job.owners": "Job owners sent with the OpenLineage events, as k=v pairs.",
    "openlineage.integration.job.tags": "Job tags sent with the OpenLineage events, as k=v pairs.",
    "poll.interval.ms": "How long, in ms, to wait for new change events after a poll found none.",
    "post.processors": "Names of post processors applied to each event; each is set up with <name>.type (a Java class) and <name>.<option> keys.",
    "provide.transaction.metadata": (
        "Whether BEGIN/END records go to the transaction topic and each event gets a transaction block (id, total "
        "and per-table order)."
    ),
    "query.fetch.size": "Rows fetched per round trip by queries made while streaming; 0 uses the JDBC driver's default.",
    "queue.provider.type": "Which implementation buffers change events between the reader and the writer (memory by default).",
    "read.only": "MySQL/MariaDB: incremental snapshots without writes to the source database (GTID watermarks; signals through the delta, file or kafka channel).",
    "retriable.restart.connector.wait.ms": "How long, in ms, to wait before the connector restarts after a retriable error.",
    "schema.exclude.list": "Regexes of schema names whose tables are not captured.",
    "schema.include.list": "Regexes of schema names whose tables are captured; every other schema is left out.",
    "schema.name.adjustment.mode": (
        "How schema names are made safe for the converter: none, avro (invalid characters become _) or avro_unicode "
        "(_uxxxx escapes)."
    ),
    "signal.data.collection": "Fully-qualified name of the signal table in the source database, through which signals (e.g. ad hoc snapshots) arrive.",
    "signal.enabled.channels": "Channels the connector takes signals from: source (the signal table), delta (<warehouse>/_state/signals), file, kafka.",
    "signal.file": "Path of the file the file signal channel reads (one JSON signal per line; emptied once read).",
    "signal.kafka.bootstrap.servers": "Kafka brokers the kafka signal channel connects to.",
    "signal.kafka.groupId": "Consumer group id of the signal topic's consumer (partition 0 is assigned, not subscribed).",
    "signal.kafka.poll.timeout.ms": "How long, in ms, each poll of the signal topic waits for records.",
    "signal.kafka.topic": "Topic the kafka signal channel reads signals from.",
    "signal.poll.interval.ms": "How often, in ms, the enabled signal channels are checked for new signals.",
    "skip.messages.without.change": (
        "Drop update events in which no included column changed (PostgreSQL needs REPLICA IDENTITY FULL to compare)."
    ),
    "skipped.operations": "Operation codes not emitted while streaming: c (insert), u (update), d (delete), t (truncate), r, or none.",
    "snapshot.delay.ms": "Wait, in ms, after the connector starts before a snapshot begins.",
    "snapshot.fetch.size": "Rows fetched per round trip while a snapshot reads tables.",
    "snapshot.include.collection.list": "Regexes of the tables a snapshot reads; a subset of the captured tables (default: all of them).",
    "snapshot.lock.timeout.ms": "How long, in ms, a snapshot waits for its table locks before it fails.",
    "snapshot.locking.mode.custom.name": "Name of the custom locking implementation (SnapshotterLocking) used when snapshot.locking.mode=custom.",
    "snapshot.max.threads": "Number of threads reading tables in parallel during a snapshot.",
    "snapshot.max.threads.multiplier": (
        "Splits each table into snapshot.max.threads times this many chunks, for finer parallel snapshots of large "
        "tables."
    ),
    "snapshot.mode.configuration.based.snapshot.data": "With snapshot.mode=configuration_based: whether a snapshot reads table data.",
    "snapshot.mode.configuration.based.snapshot.on.data.error": (
        "With snapshot.mode=configuration_based: whether to snapshot data when the stored log position is no longer "
        "available."
    ),
    "snapshot.mode.configuration.based.snapshot.on.schema.error": (
        "With snapshot.mode=configuration_based: whether to snapshot the schema when the schema history is missing or "
        "unusable."
    ),
    "snapshot.mode.configuration.based.snapshot.schema": "With snapshot.mode=configuration_based: whether a snapshot reads table structures.",
    "snapshot.mode.configuration.based.start.stream": "With snapshot.mode=configuration_based: whether changes are streamed after the snapshot.",
    "snapshot.mode.custom.name": "Name of the custom Snapshotter implementation used when snapshot.mode=custom.",
    "snapshot.query.mode": "How snapshot queries are built: select_all (every captured column) or custom (see snapshot.query.mode.custom.name).",
    "snapshot.query.mode.custom.name": "Name of the custom SnapshotterQuery implementation used when snapshot.query.mode=custom.",
    "snapshot.select.statement.overrides": (
        "Tables whose snapshot uses a custom SELECT, each given in its own snapshot.select.statement.overrides.<table> "
        "key."
    ),
    "snapshot.tables.order.by.row.count": "Order in which a snapshot reads tables: disabled (no ordering), or by ascending or descending row count.",
    "statistics.metrics.enabled": "Whether processing statistics (latencies and their quantiles) are collected for the metrics.",
    "streaming.delay.ms": (
        "Wait, in ms, between the end of a snapshot and the start of streaming, so the snapshot's offset is committed "
        "first."
    ),
    "table.exclude.list": "Regexes of fully-qualified table names not to capture.",
    "table.ignore.builtin": "Whether the database's built-in system tables are left out of capture.",
    "table.include.list": "Regexes of fully-qualified table names to capture; every other table is left out.",
    "tombstones.on.delete": (
        "Whether each delete event is followed by a tombstone (a record with a null value) so log compaction can "
        "drop the key."
    ),
    "topic.cache.size": "Number of table-to-topic-name mappings the topic naming strategy keeps cached.",
    "topic.delimiter": "Separator between the parts of topic names (prefix, schema or database, table).",
    "topic.heartbeat.name": (
        "Full heartbeat topic name, replacing <topic.heartbeat.prefix>.<topic.prefix> so several connectors can share "
        "one."
    ),
    "topic.heartbeat.prefix": "Prefix of the heartbeat topic: heartbeats go to <prefix>.<topic.prefix>.",
    "topic.prefix": (
        "Logical name of the captured server: prefix of every topic and namespace of schema names; keep it unique "
        "and never change it."
    ),
    "topic.transaction": "Last part of the transaction metadata topic's name: <topic.prefix>.<topic.transaction>.",
    "transaction.metadata.factory": "Java class that builds the transaction context and the transaction block and records.",
    "unavailable.value.placeholder": "Value that stands in for a column value the database did not supply (e.g. unchanged TOAST data).",
}

_POSTGRES: dict[str, str] = {
    "database.dbname": "Name of the PostgreSQL database to capture.",
    "database.sslcert": "Client certificate file presented to PostgreSQL for TLS client authentication.",
    "database.sslfactory": "JDBC SSL socket factory class (e.g. NonValidatingFactory to skip certificate checks in development).",
    "database.sslkey": "Private key file belonging to the client certificate in database.sslcert.",
    "database.sslmode": (
        "TLS for PostgreSQL connections: disable, allow, prefer, require, verify-ca (check the CA) or verify-full "
        "(CA and host name)."
    ),
    "database.sslpassword": "Password that unlocks the client key in database.sslkey.",
    "database.sslrootcert": "Root CA certificate file(s) the server's certificate is checked against.",
    "database.tcpKeepAlive": "Whether TCP keep-alive probes are sent so that idle connections are not dropped.",
    "flush.lsn.source": (
        "Deprecated (see lsn.flush.mode): whether the connector confirms processed LSNs to the slot (true) or leaves "
        "that to another process."
    ),
    "hstore.handling.mode": "How hstore values are emitted: json (a JSON text) or map (a Connect map of strings).",
    "include.unknown.datatypes": "Whether columns of types without a mapping are emitted as opaque binary values (true) or left out (false).",
    "internal.create.slot.command.timeout": "Internal: seconds to wait for the command that creates the replication slot.",
    "internal.slot.seek.to.known.offset.on.start": (
        "Deprecated (see offset.mismatch.strategy): move the slot to the stored offset's LSN when the connector starts."
    ),
    "interval.handling.mode": "How INTERVAL values are emitted: numeric (approximate microseconds) or string (exact ISO-8601 duration).",
    "lsn.flush.mode": (
        "Who confirms LSNs to the slot: connector, manual (another process), or connector_and_driver (the driver also "
        "confirms keepalive LSNs)."
    ),
    "lsn.flush.timeout.action": "What happens when confirming an LSN takes longer than lsn.flush.timeout.ms: fail, warn, or ignore.",
    "lsn.flush.timeout.ms": "How long, in ms, confirming an LSN to the server may take before lsn.flush.timeout.action applies.",
    "message.prefix.exclude.list": "Regexes of logical decoding message prefixes (pg_logical_emit_message) not to capture.",
    "message.prefix.include.list": "Regexes of logical decoding message prefixes (pg_logical_emit_message) to capture; all by default.",
    "money.fraction.digits": "Number of decimal places given to MONEY values when they are emitted as precise decimals.",
    "offset.mismatch.strategy": (
        "What to do when the stored offset and the slot's confirmed LSN differ: no_validation, trust_offset, "
        "trust_slot or trust_greater_lsn."
    ),
    "plugin.name": "Logical decoding output plug-in the slot uses; pgoutput is built into PostgreSQL 10+ (Debezium also knows decoderbufs).",
    "publication.autocreate.mode": (
        "Whether a missing publication is created: all_tables (FOR ALL TABLES), filtered (captured tables), "
        "no_tables, or disabled (it must exist)."
    ),
    "publication.name": "Name of the pgoutput publication that decides which tables' changes the slot streams.",
    "publish.via.partition.root": "Whether a created publication reports changes of partitions as changes of their partitioned (root) table.",
    "replica.identity.autoset.values": (
        "REPLICA IDENTITY to set on tables at start, as '<table regex>:<DEFAULT|FULL|NOTHING|INDEX name>' entries "
        "separated by commas."
    ),
    "schema.refresh.mode": (
        "When a table's cached schema is refreshed: columns_diff (on any difference) or "
        "columns_diff_exclude_unchanged_toast (ignore unchanged TOAST)."
    ),
    "slot.drop.on.stop": "Whether the replication slot is dropped when the connector stops cleanly (for tests: a later start cannot resume).",
    "slot.failover": "Whether the slot is created as a failover slot that is synchronised to standbys (PostgreSQL 17+ primary).",
    "slot.max.retries": "Attempts to attach to the replication slot (e.g. while another client holds it) before failing.",
    "slot.name": "Name of the logical replication slot that keeps WAL for the connector and records its confirmed position.",
    "slot.retry.delay.ms": "Wait, in ms, between attempts to attach to the replication slot.",
    "slot.stream.params": "Extra options for the logical decoding plug-in, as 'key=value;key=value'.",
    "snapshot.isolation.mode": "Isolation level of the snapshot transaction: serializable, repeatable_read, read_committed or read_uncommitted.",
    "status.update.interval.ms": "How often, in ms, a status update carrying the confirmed LSN is sent to the server on the replication connection.",
    "xmin.fetch.interval.ms": "How often, in ms, the slot's xmin is read and reported in the source block; 0 turns it off.",
}

_MYSQL: dict[str, str] = {
    "bigint.unsigned.handling.mode": "How BIGINT UNSIGNED values are emitted: long (64-bit signed, large values wrap) or precise (Connect Decimal).",
    "binlog.buffer.size": (
        "Size, in events, of a look-ahead buffer that lets the reader drop transactions ending in ROLLBACK; 0 turns "
        "it off."
    ),
    "binlog.net.read.timeout": "Session net_read_timeout, in seconds, set on the binlog connection; 0 keeps the server's value.",
    "binlog.net.write.timeout": "Session net_write_timeout, in seconds, set on the binlog connection; 0 keeps the server's value.",
    "connect.keep.alive": "Whether a background thread watches the binlog connection and reconnects when it drops.",
    "connect.keep.alive.interval.ms": "How often, in ms, the keep-alive thread checks the binlog connection.",
    "connect.timeout.ms": "How long, in ms, to wait for a connection to the database server before giving up.",
    "database.exclude.list": "Regexes of database names not to capture.",
    "database.include.list": "Regexes of database names to capture; every other database is left out.",
    "database.jdbc.driver": "JDBC driver class used for the connector's query connections.",
    "database.protocol": "JDBC URL protocol used with that driver (jdbc:mysql or jdbc:mariadb).",
    "database.server.id": (
        "Numeric server id the connector uses as a replica when reading the binlog; must differ from every other "
        "server and replica."
    ),
    "database.server.id.offset": "Added to database.server.id to give the extra connections of a parallel snapshot server ids of their own.",
    "database.ssl.keystore": "Key store file holding the client certificate and key for TLS client authentication.",
    "database.ssl.keystore.password": "Password of the key store file.",
    "database.ssl.mode": (
        "TLS for the connection, from no encryption to checking the CA and host name (the value names differ between "
        "MySQL and MariaDB)."
    ),
    "database.ssl.truststore": "Trust store file with the CA certificates the server's certificate is checked against.",
    "database.ssl.truststore.password": "Password of the trust store file.",
    "ddl.parser.type": "Which grammar parses DDL statements: default (the maintained MySQL grammar) or legacy (the older one).",
    "enable.time.adjuster": "Whether two-digit YEAR values are mapped to 1970-2069 by the connector (true) or left to the database (false).",
    "event.deserialization.failure.handling.mode": (
        "Deprecated: what to do with a binlog event that cannot be decoded: fail, warn (log and skip), or skip/ignore."
    ),
    "gtid.ignore.on.recovery": "Whether the connector resumes from the stored binlog file and position instead of the GTID set.",
    "gtid.source.excludes": "Regexes of source server UUIDs whose GTID ranges are left out when finding where to resume.",
    "gtid.source.filter.dml.events": (
        "With GTID source filters set, whether row events are emitted only for transactions from the matching servers."
    ),
    "gtid.source.includes": "Regexes of source server UUIDs whose GTID ranges are used when finding where to resume.",
    "include.query": (
        "Whether events carry the SQL statement that made the change (needs binlog_rows_query_log_events or "
        "binlog_annotate_row_events)."
    ),
    "include.schema.changes": "Whether DDL changes are emitted as schema change events to the topic named <topic.prefix>.",
    "inconsistent.schema.handling.mode": (
        "What to do with row events of a table missing from the schema history: fail, warn (log and skip), or skip."
    ),
    "min.row.count.to.stream.results": (
        "Tables with more rows than this are streamed row by row during a snapshot instead of loaded whole; 0 always "
        "streams."
    ),
    "schema.history.internal.name": "Name given to the schema history store (used by its implementation, e.g. in metrics).",
    "schema.history.internal.prefer.ddl": "When recovering the schema history, rebuild tables from the recorded DDL rather than the stored structures.",
    "schema.history.internal.skip.unparseable.ddl": (
        "Whether DDL that cannot be parsed is skipped (its schema change is then missed) instead of stopping the "
        "connector."
    ),
    "schema.history.internal.store.only.captured.databases.ddl": "Whether the schema history keeps only DDL of captured databases instead of all DDL.",
    "schema.history.internal.store.only.captured.tables.ddl": "Whether the schema history keeps only DDL of captured tables instead of all DDL.",
    "use.nongraceful.disconnect": "Whether the keep-alive thread closes a stale binlog connection abruptly (SO_LINGER 0) instead of gracefully.",
}

# Names in both the PostgreSQL and the MySQL list (not in COMMON). Where values or meaning differ, the
# text here covers both and CONNECTOR_DESCRIPTIONS has the specifics.
_SHARED: dict[str, str] = {
    "snapshot.locking.mode": (
        "How a snapshot locks tables while it reads their structure (the values differ between PostgreSQL and "
        "MySQL/MariaDB)."
    ),
    "snapshot.mode": (
        "When the connector snapshots existing data at start: initial, always, initial_only, no_data, when_needed, "
        "configuration_based, custom, ..."
    ),
    "time.precision.mode": (
        "How temporal values are encoded: adaptive (follow column precision), adaptive_time_microseconds, connect, "
        "isostring, microseconds, nanoseconds."
    ),
    "sourceinfo.struct.maker": "Java class that builds the source block of each event.",
    "topic.naming.strategy": "Java class that chooses the topic of each record: data changes, schema changes, transactions, heartbeats.",
    "database.port": "TCP port of the database server (5432 for PostgreSQL, 3306 for MySQL/MariaDB by default).",
}

# --------------------------------------------------------------------------- server and Tidemark keys
_SERVER: dict[str, str] = {
    "debezium.sink.type": "Which sinks receive the records: one or more of kafka, delta, jsonl (comma-separated).",
    "debezium.sink.kafka.client": "Kafka client library used by the kafka sink: confluent (librdkafka) or kafka-python.",
    "debezium.sink.jsonl.path": "File the jsonl sink appends one JSON line per record to, or - for standard output.",
    "debezium.sink.delta.compact.files": (
        "The Delta sink compacts the change log's small files after this many were added (a commit costs "
        "more the more files the table has); 0: never."
    ),
    "debezium.sink.delta.table.path": (
        "Location (local path or object-store URI) of the Delta change-log table; default "
        "<warehouse>/<topic.prefix>/changelog."
    ),
    "debezium.sink.kafka.topic.creation.enable": "Whether the kafka sink creates missing topics with the Kafka admin client.",
    "debezium.sink.kafka.topic.creation.partitions": "Number of partitions of topics the kafka sink creates; -1 uses the broker's default.",
    "debezium.sink.kafka.topic.creation.replication.factor": "Replication factor of topics the kafka sink creates; -1 uses the broker's default.",
    "debezium.sink.kafka.flush.timeout.ms": (
        "Longest wait, in ms, for the delivery reports of a batch sent to Kafka; default delivery.timeout.ms plus 10 s."
    ),
    "debezium.format.key": "Serialization format of record keys (json: the Kafka Connect JsonConverter form).",
    "debezium.format.value": "Serialization format of record values (json: the Kafka Connect JsonConverter form).",
    "debezium.format.key.schemas.enable": "Whether keys are written as JsonConverter {schema, payload} envelopes (true) or as the bare payload.",
    "debezium.format.value.schemas.enable": "Whether values are written as JsonConverter {schema, payload} envelopes (true) or as the bare payload.",
    "tidemark.warehouse": "Directory holding Tidemark's state (stored offsets, MySQL schema history) and, by default, the Delta change logs.",
    "tidemark.commit.max.events": (
        "Most records per sink commit: consecutive full source batches are merged up to this many (bounds memory)."
    ),
    "tidemark.offsets.flush.interval.ms": (
        "Least time, in ms, between saves of the offset table kept for the kafka and jsonl sinks (Delta keeps its own)."
    ),
    "tidemark.spark.master": "Spark master URL the snapshot job runs on: local[*] (every core of this machine) or any cluster master.",
    "tidemark.spark.class.cache": "The snapshot job's driver JVM loads Spark's classes from an archive the first job writes (JDK AppCDS, ~/.cache/tidemark/spark-cds): ~2 s less start a job.",
    "tidemark.snapshot.chunk.rows": (
        "Target rows per snapshot chunk: tables are split into primary-key ranges of about this many rows, each read by "
        "one Spark task and committed (and resumed) on its own; it bounds a task's memory."
    ),
    "tidemark.snapshot.read.during.spark.start": (
        "While Spark's workers start, the snapshot driver reads chunks itself, one at a time, in the same view "
        "(PostgreSQL; MySQL watermarks); false: Spark reads every chunk."
    ),
    "tidemark.incremental.snapshot.max.stream.lag.ms": (
        "Incremental snapshots: no new chunk window opens while the stream is more than this many ms behind the "
        "source (for at most 5 s a chunk); 0: no hold."
    ),
    "tidemark.incremental.snapshot.reader": (
        "Incremental snapshots: thread (a thread of the connector reads one chunk at a time, as Debezium) or spark "
        "(a Spark job reads several at once, each in its own watermark window)."
    ),
    "tidemark.incremental.snapshot.parallelism": (
        "Incremental snapshots with reader=spark: chunks read at once by the Spark job; at most twice this many "
        "chunks are planned ahead of the last one the stream emitted (how far the snapshot may run ahead)."
    ),
    "tidemark.snapshot.mysql.method": (
        "MySQL/MariaDB snapshot consistency: locking (Debezium's consistent view) or watermarks (lock-free, per chunk)."
    ),
    "tidemark.airflow.connection.id": (
        "Airflow: the id of an Airflow Connection (Postgres or MySQL type) whose host, port, login, password and "
        "schema become database.hostname/port/user/password/dbname when the connector runs under Airflow."
    ),
    "tidemark.airflow.snapshot.schedule": (
        "Airflow: a cron expression on which the connector's snapshot DAG runs an incremental snapshot "
        "(of tidemark.airflow.snapshot.tables, default every captured table); unset: triggered by hand only."
    ),
    "tidemark.airflow.snapshot.tables": (
        "Airflow: the tables (names or regular expressions) the scheduled incremental snapshots take; empty = every captured table."
    ),
}

# --------------------------------------------------------------------------- families and prefixes
# Keyed by the family's regex pattern string (`PrefixFamily.pattern.pattern`) or the prefix itself.
_FAMILIES: dict[str, str] = {
    r"column\.mask\.with\.(\d+)\.chars": "Regexes of fully-qualified columns whose text values are replaced by <n> asterisks.",
    r"column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)": (
        "Regexes of columns whose values are replaced by a salted hash (<algorithm>, <salt>), computed the v2 way that "
        "is stable across systems."
    ),
    r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)": (
        "Regexes of fully-qualified columns whose text values are replaced by a hash with the given algorithm (e.g. "
        "SHA-256) and salt."
    ),
    r"column\.truncate\.to\.(\d+)\.chars": "Regexes of fully-qualified columns whose text values are cut to at most <n> characters.",
    r"snapshot\.select\.statement\.overrides\.(.+)": "SELECT statement a snapshot runs for the named table instead of reading all its rows.",
    r"signal\.consumer\..+": "Kafka consumer settings passed to the consumer of the kafka signal channel.",
    r"(?:transforms|predicates)(?:\..+)?": (
        "Kafka Connect single message transforms (SMTs) and their predicates: Java classes that change or filter "
        "records."
    ),
    "debezium.sink.kafka.producer.": (
        "Kafka producer settings passed to the client as they are (bootstrap.servers, acks, compression, security, "
        "...)."
    ),
    "debezium.sink.delta.storage.": "delta-rs storage options for the Delta table's object store (credentials, region, endpoint, ...).",
    "tidemark.spark.conf.": "Spark configuration for the snapshot job: tidemark.spark.conf.spark.executor.memory=4g sets spark.executor.memory.",
}

DESCRIPTIONS: dict[str, str] = {**_COMMON, **_POSTGRES, **_MYSQL, **_SHARED, **_SERVER, **_FAMILIES}
"""Property name, family pattern or server prefix → one-line description."""

_BINLOG = ("mysql", "mariadb")
_BINLOG_SNAPSHOT_MODE = (
    "When to snapshot at start: initial, always, initial_only (then stop), no_data (schema only, then stream), "
    "recovery (rebuild schema history), when_needed, ..."
)

CONNECTOR_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("postgres", "database.port"): "TCP port of the PostgreSQL server (default 5432).",
    ("postgres", "snapshot.mode"): (
        "When to snapshot at start: initial (no offset yet), always, initial_only (then stop), no_data or never "
        "(stream only), when_needed, configuration_based, custom."
    ),
    ("postgres", "snapshot.locking.mode"): (
        "Table locks a snapshot takes while it reads table structures: shared (blocks DDL meanwhile), none, or custom."
    ),
    ("postgres", "time.precision.mode"): (
        "How DATE/TIME/TIMESTAMP are encoded: adaptive (column precision), adaptive_time_microseconds, connect, "
        "isostring, microseconds, nanoseconds."
    ),
    ("postgres", "unavailable.value.placeholder"): (
        "Stands in for unchanged TOAST values the WAL does not carry; a 'hex:' prefix gives the bytes used for binary "
        "columns."
    ),
    ("mysql", "snapshot.locking.mode"): (
        "How long a snapshot holds the global read lock: minimal (schema phase), extended (whole snapshot), none, "
        "custom; minimal_percona* use backup locks."
    ),
    ("mariadb", "snapshot.locking.mode"): (
        "How long a snapshot holds the global read lock: minimal (while reading schemas), extended (whole snapshot), "
        "none, or custom."
    ),
    ("mysql", "database.ssl.mode"): (
        "TLS for the connection: disabled, preferred (TLS when offered), required, verify_ca (check the CA) or "
        "verify_identity (CA and host name)."
    ),
    ("mariadb", "database.ssl.mode"): (
        "TLS for the connection: disable, trust (TLS without certificate checks), verify-ca (check the CA) or "
        "verify-full (CA and host name)."
    ),
    **{(c, "database.port"): "TCP port of the MySQL/MariaDB server (default 3306)." for c in _BINLOG},
    **{(c, "snapshot.mode"): _BINLOG_SNAPSHOT_MODE for c in _BINLOG},
    **{
        (c, "time.precision.mode"): (
            "How DATE/TIME/DATETIME/TIMESTAMP are encoded: adaptive_time_microseconds (default), connect (ms), "
            "isostring, microseconds, nanoseconds."
        )
        for c in _BINLOG
    },
}
"""(connector, name) → description, where the name means something different for that connector."""
