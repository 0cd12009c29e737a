"""Delta change-log sink (delta-rs, never Spark): one table per connector, one commit per batch.

Table: `<warehouse>/<topic.prefix>/changelog`, partitioned by `collection` (the captured table).
Records without a collection (transaction metadata, heartbeats, logical-decoding messages) go
to the partition `__meta` — kept, not skipped, so the table holds exactly the Kafka stream and
`(batch_seq, event_index)` gives its order.

Exactly-once: each commit carries a Delta app transaction `(connector name, batch.seq)` and, in
its commit metadata, the batch's source offset. After a crash `last_offset()` answers the last
committed `(seq, offset)`; a batch whose seq is not above the stored one is skipped.

Columns (stable for every connector: PostgreSQL and MySQL position columns are all nullable):
  topic, collection, op, key (key payload JSON), before, after, source, transaction (JSON),
  source_ts_ms, ts_ms, ts_us, ts_ns, lsn, tx_id, binlog_file, binlog_pos, gtid, row (typed
  positions), headers (JSON `[{"key": k, "value": base64}]` or null), batch_seq, event_index,
  payload (the value payload JSON of records that are not change envelopes: transaction
  metadata, heartbeats, logical messages, schema changes; null for change events, whose payload
  is exactly the columns above), key_schema / value_schema (the Connect schema JSON the
  JsonConverter embeds when `debezium.format.*.schemas.enable` is on, else null), is_tombstone.
`kafka_key(row)` / `kafka_value(row)` rebuild the exact Kafka key and value bytes from a row.

Why not one column with the Kafka value bytes: with schemas on, ~3 KB of every ~3.5 KB value is
the table's schema text, identical for every row of a table version. Here it is an Arrow
dictionary column (one copy per batch; Parquet dictionary-encodes it), and the payload is not
serialized a second time next to its before/after/source columns.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from connectors.api import Batch, Record, TerminalError, TransientError
from connectors.settings.config import ConnectorConfig
from connectors.sinks.common import schema_flags
from connectors.state.storage import storage_error

log = logging.getLogger(__name__)

# A commit costs time in proportion to the table's live files (delta-rs, measured: 0.35 s at 2,400
# small files, 0.08 s after compaction), and a stream adds a file per table per commit; so the sink
# compacts once `compact_files` files were added. Files of COMPACT_TARGET_BYTES or more are left
# alone: a compaction rewrites at most about that much per table, not the whole history.
COMPACT_TARGET_BYTES = 32 << 20

META_PARTITION = "__meta"
OFFSET_KEY = "tidemark.offset"
SEQ_KEY = "tidemark.batch_seq"
APP_KEY = "tidemark.app_id"

_S, _I64, _I32 = pa.string(), pa.int64(), pa.int32()
SCHEMA = pa.schema(
    [
        pa.field("topic", _S, nullable=False),
        pa.field("collection", _S, nullable=False),
        pa.field("op", _S),
        pa.field("key", _S),
        pa.field("before", _S),
        pa.field("after", _S),
        pa.field("source", _S),
        pa.field("transaction", _S),
        pa.field("source_ts_ms", _I64),
        pa.field("ts_ms", _I64),
        pa.field("ts_us", _I64),
        pa.field("ts_ns", _I64),
        pa.field("lsn", _I64),
        pa.field("tx_id", _I64),
        pa.field("binlog_file", _S),
        pa.field("binlog_pos", _I64),
        pa.field("gtid", _S),
        pa.field("row", _I32),
        pa.field("headers", _S),
        pa.field("batch_seq", _I64, nullable=False),
        pa.field("event_index", _I32, nullable=False),
        pa.field("payload", _S),
        pa.field("key_schema", _S),
        pa.field("value_schema", _S),
        pa.field("is_tombstone", pa.bool_(), nullable=False),
    ]
)
_JSON_COLS = ("key", "before", "after", "source", "transaction", "headers", "payload")

# A change event's payload, field by field, in the order `envelope.change_value` builds it: such
# a payload is stored in its columns and spliced back together byte for byte by `kafka_value`.
ENVELOPE_FIELDS = ("before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns")


def writer_properties() -> Any:
    """zstd level 1: a third of snappy's size at the same speed (measured, 1000-row commits).
    JSON columns are unique long strings: no dictionary, no min/max statistics."""
    from deltalake import ColumnProperties, WriterProperties

    plain = ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE")
    return WriterProperties(
        compression="ZSTD", compression_level=1, column_properties={c: plain for c in _JSON_COLS}
    )


def _headers_json(headers: tuple[tuple[str, bytes], ...]) -> bytes | None:
    if not headers:
        return None
    return orjson.dumps([{"key": k, "value": base64.b64encode(v).decode()} for k, v in headers])


# Per record one flat tuple, then zip(*rows) into columns: far fewer bytecodes than one
# list.append per column. Order: the _ROW_COLS names.
_ROW_COLS = (
    "topic",
    "collection",
    "key",
    "headers",
    "is_tombstone",
    "op",
    "before",
    "after",
    "transaction",
    "payload",
    "source",
    "source_ts_ms",
    "ts_ms",
    "ts_us",
    "ts_ns",
    "lsn",
    "tx_id",
    "binlog_file",
    "binlog_pos",
    "gtid",
    "row",
)
_NO_VALUE = (None,) * 16
_NO_SOURCE = (None,) * 6


def _row(r: Record, dumps: Any = orjson.dumps, fields: tuple[str, ...] = ENVELOPE_FIELDS) -> tuple[Any, ...]:
    k, v = r.key, r.value
    kj = None if k is None else dumps(k)
    hj = _headers_json(r.headers) if r.headers else None
    if type(v) is not dict:
        return (r.topic, r.collection or META_PARTITION, kj, hj, v is None) + _NO_VALUE
    if tuple(v) == fields:  # a change event: its payload is exactly its columns
        b, a, s, t, op, ms, us, ns = v.values()
        pj = None
    else:
        b, a, t, s, op, ms, us, ns = (
            v.get("before"),
            v.get("after"),
            v.get("transaction"),
            v.get("source"),
            v.get("op"),
            v.get("ts_ms"),
            v.get("ts_us"),
            v.get("ts_ns"),
        )
        pj = dumps(v)
    if type(s) is dict:
        g = s.get
        return (
            r.topic,
            r.collection or META_PARTITION,
            kj,
            hj,
            False,
            op,
            None if b is None else dumps(b),
            None if a is None else dumps(a),
            None if t is None else dumps(t),
            pj,
            dumps(s),
            g("ts_ms"),
            ms,
            us,
            ns,
            g("lsn"),
            g("txId"),
            g("file"),
            g("pos"),
            g("gtid"),
            g("row"),
        )
    return (
        r.topic,
        r.collection or META_PARTITION,
        kj,
        hj,
        False,
        op,
        None if b is None else dumps(b),
        None if a is None else dumps(a),
        None if t is None else dumps(t),
        pj,
        None,
        None,
        ms,
        us,
        ns,
    ) + _NO_SOURCE


def _array(values: Any, type_: pa.DataType) -> pa.Array:
    if type(values) is tuple and values.count(None) == len(values):
        return pa.nulls(len(values), type_)  # e.g. the binlog columns of a PostgreSQL batch
    if type_ == _S:
        try:
            # orjson output and str values: build as binary and view as string (no re-validation).
            return pa.array(values, pa.binary()).view(_S)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            return pa.array([None if x is None else str(x) for x in values], _S)
    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        # A source field of an unexpected type: null rather than fail the batch.
        return pa.array(
            [x if isinstance(x, int) and not isinstance(x, bool) else None for x in values], type_
        )


def _schema_column(schemas: Any, payloads: Any) -> pa.Array:
    """Schema JSON per record as a dictionary array: one copy of each distinct schema text
    (records of one table version share one Schema object). Null where the payload is null."""
    index: dict[int, int] = {}
    texts: list[bytes] = []
    idx: list[int | None] = []
    add = idx.append
    last: Any = None
    last_i = 0
    for sch, p in zip(schemas, payloads, strict=True):
        if sch is None or p is None:
            add(None)
            continue
        if sch is last:  # runs of one table version: the common case
            add(last_i)
            continue
        i = index.get(id(sch))
        if i is None:
            i = index[id(sch)] = len(texts)
            texts.append(sch.json_text)
        last, last_i = sch, i
        add(i)
    return pa.DictionaryArray.from_arrays(pa.array(idx, _I32), pa.array(texts, pa.binary()).view(_S))


def build_table(
    batch: Batch,
    key_schemas: bool = True,
    value_schemas: bool = True,
    context: tuple[tuple[str, bytes], ...] = (),
) -> pa.Table:
    """The batch as one Arrow table: one pass over the records, then column-wise conversion.
    `context`: the `__debezium.context.*` headers, added to data-change records' headers."""
    records = batch.records
    n = len(records)
    if n:
        cols: dict[str, Any] = dict(zip(_ROW_COLS, zip(*map(_row, records), strict=True), strict=True))
        if context:
            cj = _headers_json(context)
            cols["headers"] = [
                h if not r.has_context else cj if not r.headers else _headers_json(r.headers + context)
                for r, h in zip(records, cols["headers"], strict=True)
            ]
    else:
        cols = {c: () for c in _ROW_COLS}
    cols["batch_seq"] = [batch.seq] * n
    cols["event_index"] = range(n)
    arrays = []
    for f in SCHEMA:
        if f.name == "key_schema":
            arrays.append(
                _schema_column(
                    [r.key_schema for r in records] if key_schemas else [None] * n, [r.key for r in records]
                )
            )
        elif f.name == "value_schema":
            arrays.append(
                _schema_column(
                    [r.value_schema for r in records] if value_schemas else [None] * n,
                    [r.value for r in records],
                )
            )
        else:
            arrays.append(_array(cols[f.name], f.type))
    return pa.Table.from_arrays(arrays, names=SCHEMA.names)


