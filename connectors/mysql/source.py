"""MySQL/MariaDB source: binlog → Debezium change records in transaction-aligned batches.

Offsets are Debezium's (`file`, `pos`, `gtids`, `event`, `row`, `server_id`, `ts_sec`, see
events.py). Schema: recovered from the Delta schema history up to the offset; on first start
(no offset) the current schema of every table is captured as CREATE statements at the current
binlog position (the `no_data` schema snapshot; data snapshots run on Spark elsewhere).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import orjson

from connectors import envelope as env
from connectors.api import Batch, Record, TerminalError
from connectors.filters import ColumnRules, TableFilters
from connectors.mysql import setup
from connectors.mysql.binlog import BinlogStream, current_position
from connectors.mysql.ddl import DdlParser, TableChange
from connectors.mysql.events import (
    RowChange,
    SchemaChange,
    SourceInfo,
    Translator,
    Truncate,
    TxEnd,
    UnparseableDdlError,
    offset_key,
)
from connectors.mysql.history import (
    SNAPSHOT_EVENT,
    DeltaSchemaHistory,
    HistoryRecord,
    schema_change_schemas,
    schema_change_value,
)
from connectors.mysql.model import Table, Tables
from connectors.mysql.types import TypeOptions, column_def
from connectors.tableschema import TableSchema, build
from connectors.topics import TopicNamer

log = logging.getLogger(__name__)

NEWKEY, OLDKEY = "__debezium.newkey", "__debezium.oldkey"
SYSTEM_DBS = ("mysql", "information_schema", "performance_schema", "sys")


class MySqlSource:
    def __init__(self, cfg: Any, *, until_caught_up: bool = False) -> None:
        self.cfg = cfg
        src = cfg.source
        self.connector = "mariadb" if getattr(cfg, "connector", "mysql") == "mariadb" else "mysql"
        self.until_caught_up = until_caught_up
        self.max_batch = int(src.get("max.batch.size", 2048))
        self.poll_s = int(src.get("poll.interval.ms", 500)) / 1000
        self.skipped = set(src.get("skipped.operations") or ["t"]) - {"none"}
        self.tombstones = bool(src.get("tombstones.on.delete", True))
        self.include_schema_changes = bool(src.get("include.schema.changes", True))
        self.include_query = bool(src.get("include.query", False))
        self.namer = TopicNamer(cfg.topic_prefix, src.get("topic.delimiter", "."),
                                src.get("topic.transaction", "transaction"),
                                src.get("topic.heartbeat.prefix", "__debezium-heartbeat"))
        self.filters = TableFilters.from_source(src, self.connector)
        self.rules = ColumnRules.from_source(src)
        self.types = TypeOptions.from_config(src)
        self.source_schema = env.MARIADB_SOURCE if self.connector == "mariadb" else env.MYSQL_SOURCE
        self.sc_key_schema, self.sc_value_schema = schema_change_schemas(self.connector)
        self.settings = setup.settings_from_props(src)
        self.server_id = int(src.get("database.server.id") or 0) or 5400 + int(time.time()) % 1000
        self.history = DeltaSchemaHistory(
            cfg.warehouse, cfg.name, table_filter=self.filters.captures,
            db_filter=lambda d: self.filters.namespace(d),
            store_only_captured_tables=bool(src.get("schema.history.internal.store.only.captured.tables.ddl", False)),
            store_only_captured_databases=bool(
                src.get("schema.history.internal.store.only.captured.databases.ddl", False)))
        self._stream: BinlogStream | None = None
        self._translator: Translator | None = None
        self._schemas: dict[tuple[str, str], tuple[int, TableSchema]] = {}
        self._stop = False
        self._conn: Any = None

    offset_key = staticmethod(offset_key)

    # ------------------------------------------------------------------ lifecycle
    def open(self, start_offset: dict[str, Any] | None) -> None:
        src = self.cfg.source
        self._conn = setup.connect(self.settings)
        facts = setup.check_server(self._conn, self.server_id)
        if start_offset:
            setup.check_position(self._conn, start_offset, facts["mariadb"])
            if not self.history.exists():
                raise TerminalError("the schema history is empty but offsets exist",
                                    "use snapshot.mode=recovery to rebuild the history, or delete the offsets")
            tables = self.history.recover(start_offset)
            offset = dict(start_offset)
        else:
            tables, offset = self._schema_snapshot()
        self.tables = tables
        self._translator = Translator(tables, offset, include_query=self.include_query,
                                      skip_unparseable=bool(src.get("schema.history.internal.skip.unparseable.ddl",
                                                                    False)),
                                      on_ddl_applied=self._ddl_applied)
        self._stream = BinlogStream(self.settings, self.server_id, self._resolve, file=str(offset["file"]),
                                    pos=int(offset["pos"]), heartbeat_s=max(self.poll_s, 0.1),
                                    blocking=not self.until_caught_up)
        self._start = offset

    def _schema_snapshot(self) -> tuple[Tables, dict[str, Any]]:
        """Capture every table's current schema at the current binlog position (no_data)."""
        cur = self._conn.cursor()
        file, pos, gtids = current_position(cur)
        cur.execute("SELECT @@character_set_server")
        tables = Tables(server_charset=str(cur.fetchone()[0]))
        parser = DdlParser(tables)
        records: list[HistoryRecord] = []
        cur.execute("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA")
        for db, charset in cur.fetchall():
            if db in SYSTEM_DBS:
                continue
            tables.db_charsets[db] = charset
            records.append(HistoryRecord(file, pos, gtids, db, f"CREATE DATABASE `{db}` CHARACTER SET {charset}",
                                         [], event=SNAPSHOT_EVENT, db_charset=charset))
            cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_TYPE = 'BASE TABLE'", (db,))
            for (name,) in cur.fetchall():
                cur.execute(f"SHOW CREATE TABLE `{db}`.`{name}`")
                ddl = cur.fetchone()[1]
                res = parser.apply(ddl, db)
                records.append(HistoryRecord(file, pos, gtids, db, ddl, res.changes, event=SNAPSHOT_EVENT))
        cur.close()
        self.history.reset()
        self.history.record(records)
        return tables, {"file": file, "pos": pos, "gtids": gtids, "event": 0, "row": 0, "server_id": 0, "ts_sec": 0}

    def stop(self) -> None:
        self._stop = True
        if self._stream is not None:
            self._stream.stop()

    def acknowledge(self, offset: dict[str, Any]) -> None:
        pass  # the binlog has no consumer feedback; durability lives in the offset store

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ schema
    def _resolve(self, db: str, table: str) -> tuple[Table, int] | None:
        if not self.filters.captures(db, table):
            return None
        t = self.tables.get(db, table)
        if t is None:
            raise TerminalError(f"rows for {db}.{table}, which is not in the schema model",
                                "the schema history misses this table; re-run with snapshot.mode=recovery")
        return t, self.tables.version(db, table)

    def _ddl_applied(self) -> None:
        if self._stream is not None:
            self._stream.tables_version += 1

    def _table_schema(self, db: str, table: str, model: Table | None) -> TableSchema:
        version = self.tables.version(db, table)
        hit = self._schemas.get((db, table))
        if hit is not None and hit[0] == version:
            return hit[1]
        t = model or self.tables.get(db, table)
        assert t is not None
        cols = [column_def(c, self.types) for c in t.columns]
        ts = build(db, table, cols, list(t.primary_key), prefix=self.cfg.topic_prefix, namer=self.namer,
                   filters=self.filters, rules=self.rules, source_schema=self.source_schema)
        self._schemas[(db, table)] = (version, ts)
        return ts

    # ------------------------------------------------------------------ streaming
    def _source(self, s: SourceInfo) -> dict[str, Any]:
        ms = s.ts_ms
        return {"version": env.VERSION, "connector": self.connector, "name": self.cfg.topic_prefix, "ts_ms": ms,
                "snapshot": "false", "db": s.db, "sequence": None, "ts_us": ms * 1000, "ts_ns": ms * 1_000_000,
                "table": s.table, "server_id": s.server_id, "gtid": s.gtid, "file": s.file, "pos": s.pos,
                "row": s.row, "thread": s.thread, "query": s.query}

    def batches(self) -> Iterator[Batch]:
        assert self._stream is not None and self._translator is not None
        tr = self._translator
        pending: list[Record] = []
        last_cut = time.monotonic()
        offset = dict(self._start)
        start_key = offset_key(self._start)
        try:
            for ev in self._stream.events():
                for item in tr.feed(ev):
                    if isinstance(item, RowChange):
                        if item.pos < start_key:
                            continue
                        self._row(pending, item)
                    elif isinstance(item, TxEnd):
                        offset = item.offset
                        if len(pending) >= self.max_batch or (pending and time.monotonic() - last_cut >= self.poll_s):
                            yield Batch(pending, offset)
                            pending, last_cut = [], time.monotonic()
                    elif isinstance(item, SchemaChange):
                        if pending:
                            yield Batch(pending, offset)
                            pending = []
                        self._schema_change(pending, item)
                        offset = item.offset
                        yield Batch(pending, offset)
                        pending, last_cut = [], time.monotonic()
                    elif isinstance(item, Truncate):
                        self._truncate(pending, item)
                        offset = item.offset
                if ev.kind == "heartbeat" and tr._tx is None:
                    offset = tr.offset()
                    if pending:
                        yield Batch(pending, offset)
                        pending, last_cut = [], time.monotonic()
                if self._stop:
                    break
        except UnparseableDdlError as e:
            raise TerminalError(str(e), "fix the statement support or set "
                                        "schema.history.internal.skip.unparseable.ddl=true") from None
        if pending:
            yield Batch(pending, offset)

    def _row(self, out: list[Record], rc: RowChange) -> None:
        ts = self._table_schema(rc.db, rc.table, rc.table_model)
        src = self._source(rc.source)
        if rc.op == "u" and ts.key_names:
            old_key, new_key = ts.key(rc.before), ts.key(rc.after)  # type: ignore[arg-type]
            if old_key != new_key:
                before, after = ts.row(rc.before), ts.row(rc.after)  # type: ignore[arg-type]
                if "d" not in self.skipped:
                    out.append(Record(ts.topic, old_key, _value(before, None, src, "d"), ts.key_schema,
                                      ts.envelope_schema, ((NEWKEY, _header(ts, new_key)),), ts.collection,
                                      rc.offset, rc.pos))
                    if self.tombstones:
                        out.append(Record(ts.topic, old_key, None, ts.key_schema, ts.envelope_schema, (),
                                          ts.collection, rc.offset, rc.pos))
                if "c" not in self.skipped:
                    out.append(Record(ts.topic, new_key, _value(None, after, src, "c"), ts.key_schema,
                                      ts.envelope_schema, ((OLDKEY, _header(ts, old_key)),), ts.collection,
                                      rc.offset, rc.pos))
                return
        if rc.op in self.skipped:
            return
        before = ts.row(rc.before) if rc.before is not None else None
        after = ts.row(rc.after) if rc.after is not None else None
        key = ts.key(rc.after if rc.after is not None else rc.before)  # type: ignore[arg-type]
        out.append(Record(ts.topic, key, _value(before, after, src, rc.op), ts.key_schema, ts.envelope_schema, (),
                          ts.collection, rc.offset, rc.pos))
        if rc.op == "d" and self.tombstones:
            out.append(Record(ts.topic, key, None, ts.key_schema, ts.envelope_schema, (), ts.collection,
                              rc.offset, rc.pos))

    def _truncate(self, out: list[Record], t: Truncate) -> None:
        if "t" in self.skipped or not self.filters.captures(t.db, t.table) or self.tables.get(t.db, t.table) is None:
            return
        ts = self._table_schema(t.db, t.table, None)
        s = t.source
        s.table = t.table
        out.append(Record(ts.topic, None, _value(None, None, self._source(s), "t"), None, ts.envelope_schema, (),
                          ts.collection, t.offset, t.pos))

    def _schema_change(self, out: list[Record], sc: SchemaChange) -> None:
        changes: list[TableChange] = sc.result.changes
        db_charset = self.tables.db_charsets.get(sc.db)
        self.history.record([HistoryRecord(sc.source.file, sc.source.pos, sc.gtids_before, sc.db, sc.ddl, changes,
                                           server_id=sc.source.server_id, db_charset=db_charset,
                                           ts_ms=sc.source.ts_ms)])
        for key in list(self._schemas):
            if key[0] == sc.db:
                self._schemas.pop(key, None)
        if not self.include_schema_changes:
            return
        if changes and not any(self.filters.captures(c.db, c.table) for c in changes):
            return
        if not changes and not self.filters.namespace(sc.db):
            return
        key, value = schema_change_value(self._source(sc.source), int(time.time() * 1000), sc.db, sc.ddl, changes)
        out.append(Record(self.namer.schema_change_topic, key, value, self.sc_key_schema, self.sc_value_schema,
                          (), None, sc.offset, sc.pos))


def _value(before: Any, after: Any, src: dict[str, Any], op: str) -> dict[str, Any]:
    ns = time.time_ns()
    return {"before": before, "after": after, "source": src, "transaction": None, "op": op,
            "ts_ms": ns // 1_000_000, "ts_us": ns // 1000, "ts_ns": ns}


def _header(ts: TableSchema, key: Any) -> bytes:
    schema = ts.key_schema.json_text if ts.key_schema is not None else b"null"
    return b'{"schema":' + schema + b',"payload":' + orjson.dumps(key) + b"}"


__all__ = ["MySqlSource", "offset_key"]
