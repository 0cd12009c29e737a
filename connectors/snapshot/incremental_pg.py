"""PostgreSQL's side of the incremental snapshot: key look-ups, chunk reads and watermark writes.

A chunk is a plain SELECT (no exported snapshot: the watermarks around it decide what it may
emit), read through ADBC into Arrow and encoded column-wise by the initial snapshot's encoders
(`SnapshotColumns`: every value equals what streaming emits). Key values travel as text (`::text`)
and come back as quoted literals the server casts to the column's type, so any key type works.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from psycopg2 import sql
from psycopg2.extensions import quote_ident

from connectors.format.tableschema import TableSchema
from connectors.format.topics import TopicNamer
from connectors.settings.config import ConnectorConfig
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.settings.model import PostgresSettings
from connectors.snapshot.incremental_read import (
    ChunkQuery,
    SignalRows,
    boundary_select,
    chunk_select,
    cut,
)
from connectors.snapshot.incremental_staging import EncodedPart, ReadRows
from connectors.sources.postgres.connection import PgConnParams, connect
from connectors.sources.postgres.snapshot_read import (
    SnapshotColumns,
    conninfo,
    read_batches,
    snapshot_connection,
)
from connectors.sources.postgres.tables import TableCache
from connectors.sources.postgres.types import TypeModes


class PgChunkSource(SignalRows):
    dialect = "postgres"

    def __init__(self, cfg: ConnectorConfig, signal_table: str) -> None:
        assert isinstance(cfg.source, PostgresSettings)
        self.cfg, self.src = cfg, cfg.source
        self.params = PgConnParams.from_settings(self.src)
        self.conn = connect(self.params)
        self._cache = TableCache(
            self.conn,
            cfg,
            TopicNamer.from_settings(self.src),
            TableFilters.from_settings(self.src),
            ColumnRules.from_settings(self.src),
            snapshot=True,
        )
        self._tables: dict[str, tuple[TableSchema, SnapshotColumns] | None] = {}
        self._reader: Any = None  # the chunk reads' ADBC connection, opened on the first read
        self._conninfo = conninfo(self.src)  # (built once: per chunk it was a tenth of the reader's time)
        schema, _, name = signal_table.partition(".")
        self._signal = f"{self._q(schema)}.{self._q(name)}"

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self.conn.close()

    def _transaction(self, statements: Sequence[tuple[str, tuple[str, ...]]]) -> None:
        # one query of several statements: PostgreSQL runs it as one implicit transaction (one
        # round trip instead of BEGIN, each statement, COMMIT)
        with self.conn.cursor() as cur:
            cur.execute("; ".join(q for q, _ in statements), tuple(a for _, args in statements for a in args))

    def _q(self, ident: str) -> str:
        return str(quote_ident(ident, self.conn))

    def _lit(self, value: Any) -> str:
        return str(sql.Literal(None if value is None else str(value)).as_string(self.conn))

    def _name(self, table: str) -> str:
        schema, _, name = table.partition(".")
        return f"{self._q(schema)}.{self._q(name)}"

    # ------------------------------------------------------------------ tables
    def table(self, table: str) -> tuple[TableSchema, SnapshotColumns] | None:
        """The table's schema (as an incremental snapshot event carries it) and its encoder;
        None when the table is gone or not captured."""
        if table not in self._tables:
            schema, _, name = table.partition(".")
            with self.conn.cursor() as cur:
                cur.execute("SELECT to_regclass(%s)", (self._name(table),))
                exists = cur.fetchone()[0] is not None
            found = self._cache.for_table_with_columns(schema, name) if exists else None
            if found is None:
                self._tables[table] = None
            else:
                ts, columns = found
                enc = SnapshotColumns(ts, columns, self._cache.registry, TypeModes.from_settings(self.src))
                self._tables[table] = (ts, enc)
        return self._tables[table]

    def forget(self, table: str) -> None:
        self._tables.pop(table, None)

    def refresh(self, table: str) -> None:
        """PostgreSQL's DDL is not in its log: the schema stays the one read at first use, as
        with the thread reader. Only a table dropped or renamed since is noticed (one look-up
        per chunk), so its chunks are not read (the read would fail) and it ends UNKNOWN_SCHEMA."""
        if self._tables.get(table) is None:
            return
        with self.conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (self._name(table),))
            if cur.fetchone()[0] is None:
                self._tables[table] = None

    def columns(self, table: str) -> list[str]:
        found = self.table(table)
        return [] if found is None else [c.name for c in found[0].columns]

    # ------------------------------------------------------------------ keys and chunks
    def max_key(self, table: str, key: Sequence[str], condition: str | None) -> list[Any] | None:
        texts = ", ".join(f"{self._q(c)}::text AS {self._q(f'_k{i}')}" for i, c in enumerate(key))
        order = ", ".join(f"{self._q(c)} DESC" for c in key)
        where = f" WHERE ({condition})" if condition else ""
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {texts} FROM {self._name(table)}{where} ORDER BY {order} LIMIT 1")
            row = cur.fetchone()
        return None if row is None else list(row)

    def boundaries(self, q: ChunkQuery, every: int) -> list[list[Any]]:
        cols = [self._q(c) for c in q.key]
        texts = ", ".join(f"{c}::text AS {self._q(f'_k{i}')}" for i, c in enumerate(cols))
        query = boundary_select(q, texts, self._name(q.table), cols, lambda _i, v: self._lit(v), every)
        with self.conn.cursor() as cur:
            cur.execute(query)
            rows = cur.fetchall()
        return [list(r) for r in rows]

    def try_lock(self, name: str) -> bool:
        """A session-level advisory lock (held until this connection closes, also by a crash)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (name,))
            return bool(cur.fetchone()[0])

    def read(self, q: ChunkQuery) -> ReadRows:
        found = self.table(q.table)
        assert found is not None
        _ts, enc = found
        cols = [self._q(c) for c in q.key]
        extra = ", ".join(f"{c}::text AS {self._q(f'__tm_k{i}')}" for i, c in enumerate(cols))
        query = chunk_select(
            q, f"{enc.select_list()}, {extra}", self._name(q.table), cols, lambda _i, v: self._lit(v)
        )
        batches: list[pa.RecordBatch] = []
        last: list[Any] | None = None
        n = len(q.key)
        if self._reader is None:
            self._reader = snapshot_connection(self._conninfo, self.params.initial_statements)
        for batch in read_batches(
            self._conninfo,
            query,
            snapshot=None,
            fetch_rows=max(q.fetch or q.limit, 1),
            connection=self._reader,
        ):
            if batch.num_rows == 0:
                continue
            batches.append(batch)
            width = batch.num_columns
            last = [_scalar(batch.column(width - n + i), batch.num_rows - 1) for i in range(n)]
        return ReadRows(sum(b.num_rows for b in batches), last, PgRowCodec(enc), batches)


@dataclass(frozen=True)
class PgRowCodec:
    """Encodes chunks of one table's SELECT (lists of record batches) together: one record batch
    of all their rows, one `SnapshotColumns.encode` call (its Arrow kernels cost mostly per call
    at a chunk's 1,024 rows), cut back into the chunks."""

    enc: SnapshotColumns  # equal codecs (the same encoder object) are encoded together

    def encode_many(self, parts: Sequence[list[pa.RecordBatch]]) -> list[EncodedPart]:
        batches = [b for p in parts for b in p]
        whole = batches
        if len(batches) > 1:
            try:
                whole = pa.Table.from_batches(batches).combine_chunks().to_batches()
            except pa.ArrowInvalid:  # (types that differ between chunks: one at a time)
                pass
        return cut((self.enc.encode(b) for b in whole), [sum(b.num_rows for b in p) for p in parts])


def _scalar(arr: pa.Array | pa.ChunkedArray, i: int) -> Any:
    v = arr[i].as_py()
    return v.decode() if isinstance(v, bytes) else v