def _b(x: str | bytes | None) -> bytes:
    return b"null" if x is None else x.encode() if isinstance(x, str) else x


def kafka_key(row: Mapping[str, Any]) -> bytes | None:
    """The Kafka record key of a change-log row (what the Kafka sink wrote), byte for byte."""
    if row["key"] is None:
        return None
    if row["key_schema"] is None:
        return _b(row["key"])
    return b'{"schema":' + _b(row["key_schema"]) + b',"payload":' + _b(row["key"]) + b"}"


def kafka_value(row: Mapping[str, Any]) -> bytes | None:
    """The Kafka record value of a change-log row (what the Kafka sink wrote), byte for byte."""
    if row["is_tombstone"]:
        return None
    body = row["payload"]
    if body is None:
        body = (
            b'{"before":'
            + _b(row["before"])
            + b',"after":'
            + _b(row["after"])
            + b',"source":'
            + _b(row["source"])
            + b',"transaction":'
            + _b(row["transaction"])
            + b',"op":'
            + orjson.dumps(row["op"])
            + b',"ts_ms":'
            + orjson.dumps(row["ts_ms"])
            + b',"ts_us":'
            + orjson.dumps(row["ts_us"])
            + b',"ts_ns":'
            + orjson.dumps(row["ts_ns"])
            + b"}"
        )
    if row["value_schema"] is None:
        return _b(body)
    return b'{"schema":' + _b(row["value_schema"]) + b',"payload":' + _b(body) + b"}"


