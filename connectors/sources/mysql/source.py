"""MySQL/MariaDB source: binlog → Debezium change records in transaction-aligned batches.

Offsets are Debezium's (`file`, `pos`, `gtids`, `event`, `row`, `server_id`, `ts_sec`, see
events.py). Schema: recovered from the Delta schema history up to the offset; on first start
(no offset) the current schema of every table is captured as CREATE statements at the current
binlog position (the `no_data` schema snapshot; data snapshots run on Spark elsewhere), and that
position is stored at once (an empty first batch) so nothing written afterwards is missed.

Batching: a batch is cut at a transaction end once `max.batch.size` records or
`poll.interval.ms` have accumulated or nothing more is buffered from the server (caught up: the
change goes out at once), before and after every schema change, and *inside* a
transaction after any row once `max.batch.size` records are pending — its offset is then the
transaction start plus the rows events / rows already emitted, so a 100k-row transaction never
sits in memory and a restart resumes at the next row. Every record's `pos` equals
`offset_key(offset just after it)`, which is what the engine compares when a sink is ahead.

Resume: with GTIDs on (MariaDB always; MySQL `gtid_mode=ON`) the stream restarts from the offset's
GTID set (the set before the interrupted transaction) — MariaDB: `SET @slave_connect_state` +
COM_BINLOG_DUMP; MySQL: COM_BINLOG_DUMP_GTID with the encoded set — and the schema history is
replayed by GTID containment; otherwise, and on the first start, from `file`/`pos`.

Bounded mode (`--until-caught-up`): the server's position when streaming starts is the target;
the source stops at the first transaction boundary at or past it (the dump is also non-blocking,
so the server's EOF ends it). `--max-seconds` and SIGTERM stop at the next event boundary with
the exact offset. A server shutdown (EOF on a blocking dump) or a dropped connection is a
TransientError: the engine reconnects with capped exponential backoff from the stored offset.
A server that cannot be reached at the very first start is a set-up error instead (one message,
no retries): the source remembers per config object whether the server was ever reached.

Transaction metadata (`provide.transaction.metadata`): BEGIN before a transaction's first
emitted event and END after it on `<prefix>.transaction`, and the envelope's `transaction` block.
The id is Debezium's: the GTID (MySQL `uuid:n`, MariaDB `domain-server-seq`), or
`file=<file>,pos=<pos of BEGIN>` without GTIDs. Heartbeats (`heartbeat.interval.ms`) go to
`__debezium-heartbeat.<prefix>` at transaction boundaries, running `heartbeat.action.query`
first; they also store the position reached when only uncaptured tables change.

MySQL 8.x vs MariaDB 10.x:
  * current position: MySQL 8.4 `SHOW BINARY LOG STATUS` (8.0 and MariaDB `SHOW MASTER STATUS`;
    MariaDB's GTID position from `@@gtid_binlog_pos`, MySQL's from `Executed_Gtid_Set`);
  * GTIDs: MySQL interval sets `uuid:1-5` (only with `gtid_mode=ON`, purged ones in
    `gtid_purged`), MariaDB `domain-server-seq` per domain (always present);
  * MariaDB writes no BEGIN query event (the GTID event opens the transaction), so `thread` is
    null for its row events; MySQL's BEGIN carries it;
  * `include.query`: MySQL needs `binlog_rows_query_log_events=ON` (ROWS_QUERY events), MariaDB
    `binlog_annotate_row_events=ON` (ANNOTATE_ROWS events, asked for with a dump flag);
  * MySQL `binlog_row_value_options=PARTIAL_JSON` is refused at set-up (partial JSON updates
    cannot be decoded), as are MariaDB compressed binlog events;
  * replica listing for the server-id check: `SHOW REPLICAS` (MySQL 8.0.22+), `SHOW REPLICA HOSTS`
    (MariaDB 10.5+) or
    `SHOW SLAVE HOSTS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from time import time_ns
from typing import Any

import pymysql

from connectors.api import Batch, GtidSet, Record, TerminalError
from connectors.format import envelope as env
from connectors.format import transaction as txmeta
from connectors.format.envelope import VERSION
from connectors.format.schema import prim
from connectors.format.tableschema import (
    ColumnDef,
    TableSchema,
    build,
    failure_mode,
    key_change,
    unchanged_update,
)
from connectors.format.topics import TopicNamer
from connectors.format.transaction import TxCounts
from connectors.format.variants import with_options
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.settings.model import MySqlSettings
from connectors.sources.memory import memory_for
from connectors.sources.mysql import setup
from connectors.sources.mysql.connection import current_position
from connectors.sources.mysql.ddl import DdlParser, TableChange, UnparseableDdl, ddl_targets
from connectors.sources.mysql.errors import recovery_hint
from connectors.sources.mysql.events import (
    RowChange,
    SchemaChange,
    SourceInfo,
    Translator,
    Truncate,
    TxEnd,
    UnparseableDdlError,
    file_index,
    offset_key,
)
from connectors.sources.mysql.history import (
    SNAPSHOT_EVENT,
    DeltaSchemaHistory,
    HistoryRecord,
    schema_change_schemas,
    schema_change_value,
)
from connectors.sources.mysql.model import Table, Tables
from connectors.sources.mysql.quoting import quote_ident, quote_table
from connectors.sources.mysql.reposition import MARK, RepositionTicket
from connectors.sources.mysql.stream import BinlogStream
from connectors.sources.mysql.types import TypeOptions, UnknownColumnType, column_def

log = logging.getLogger(__name__)

SYSTEM_DBS = ("mysql", "information_schema", "performance_schema", "sys")
_FILTER_LISTS = ("database.include.list", "database.exclude.list", "table.include.list", "table.exclude.list")
_LISTED = 20  # names shown in the "nothing captured" warning
# information_schema.TABLES.TABLE_TYPE of tables with rows (MariaDB's system-versioned tables are not
# 'BASE TABLE'; leaving them out of the schema read lost their schema)
TABLE_TYPES = "('BASE TABLE', 'SYSTEM VERSIONED')"


def _definition(cur: Any, db: str, name: str, *, captured: bool, user: str) -> str:
    """SHOW CREATE TABLE, which needs a table-level privilege (a column grant is not enough):
    a refusal names the table and the ways out, not the driver's traceback."""
    try:
        cur.execute(f"SHOW CREATE TABLE {quote_table(db, name)}")
    except pymysql.err.OperationalError as e:
        if not e.args or e.args[0] not in (1142, 1143):  # table / column access denied
            raise
        why = (
            "" if captured else " (not captured, but the schema history records each table of the databases)"
        )
        raise TerminalError(
            f"database.user {user} may not read the definition of {db}.{name}{why}: {e.args[1]}",
            f"GRANT SELECT ON {quote_table(db, name)} TO the user"
            + ("" if captured else ", or set schema.history.internal.store.only.captured.tables.ddl=true"),
        ) from None
    return str(cur.fetchone()[1])


