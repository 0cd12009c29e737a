"""MySQL/MariaDB's side of the incremental snapshot: key look-ups, chunk reads and watermark
writes.

The table's structure is read from the server (`SHOW CREATE TABLE`, parsed as the schema
history parses it) and its rows are encoded by the initial snapshot's encoders (`SnapshotRows`:
the text result cut column-wise, or the streaming converters row by row). Key values travel as
the text `snapshot.mysql.key_text` reads and come back as literals of the column's own type
(`key_literal`: integers and decimals unquoted, binary as X'..').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa

from connectors.format.tableschema import TableSchema
from connectors.settings.config import ConnectorConfig
from connectors.settings.model import MySqlSettings
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.incremental_read import (
    ChunkQuery,
    SignalRows,
    boundary_select,
    chunk_select,
    cut,
)
from connectors.snapshot.incremental_staging import EncodedPart, ReadRows
from connectors.snapshot.mysql import key_literal, key_text, select_pieces
from connectors.sources.mysql import setup
from connectors.sources.mysql.ddl import DdlParser
from connectors.sources.mysql.model import Table, Tables
from connectors.sources.mysql.quoting import quote_ident, quote_table
from connectors.sources.mysql.snapshot_read import SESSION_STATEMENTS, SnapshotRows, TextBatch
from connectors.sources.mysql.source import MySqlSource


def _name(table: str) -> str:
    db, _, name = table.partition(".")
    return quote_table(db, name)


class MySqlChunkSource(SignalRows):
    dialect = "mysql"

    def __init__(self, cfg: ConnectorConfig, signal_table: str) -> None:
        assert isinstance(cfg.source, MySqlSettings)
        self.cfg = cfg
        self.conn = setup.connect(setup.connection_settings(cfg.source))
        self.conn.autocommit(True)
        with self.conn.cursor() as cur:
            for stmt in SESSION_STATEMENTS:
                cur.execute(stmt)
        self._tables: dict[str, tuple[TableSchema, SnapshotRows, Table] | None] = {}
        self._ddl: dict[str, str] = {}  # the SHOW CREATE TABLE text each cached model came from
        self._signal = _name(signal_table)
        self._mariadb: bool | None = None

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ read.only=true
    def begin_window(self) -> str:
        """The low watermark: the executed GTID set, read before the chunk's transaction starts
        (MariaDB's consistent snapshot sees every transaction binlogged before it; MySQL adds a
        GTID to gtid_executed after its commit), then that transaction."""
        with self.conn.cursor() as cur:
            low = self._executed(cur)
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            if self._mariadb:
                # the binlog position the snapshot is consistent with (incremental_gtid.parse_low)
                cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
                if file and pos:
                    low = f"{low}@{file}:{pos}"
        return low

    def end_window(self) -> str:
        """The high watermark: the chunk's transaction ends, then the executed GTID set."""
        with self.conn.cursor() as cur:
            cur.execute("COMMIT")
            return self._executed(cur)

    def _executed(self, cur: Any) -> str:
        if self._mariadb is None:
            cur.execute("SELECT VERSION()")
            self._mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        if self._mariadb:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            return str(cur.fetchone()[0] or "")
        cur.execute("SELECT @@global.gtid_mode, @@global.gtid_executed")
        mode, executed = cur.fetchone()
        if str(mode).upper() != "ON":
            raise RuntimeError(
                "read.only=true needs GTIDs: the server runs with gtid_mode OFF (set gtid_mode=ON and "
                "enforce_gtid_consistency=ON, or use the signal-table watermarks)"
            )
        return str(executed or "").replace("\n", "")

    # ------------------------------------------------------------------ tables
    def table(self, table: str) -> tuple[TableSchema, SnapshotRows] | None:
        found = self._model(table)
        return None if found is None else (found[0], found[1])

    def _model(self, table: str) -> tuple[TableSchema, SnapshotRows, Table] | None:
        if table not in self._tables:
            self._tables[table] = self._load(table)
        return self._tables[table]

    def _load(self, table: str) -> tuple[TableSchema, SnapshotRows, Table] | None:
        import pymysql

        db, _, name = table.partition(".")
        with self.conn.cursor() as cur:
            try:
                cur.execute(f"SHOW CREATE TABLE {_name(table)}")
            except pymysql.err.ProgrammingError:
                return None  # no such table
            ddl = self._ddl[table] = cur.fetchone()[1]
            cur.execute("SELECT @@character_set_server")
            tables = Tables(server_charset=str(cur.fetchone()[0]))
            cur.execute(
                "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                (db,),
            )
            row = cur.fetchone()
        if row is not None:
            tables.db_charsets[db] = str(row[0])
        DdlParser(tables).apply(ddl, db)
        t = tables.get(db, name)
        if t is None:
            return None
        source = MySqlSource(self.cfg)
        if not source.filters.captures(db, name):
            return None
        source.tables = tables
        ts = source._table_schema(db, name, t)
        return ts, SnapshotRows(ts, t.columns, source.types), t

    def forget(self, table: str) -> None:
        self._tables.pop(table, None)

    def refresh(self, table: str) -> None:
        # One round trip per chunk: the definition text changes with every ALTER TABLE.
        import pymysql

        if table not in self._tables:
            return
        with self.conn.cursor() as cur:
            try:
                cur.execute(f"SHOW CREATE TABLE {_name(table)}")
                ddl = cur.fetchone()[1]
            except pymysql.err.ProgrammingError:
                ddl = None  # dropped: `table` finds it gone
        if ddl != self._ddl.get(table):
            self.forget(table)

    def columns(self, table: str) -> list[str]:
        found = self._model(table)
        return [] if found is None else [c.name for c in found[2].columns]

    # ------------------------------------------------------------------ keys and chunks
    def max_key(self, table: str, key: Sequence[str], condition: str | None) -> list[Any] | None:
        found = self._model(table)
        assert found is not None
        t = found[2]
        texts = ", ".join(key_text(t, c) for c in key)
        order = ", ".join(f"{quote_ident(c)} DESC" for c in key)
        where = f" WHERE ({condition})" if condition else ""
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {texts} FROM {_name(table)}{where} ORDER BY {order} LIMIT 1")
            row = cur.fetchone()
        return None if row is None else [_text(v) for v in row]

    def boundaries(self, q: ChunkQuery, every: int) -> list[list[Any]]:
        found = self._model(q.table)
        assert found is not None
        t = found[2]
        literals = [key_literal(t, c, self.conn) for c in q.key]
        texts = ", ".join(f"{key_text(t, c)} AS _k{i}" for i, c in enumerate(q.key))
        cols = [quote_ident(c) for c in q.key]
        query = boundary_select(q, texts, _name(q.table), cols, lambda i, v: str(literals[i](v)), every)
        with self.conn.cursor() as cur:
            cur.execute(query)
            rows = cur.fetchall()
        return [[_text(v) for v in r] for r in rows]

    def try_lock(self, name: str) -> bool:
        """A named lock of this session (released when the connection closes, also by a crash)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", (name[:64],))
            return cur.fetchone()[0] == 1

    def read(self, q: ChunkQuery) -> ReadRows:
        found = self._model(q.table)
        assert found is not None
        _ts, enc, t = found
        literals = [key_literal(t, c, self.conn) for c in q.key]
        select_list = f"{enc.select_list()}, " + ", ".join(key_text(t, c) for c in q.key)
        cols = [quote_ident(c) for c in q.key]
        query = chunk_select(q, select_list, _name(q.table), cols, lambda i, v: str(literals[i](v)))
        width = len(enc.columns)
        pieces: list[TextBatch | list[Any]] = []
        count = 0
        last: list[Any] | None = None
        ran = False
        for got, _encode in select_pieces(
            self.conn, query, Chunk(q.table, 0, None, None), enc, max(q.fetch or q.limit, 1)
        ):
            ran = True
            for piece in got:
                if isinstance(piece, TextBatch):
                    if piece.num_rows == 0:
                        continue
                    pieces.append(piece.head(width))  # (its columns cut by the staging writer)
                    tail = piece.last_row()
                    last = [_text(tail[width + i][0].as_py()) for i in range(len(q.key))]
                else:
                    if not piece:
                        continue
                    pieces.append([r[:width] for r in piece])
                    last = [_text(v) for v in piece[-1][width:]]
                count += len(pieces[-1])
        if not ran:  # the table was dropped since: `table` says it is gone from now on
            self._tables[q.table] = None
        return ReadRows(count, last, MySqlRowCodec(enc), pieces)


@dataclass(frozen=True)
class MySqlRowCodec:
    """Encodes chunks of one table's SELECT together: text-protocol pieces of the same columns
    joined into one `TextBatch` (one `encode_text` call: its Arrow kernels cost mostly per call
    at a chunk's 1,024 rows), rows of PyMySQL's own reads one piece at a time."""

    enc: SnapshotRows  # equal codecs (the same encoder object) are encoded together

    def encode_many(self, parts: Sequence[list[TextBatch | list[Any]]]) -> list[EncodedPart]:
        pieces = [p for part in parts for p in part]
        fields = {p.fields for p in pieces if isinstance(p, TextBatch)}
        if len(fields) == 1 and all(isinstance(p, TextBatch) for p in pieces):
            texts = cast(list[TextBatch], pieces)
            width = len(texts[0].columns)
            joined = [pa.concat_arrays([b.columns[c] for b in texts]) for c in range(width)]
            pieces = [TextBatch(joined, texts[0].fields, sum(b.num_rows for b in texts))]
        encoded = (
            self.enc.encode_text(p) if isinstance(p, TextBatch) else self.enc.encode(p) for p in pieces
        )
        return cut(encoded, [sum(len(p) for p in part) for part in parts])


def _text(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes | bytearray) else v