class DeltaChangeLogSink:
    """Appends each batch to the change-log table in one Delta commit with an app transaction.

    `table_uri`: local path or object-store URI; `connector_name`: the app-transaction id.
    """

    keeps_offsets = True  # the offset rides in each data commit (engine: no offset-table save)

    name = "delta"

    def __init__(
        self,
        table_uri: str | Path,
        connector_name: str,
        *,
        key_schemas_enable: bool = True,
        value_schemas_enable: bool = True,
        storage_options: Mapping[str, str] | None = None,
        context: tuple[tuple[str, bytes], ...] = (),
        compact_files: int = 200,
    ) -> None:
        self.compact_files = compact_files  # 0: never (e.g. the maintenance DAG compacts)
        self._added = 0  # files added since the last compaction (by this process)
        self._ctx = context  # __debezium.context.* headers for data-change records
        self.table_uri = str(table_uri)
        self.app_id = connector_name
        self._ks = key_schemas_enable
        self._vs = value_schemas_enable
        self._storage = dict(storage_options) if storage_options else None
        self._dt: Any = None  # deltalake.DeltaTable once the table exists
        self._last_seq: int | None = None
        self._wp = writer_properties()
        self._open()

    @classmethod
    def from_config(
        cls, cfg: ConnectorConfig, *, context: tuple[tuple[str, bytes], ...] = ()
    ) -> DeltaChangeLogSink:
        d = cfg.sink.delta
        ks, vs = schema_flags(cfg)
        uri = d.table_path or f"{str(cfg.warehouse).rstrip('/')}/{cfg.topic_prefix}/changelog"
        storage = {k: v.get_secret_value() for k, v in d.storage.items()}
        return cls(
            uri,
            cfg.name,
            key_schemas_enable=ks,
            value_schemas_enable=vs,
            storage_options=storage or None,
            context=context,
            compact_files=d.compact_files,
        )

    @property
    def storage_options(self) -> dict[str, str] | None:
        return self._storage

    def _open(self) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        try:
            if DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
                self._dt = DeltaTable(self.table_uri, storage_options=self._storage)
                self._last_seq = self._dt.transaction_version(self.app_id)
        except (OSError, DeltaError) as e:
            raise storage_error(e, self.table_uri, "the Delta change log") from None

    def write(self, batch: Batch) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError

        if self._last_seq is not None and batch.seq <= self._last_seq:
            # Already committed before a restart: the app transaction makes the retry a no-op.
            log.info(
                "delta: batch %d already in %s (last seq %d), skipped",
                batch.seq,
                self.table_uri,
                self._last_seq,
            )
            return
        table = build_table(batch, self._ks, self._vs, self._ctx)
        props = CommitProperties(
            app_transactions=[Transaction(self.app_id, batch.seq)],
            custom_metadata={
                OFFSET_KEY: orjson.dumps(batch.offset).decode(),
                SEQ_KEY: str(batch.seq),
                APP_KEY: self.app_id,
            },
        )
        try:
            if self._dt is None:
                write_deltalake(
                    self.table_uri,
                    table,
                    mode="append",
                    partition_by=["collection"],
                    name="tidemark change log",
                    storage_options=self._storage,
                    writer_properties=self._wp,
                    commit_properties=props,
                )
                self._open()
            else:
                # Passing the DeltaTable keeps its state current: no log re-read per batch.
                write_deltalake(
                    self._dt,
                    table,
                    mode="append",
                    partition_by=["collection"],
                    writer_properties=self._wp,
                    commit_properties=props,
                )
        except SchemaMismatchError as e:
            raise TerminalError(
                f"Delta change log {self.table_uri} has another schema: {e}",
                "the table was written by another Tidemark version; move it aside",
            ) from None
        except CommitFailedError as e:
            raise TransientError(f"Delta change log {self.table_uri}: commit failed: {e}") from None
        except (OSError, DeltaError) as e:
            raise storage_error(e, self.table_uri, "the Delta change log") from None
        self._last_seq = batch.seq
        self._added += len(pc.unique(table.column("collection")))  # one file per table
        if self.compact_files and self._added >= self.compact_files:
            self._compact()

    def _compact(self) -> None:
        """OPTIMIZE the change log's small files (rows and their order keys unchanged; the commit
        says dataChange=false, so Delta stream readers skip it). A failure is only logged: the
        next threshold tries again."""
        from deltalake.exceptions import DeltaError

        self._added = 0
        try:
            m = self._dt.optimize.compact(
                target_size=COMPACT_TARGET_BYTES, max_concurrent_tasks=2, writer_properties=self._wp
            )
            log.info(
                "delta: compacted %s: %s files into %s",
                self.table_uri,
                m.get("numFilesRemoved"),
                m.get("numFilesAdded"),
            )
        except (OSError, DeltaError) as e:
            log.warning("delta: compacting %s failed (%s); the stream goes on", self.table_uri, e)

    def last_offset(self) -> tuple[int, dict[str, Any]] | None:
        """(seq, offset) of the newest batch committed by this connector, read from the table."""
        self._open()
        if self._dt is None or self._last_seq is None:
            return None
        seq = self._last_seq
        # The offset lives in the commit metadata of the commit that set the app transaction;
        # it is normally the newest commit, but maintenance (OPTIMIZE/VACUUM) may follow it.
        limit: int | None = 16
        while True:
            commits = self._dt.history(limit)
            for c in commits:
                if c.get(APP_KEY) == self.app_id and c.get(SEQ_KEY) == str(seq):
                    return seq, orjson.loads(c[OFFSET_KEY])
            if limit is None or len(commits) < limit:
                raise TerminalError(
                    f"Delta change log {self.table_uri}: app transaction {self.app_id}={seq} has no commit "
                    "with its offset (log cleaned up?)",
                    "reset the connector's offsets or restore the table's _delta_log",
                )
            limit = limit * 16 if limit < 4096 else None

    def close(self) -> None:
        self._dt = None