class MySqlSource:
    def __init__(self, cfg: Any, *, until_caught_up: bool = False, max_seconds: float | None = None) -> None:
        self.cfg = cfg
        self.memory = memory_for(cfg)
        assert isinstance(cfg.source, MySqlSettings)
        self.src = src = cfg.source
        self.connector = "mariadb" if getattr(cfg, "connector", "mysql") == "mariadb" else "mysql"
        self._prefix = cfg.topic_prefix
        self.until_caught_up = until_caught_up
        self.deadline = time.monotonic() + max_seconds if max_seconds else None
        self.heartbeat_s = src.heartbeat_interval_ms / 1000
        self.heartbeat_query = src.heartbeat_action_query
        self.tx_meta = src.provide_transaction_metadata
        self.max_batch = src.max_batch_size
        self.poll_s = src.poll_interval_ms / 1000
        self.skipped = set[str](src.skipped_operations) - {"none"}
        self.tombstones = src.tombstones_on_delete
        self.include_schema_changes = src.include_schema_changes
        self.include_query = src.include_query
        self.namer = TopicNamer.from_settings(src)
        self.filters = TableFilters.from_settings(src)
        self.rules = ColumnRules.from_settings(src)
        self.types = TypeOptions.from_settings(src)
        self.source_schema = env.MARIADB_SOURCE if self.connector == "mariadb" else env.MYSQL_SOURCE
        self.sc_key_schema, self.sc_value_schema = schema_change_schemas(self.connector)
        self.settings = setup.connection_settings(src)
        path = cfg.origin.path
        self.config_path = str(path) if path else None  # named in recovery hints
        self.server_id = src.database_server_id
        # Debezium's schema.history.internal.store.only.captured.{tables,databases}.ddl: the start-up
        # schema read and the history leave out the tables / databases the filters do not capture
        self.only_captured_tables = bool(src.schema_history_internal_store_only_captured_tables_ddl)
        self.only_captured_dbs = bool(src.schema_history_internal_store_only_captured_databases_ddl)
        self.skip_unparseable = src.schema_history_internal_skip_unparseable_ddl
        self.history = DeltaSchemaHistory(
            cfg.warehouse,
            cfg.name,
            table_filter=self.filters.captures,
            db_filter=lambda d: self.filters.namespace(d),
            store_only_captured_tables=self.only_captured_tables,
            store_only_captured_databases=self.only_captured_dbs,
        )
        self._stream: BinlogStream | None = None
        self._translator: Translator | None = None
        self._schemas: dict[tuple[str, str], tuple[int, TableSchema]] = {}
        self._stop = False
        self._conn: Any = None
        self._target: tuple[int, int] | None = None
        self._tx_counts: TxCounts | None = None  # the current transaction's events (transaction metadata)
        self._tx_id = ""
        self._fresh = False
        self._unknown_warned: set[tuple[str, str, str]] = set()
        # Set by the wiring: (source) → what a lock-free snapshot's chunks already hold, or None
        # (snapshot/watermarks.py); rows it covers are skipped until the stream passes its end.
        self.cover_loader: Callable[[MySqlSource], Any] | None = None
        self._cover: Any = None
        # set-binlog-position (signals/binlog_position.py): the move asked for, and the key of the last applied
        # (carried in every offset after it, so a repeated signal is recognised after a restart).
        self.repositioned_by: str | None = None
        self.streaming = False  # opened: a reposition may be asked for
        self._ticket: RepositionTicket | None = None
        self._interrupted = False
        self._ticket_lock = threading.Lock()
        self._facts: dict[str, Any] = {}
        # Set by the wiring for read-only incremental snapshots (snapshot/incremental_gtid.py):
        # whether a chunk waits for the stream to pass its window; an idle stream then turns a
        # server heartbeat into an empty batch, whose offset shows the position reached.
        self.wants_position: Callable[[], bool] | None = None
        # incremental snapshots: told of each DDL's tables and position (the chunk reader reloads
        # their schemas; with allow.schema.changes the next chunk is read again)
        self.on_schema_change: Callable[[list[str], tuple], None] | None = None
        # skip.messages.without.change / event.processing.failure.handling.mode: chosen once here.
        self._row = with_options(  # type: ignore[method-assign]  # this instance's variant
            self._row, src, unchanged=self._unchanged, where=_where
        )

    offset_key = staticmethod(offset_key)

    # ------------------------------------------------------------------ lifecycle
    def open(self, start_offset: dict[str, Any] | None) -> None:
        self._conn = setup.connect(self.settings, unreachable_is_transient=self.memory.connected)
        self.memory.connected = True
        facts = self._facts = setup.check_server(self._conn, self.server_id)
        if start_offset:
            setup.check_position(self._conn, start_offset, facts["mariadb"], self.config_path)
            if not self.history.exists():
                raise TerminalError(
                    f"the schema history ({self.history.uri}) is empty but offsets exist",
                    "if no table changed since the stored position, start once with snapshot.mode=recovery: it "
                    "rebuilds the history from the current table structures (and refuses if one changed); "
                    f"otherwise {recovery_hint(self.config_path)}",
                )
            tables = self.history.recover(start_offset)
            offset = dict(start_offset)
            mark = offset.pop(MARK, None)
            self.repositioned_by = str(mark) if mark is not None else None
        else:
            tables, offset = self._schema_snapshot()
            self._fresh = True
        self._warn_if_nothing_captured()
        self._begin(tables, offset)
        self.streaming = True

    def _begin(self, tables: Tables, offset: dict[str, Any]) -> None:
        """Set up translating and the binlog dump from `offset` with the table model `tables`
        (at open, and again when a set-binlog-position signal moves the stream)."""
        facts = self._facts
        self.tables = tables
        self._schemas.clear()
        self._tx_counts = None
        self._cover = None
        cover = self.cover_loader(self) if self.cover_loader is not None else None
        if cover is not None and offset_key(offset)[:2] < cover.until:
            log.info("streaming skips the rows the lock-free snapshot's chunks hold, up to %s", cover.until)
            self._cover = cover
        self._translator = Translator(
            tables,
            offset,
            include_query=self.include_query,
            skip_unparseable=self.skip_unparseable,
            on_ddl_applied=self._ddl_applied,
            outside_filters=self._outside_filters,
        )
        # Resume by GTID set when the server has GTIDs (Debezium does the same): robust against a
        # binlog file/position that differs after failover; file/pos is the fallback.
        gtids = str(offset.get("gtids") or "")
        use_gtids = bool(gtids) and not self._fresh and facts.get("gtid_mode") == "ON"
        if use_gtids:
            log.info(
                "resuming from GTID set %s (event %s, row %s)",
                gtids,
                offset.get("event", 0),
                offset.get("row", 0),
            )
        else:
            log.info(
                "resuming from %s:%s (event %s, row %s)",
                offset["file"],
                offset["pos"],
                offset.get("event", 0),
                offset.get("row", 0),
            )
        self._stream = BinlogStream(
            self.settings,
            self.server_id,
            self._resolve,
            file=None if use_gtids else str(offset["file"]),
            pos=None if use_gtids else int(offset["pos"]),
            gtid_set=gtids if use_gtids else None,
            # read-only incremental snapshots: an idle stream reports its position every 0.1 s,
            # each a chunk's chance to go out (wants_position)
            heartbeat_s=0.1 if self.wants_position is not None else max(min(self.poll_s, 1.0), 0.1),
            annotate=self.include_query,
            blocking=not self.until_caught_up,
            config_path=self.config_path,
        )
        self._start = offset

    def _schema_snapshot(self, at: tuple[str, int, str] | None = None) -> tuple[Tables, dict[str, Any]]:
        """Capture every table's current schema at the current binlog position (no_data): all
        tables of all databases, or only the captured ones with store.only.captured.*.ddl. A
        definition that cannot be parsed stops the start unless its table is not captured or
        schema.history.internal.skip.unparseable.ddl=true (both: a warning, the table left out)."""
        cur = self._conn.cursor()
        # `at`: a data snapshot's consistent position (connectors/snapshot/mysql.py), read under its lock
        file, pos, gtids = at or current_position(cur)
        cur.execute("SELECT @@character_set_server")
        tables = Tables(server_charset=str(cur.fetchone()[0]))
        parser = DdlParser(tables)
        records: list[HistoryRecord] = []
        cur.execute("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA")
        for db, charset in cur.fetchall():
            if db in SYSTEM_DBS or (self.only_captured_dbs and not self.filters.namespace(db)):
                continue
            tables.db_charsets[db] = charset
            records.append(
                HistoryRecord(
                    file,
                    pos,
                    gtids,
                    db,
                    f"CREATE DATABASE {quote_ident(db)} CHARACTER SET {charset}",
                    [],
                    event=SNAPSHOT_EVENT,
                    db_charset=charset,
                )
            )
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                f"AND TABLE_TYPE IN {TABLE_TYPES}",
                (db,),
            )
            for (name,) in cur.fetchall():
                captured = self.filters.captures(db, name)
                if self.only_captured_tables and not captured:
                    continue
                ddl = _definition(cur, db, name, captured=captured, user=self.src.database_user)
                try:
                    res = parser.apply(ddl, db)
                except UnparseableDdl as e:
                    if not captured:
                        log.warning("%s (skipped: %s.%s is not captured)", e, db, name)
                        continue
                    if self.skip_unparseable:
                        log.warning(
                            "%s (skipped: schema.history.internal.skip.unparseable.ddl=true; rows of "
                            "%s.%s cannot be decoded)",
                            e,
                            db,
                            name,
                        )
                        continue
                    raise TerminalError(
                        f"the definition of {db}.{name} cannot be parsed: {e}",
                        "exclude the table (table.exclude.list), or set "
                        "schema.history.internal.skip.unparseable.ddl=true to leave it out "
                        "of the schema (its rows then stop the connector)",
                    ) from None
                records.append(HistoryRecord(file, pos, gtids, db, ddl, res.changes, event=SNAPSHOT_EVENT))
        cur.close()
        self.history.reset()
        self.history.record(records)
        return tables, {
            "file": file,
            "pos": pos,
            "gtids": gtids,
            "event": 0,
            "row": 0,
            "server_id": 0,
            "ts_sec": 0,
        }

    def _outside_filters(self, sql: str, db: str | None) -> bool:
        """Whether a DDL statement changes only tables (or databases) the filters do not capture,
        read from its head (it may not parse)."""
        targets = ddl_targets(sql, db)
        if targets is None or not (targets.tables or targets.databases):
            return False
        return not any(self.filters.captures(d, t) for d, t in targets.tables) and not any(
            self.filters.namespace(d) for d in targets.databases
        )

    def _warn_if_nothing_captured(self) -> None:
        """Filters that match no table on the server run silently with 0 records: say so once at
        start, with what the server has (tables created later that match are captured)."""
        lists = {k: ",".join(v) for k in _FILTER_LISTS if (v := getattr(self.src, k.replace(".", "_")))}
        if not lists or not self.memory.first_time("nothing captured"):
            return  # once per config: not again at every reconnection
        with self._conn.cursor() as cur:
            cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
            dbs = sorted(d for (d,) in cur.fetchall() if d not in SYSTEM_DBS)
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_TYPE IN {TABLE_TYPES}"
            )
            found = sorted((d, t) for d, t in cur.fetchall() if d not in SYSTEM_DBS)
        if any(self.filters.captures(d, t) for d, t in found):
            return

        def shown(names: list[str]) -> str:
            more = f" ... ({len(names) - _LISTED} more)" if len(names) > _LISTED else ""
            return ", ".join(names[:_LISTED]) + more if names else "none"

        text = "; ".join(f"{k}={v}" for k, v in lists.items())
        log.warning(
            "no table on the server is captured with %s — nothing will be streamed until a matching table "
            "is created. Databases on the server: %s. Tables: %s",
            text,
            shown(dbs),
            shown([f"{d}.{t}" for d, t in found]),
        )

    def stop(self) -> None:
        self._stop = True
        if self._stream is not None:
            self._stream.stop()

    def reposition(self, offset: dict[str, Any], key: str) -> RepositionTicket:
        """Move the stream to `offset` (any thread): the dump ends at the next event, what was
        read is emitted, then an empty batch with the new offset, then the stream goes on from
        there. `key`: the signal's, kept in every later offset."""
        ticket = RepositionTicket(offset, key)
        with self._ticket_lock:
            self._ticket = ticket
            self._interrupted = True
        stream = self._stream
        if stream is not None:
            stream.stop()
        return ticket

    def cancel_reposition(self, ticket: RepositionTicket) -> bool:
        """Withdraw `ticket` unless the stream already moved; True when withdrawn."""
        with self._ticket_lock:
            if self._ticket is ticket and not ticket.taken.is_set():
                self._ticket = None
                return True
            return False

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
            raise TerminalError(
                f"rows for {db}.{table}, which is not in the schema model (the schema history "
                "misses its CREATE TABLE; a table database.user holds no privilege on is hidden "
                "from it when the schema is read)",
                f"if database.user may not read it, GRANT SELECT ON {quote_table(db, table)} TO it first; then "
                + recovery_hint(self.config_path),
            )
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
        cols = [self._column_def(db, table, c) for c in t.columns]
        ts = build(
            db,
            table,
            cols,
            list(t.primary_key),
            prefix=self.cfg.topic_prefix,
            namer=self.namer,
            filters=self.filters,
            rules=self.rules,
            source_schema=self.source_schema,
        )
        self._schemas[(db, table)] = (version, ts)
        return ts

    def _column_def(self, db: str, table: str, c: Any) -> ColumnDef:
        """A column of a type this release does not know is left out when the column filters
        exclude it; captured, it raises UnknownColumnType naming table, column and type (the
        connector stops, or skips the row with event.processing.failure.handling.mode=warn/skip)."""
        try:
            return column_def(c, self.types)
        except UnknownColumnType:
            if not self.filters.captures_column(db, table, c.name):
                return ColumnDef(c.name, prim("bytes", optional=True), None, c.type_name, emitted=False)
            err = UnknownColumnType(c.name, c.type_name, f"{db}.{table}")
            mode = failure_mode(self.src)
            if mode != "fail" and (db, table, c.name) not in self._unknown_warned:
                self._unknown_warned.add((db, table, c.name))
                log.warning(
                    "%s: its rows are skipped (event.processing.failure.handling.mode=%s)",
                    err,
                    mode,
                )
            raise err from None

    # ------------------------------------------------------------------ streaming
    def _source(self, s: SourceInfo) -> dict[str, Any]:
        ms = s.ts_ms
        return {
            "version": VERSION,
            "connector": self.connector,
            "name": self._prefix,
            "ts_ms": ms,
            "snapshot": "false",
            "db": s.db,
            "sequence": None,
            "ts_us": ms * 1000,
            "ts_ns": ms * 1_000_000,
            "table": s.table,
            "server_id": s.server_id,
            "gtid": s.gtid,
            "file": s.file,
            "pos": s.pos,
            "row": s.row,
            "thread": s.thread,
            "query": s.query,
        }

    def batches(self) -> Iterator[Batch]:
        """The stream's batches (`_batches`), moved to another position when a set-binlog-position
        signal asks (`reposition`); after a move every offset carries the signal's key."""
        mark = self.repositioned_by
        last: dict[str, Any] = dict(self._start)
        while True:
            for b in self._batches():
                last = b.offset
                if mark is not None:
                    b.offset = {**b.offset, MARK: mark}
                yield b
            if self._stop:
                return
            with self._ticket_lock:
                ticket, self._ticket = self._ticket, None
                interrupted, self._interrupted = self._interrupted, False
                if ticket is not None:
                    ticket.taken.set()
            if ticket is None and not interrupted:
                return  # the stream ended (bounded mode, --max-seconds)
            assert self._stream is not None
            self._stream.close()
            if ticket is None:  # a move that was withdrawn: go on where the stream stopped
                self._begin(self.tables, last)
                continue
            target = dict(ticket.offset)
            log.info(
                "set-binlog-position: the stream moves from %s:%s to %s:%s%s",
                last.get("file"),
                last.get("pos"),
                target["file"],
                target["pos"],
                f" (GTIDs {target['gtids']})" if target.get("gtids") else "",
            )
            self._fresh = False
            self._begin(self.history.recover(target), target)
            mark = self.repositioned_by = ticket.key
            yield Batch([], {**target, MARK: mark}, extra={"more": False, "repositioned": True})

    def _batches(self) -> Iterator[Batch]:
        """Records cut into batches at transaction ends; inside a transaction larger than
        max.batch.size also after any row, with the offset of that row (event/row skip counts),
        so memory stays bounded and a restart resumes exactly there.

        A batch cut for size or time while the next binlog event is already buffered carries
        `extra["more"] = True` (the engine may write it while this decodes the next one, and
        merge such batches into one sink commit); once nothing is buffered any more at a
        transaction boundary, a batch without `more` follows (empty if need be), so an idle
        stream never leaves a batch held by the engine (the engine merges `extra` into a held
        batch, so every batch says `more` explicitly)."""
        assert self._stream is not None and self._translator is not None
        tr, stream = self._translator, self._stream
        feed, row, tx_end = tr.feed, self._row, self._tx_end
        tx_meta, max_batch, poll_s = self.tx_meta, self.max_batch, self.poll_s
        pending: list[Record] = []
        last_cut = time.monotonic()
        offset = dict(self._start)
        start_key = offset_key(self._start)
        next_hb = time.monotonic() + self.heartbeat_s if self.heartbeat_s else None
        n_tx = 0
        cover = self._cover
        more = False  # the last batch was cut with more events buffered
        if self.until_caught_up:  # the server's position now is where bounded mode stops
            cur = self._conn.cursor()
            tfile, tpos, _ = current_position(cur)
            cur.close()
            self._target = (file_index(tfile), tpos)
        if self._fresh:
            yield Batch([], offset)  # remember where streaming starts, even if nothing changes
        try:
            for ev in stream.events():
                for item in feed(ev):
                    # One type() per item, compared by identity (the hot loop); mypy does not narrow
                    # `item` through the stored `t`, hence the arg-type ignores below.
                    t = type(item)
                    if t is RowChange:
                        offset = item.offset
                        if cover is not None and item.pos[:2] >= cover.until:
                            cover = self._cover = None  # past the lock-free snapshot's last chunk
                        if item.pos <= start_key or (cover is not None and cover.skips(item)):
                            if tx_meta:
                                row([], item)  # type: ignore[arg-type]  # emitted before (or snapshotted): count only
                            continue
                        row(pending, item)  # type: ignore[arg-type]
                        if len(pending) >= max_batch:
                            more = stream.buffered()
                            yield Batch(pending, offset, extra={"transactions": n_tx, "more": more})
                            pending, last_cut, n_tx = [], time.monotonic(), 0
                    elif t is TxEnd:
                        offset = item.offset
                        n_tx += 1
                        if tx_meta:
                            tx_end(pending, item)  # type: ignore[arg-type]
                    elif t is SchemaChange:
                        if pending or more:
                            yield Batch(pending, offset, extra={"transactions": n_tx, "more": False})
                            pending, n_tx, more = [], 0, False
                        self._schema_change(pending, item)  # type: ignore[arg-type]
                        offset = item.offset
                        yield Batch(pending, offset)
                        pending, last_cut = [], time.monotonic()
                    elif t is Truncate:
                        offset = item.offset
                        if item.pos > start_key and not (
                            self._cover is not None and self._cover.truncate(item.db, item.table, item.pos)  # type: ignore[union-attr]
                        ):
                            self._truncate(pending, item)  # type: ignore[arg-type]
                if tr._tx is None:
                    kind = ev.kind
                    if kind == "heartbeat" or kind == "rotate":
                        offset = tr.offset()
                    now = time.monotonic()
                    waiting = stream.buffered()
                    if pending and (
                        len(pending) >= max_batch
                        or now - last_cut >= poll_s
                        or kind == "heartbeat"
                        # caught up: nothing more to batch with (as the PostgreSQL source); the
                        # engine merges the batches cut while a sink write is in flight
                        or not waiting
                    ):
                        more = kind != "heartbeat" and waiting
                        yield Batch(pending, offset, extra={"transactions": n_tx, "more": more})
                        pending, last_cut, n_tx = [], now, 0
                    elif more and not waiting:
                        # Caught up after a batch cut with more waiting: the engine commits now.
                        more = False
                        yield Batch(pending, offset, extra={"transactions": n_tx, "more": False})
                        pending, last_cut, n_tx = [], now, 0
                    elif (
                        kind == "heartbeat"
                        and not more
                        and self.wants_position is not None
                        and self.wants_position()
                    ):
                        yield Batch(pending, offset, extra={"transactions": n_tx, "more": False})
                        pending, last_cut, n_tx = [], now, 0
                    if next_hb is not None and now >= next_hb:
                        next_hb = now + self.heartbeat_s
                        if pending or more:
                            yield Batch(pending, offset, extra={"transactions": n_tx, "more": False})
                            pending, last_cut, n_tx, more = [], now, 0, False
                        yield self._heartbeat(tr.offset())
                    if self._target is not None and (file_index(tr.file), tr._next_pos) >= self._target:
                        break
                if self._stop or (self.deadline is not None and time.monotonic() > self.deadline):
                    break
        except UnparseableDdlError as e:
            raise TerminalError(
                str(e), "fix the statement support or set schema.history.internal.skip.unparseable.ddl=true"
            ) from None
        except UnknownColumnType as e:
            raise TerminalError(
                str(e),
                f"exclude the column (column.exclude.list={e.table}.{e.column}), or set "
                "event.processing.failure.handling.mode=warn to skip the rows of "
                "that table (each logged)",
            ) from None
        if tr._tx is None:
            offset = tr.offset()
        if pending or more or offset != self._start:
            yield Batch(pending, offset, extra={"transactions": n_tx, "more": False})

    def _heartbeat(self, off: dict[str, Any]) -> Batch:
        if self.heartbeat_query:
            with self._conn.cursor() as cur:
                cur.execute(self.heartbeat_query)
        return Batch(
            [env.heartbeat(self.namer.heartbeat_topic, self.cfg.topic_prefix)], off, extra={"heartbeat": True}
        )

    # ------------------------------------------------------------------ transaction metadata
    def _block(self, out: list[Record], rc: RowChange, collection: str) -> dict[str, Any] | None:
        """Count one event of the transaction; with provide.transaction.metadata emit BEGIN
        before its first event and return the envelope's `transaction` block."""
        counts = self._tx_counts
        if counts is None or self._tx_id != rc.txn_id:
            counts = self._tx_counts = TxCounts()
            self._tx_id = rc.txn_id
        n = counts.count_event(collection)
        if not self.tx_meta:
            return None
        txmeta.begin_once(
            out, counts, self.namer.transaction_topic, rc.txn_id, rc.source.ts_ms, rc.offset, rc.pos
        )
        return txmeta.block(rc.txn_id, counts, n)

    def _tx_end(self, out: list[Record], end: TxEnd) -> None:
        counts, self._tx_counts = self._tx_counts, None
        if not self.tx_meta or counts is None or self._tx_id != end.txn_id or not counts.begun:
            return
        out.append(
            txmeta.end_record(
                self.namer.transaction_topic,
                end.txn_id,
                counts,
                end.ts_ms,
                end.offset,
                offset_key(end.offset),
            )
        )

    def _row(self, out: list[Record], rc: RowChange) -> None:
        ts = self._table_schema(rc.db, rc.table, rc.table_model)
        op, off, pos = rc.op, rc.offset, rc.pos
        raw_before, raw_after = rc.before, rc.after  # an update has both, an insert after, a delete before
        if op == "u" and ts.key_names:
            assert raw_before is not None and raw_after is not None
            old_key, new_key = ts.key(raw_before), ts.key(raw_after)
            if old_key != new_key:
                coll = ts.collection
                key_change(
                    out,
                    ts,
                    old_key,
                    new_key,
                    ts.row(raw_before),
                    ts.row(raw_after),
                    self._source(rc.source),
                    lambda: self._block(out, rc, coll),
                    skipped=self.skipped,
                    tombstones=self.tombstones,
                    offset=off,
                    pos=(pos, pos, pos),
                )
                return
        if op in self.skipped:
            return
        before: dict[str, Any] | None = None
        after: dict[str, Any] | None = None
        if raw_after is not None:
            key = ts.key(raw_after)
            after = ts.row(raw_after)
            if raw_before is not None:
                before = ts.row(raw_before)
        else:
            assert raw_before is not None
            key = ts.key(raw_before)
            before = ts.row(raw_before)
        # Values are converted before the transaction counters move; without transaction
        # metadata nothing reads those counters.
        block = self._block(out, rc, ts.collection) if self.tx_meta else None
        s = rc.source
        ms = s.ts_ms
        ns = time_ns()
        # _source and env.change_value inlined: this runs once per row event.
        value = {
            "before": before,
            "after": after,
            "source": {
                "version": VERSION,
                "connector": self.connector,
                "name": self._prefix,
                "ts_ms": ms,
                "snapshot": "false",
                "db": s.db,
                "sequence": None,
                "ts_us": ms * 1000,
                "ts_ns": ms * 1_000_000,
                "table": s.table,
                "server_id": s.server_id,
                "gtid": s.gtid,
                "file": s.file,
                "pos": s.pos,
                "row": s.row,
                "thread": s.thread,
                "query": s.query,
            },
            "transaction": block,
            "op": op,
            "ts_ms": ns // 1_000_000,
            "ts_us": ns // 1000,
            "ts_ns": ns,
        }
        out.append(
            Record(ts.topic, key, value, ts.key_schema, ts.envelope_schema, (), ts.collection, off, pos)
        )
        if op == "d" and self.tombstones:
            out.append(
                Record(ts.topic, key, None, ts.key_schema, ts.envelope_schema, (), ts.collection, off, pos)
            )

    def _unchanged(self, out: list[Record], rc: RowChange) -> bool:
        return (
            rc.op == "u"
            and rc.before is not None
            and rc.after is not None
            and unchanged_update(self._table_schema(rc.db, rc.table, rc.table_model), rc.before, rc.after)
        )

    def _truncate(self, out: list[Record], t: Truncate) -> None:
        if (
            "t" in self.skipped
            or not self.filters.captures(t.db, t.table)
            or self.tables.get(t.db, t.table) is None
        ):
            return
        ts = self._table_schema(t.db, t.table, None)
        s = t.source
        s.table = t.table
        value = env.change_value(None, None, self._source(s), "t", None)
        out.append(
            Record(ts.topic, None, value, None, ts.envelope_schema, (), ts.collection, t.offset, t.pos)
        )

    def _schema_change(self, out: list[Record], sc: SchemaChange) -> None:
        changes: list[TableChange] = sc.result.changes
        db_charset = self.tables.db_charsets.get(sc.db)
        # The record's GTID set includes the statement itself (see DeltaSchemaHistory.recover).
        gtids = str(GtidSet.parse(sc.gtids_before).add(sc.source.gtid)) if sc.source.gtid else sc.gtids_before
        # the statement's GTID-event position (sc.pos[1]), which offsets before/after it bracket
        self.history.record(
            [
                HistoryRecord(
                    sc.source.file,
                    sc.pos[1],
                    gtids,
                    sc.db,
                    sc.ddl,
                    changes,
                    server_id=sc.source.server_id,
                    db_charset=db_charset,
                    ts_ms=sc.source.ts_ms,
                )
            ]
        )
        for cached in list(self._schemas):
            if cached[0] == sc.db:
                self._schemas.pop(cached, None)
        if self.on_schema_change is not None and changes:
            self.on_schema_change([f"{c.db}.{c.table}" for c in changes], sc.pos)
        if not self.include_schema_changes:
            return
        if changes and not any(self.filters.captures(c.db, c.table) for c in changes):
            return
        if not changes and not self.filters.namespace(sc.db):
            return
        key, value = schema_change_value(
            self._source(sc.source), int(time.time() * 1000), sc.db, sc.ddl, changes
        )
        out.append(
            Record(
                self.namer.schema_change_topic,
                key,
                value,
                self.sc_key_schema,
                self.sc_value_schema,
                (),
                None,
                sc.offset,
                sc.pos,
                schema_change=True,
            )
        )


__all__ = ["MySqlSource", "offset_key"]


def _where(out: list[Record], rc: RowChange) -> str:
    return f"change of {rc.db}.{rc.table} at {rc.source.file}:{rc.source.pos} row {rc.source.row}"
