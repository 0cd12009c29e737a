"""MySQL/MariaDB initial snapshots: Debezium's lock-based consistent read, planned into key chunks,
each chunk read into change-log rows.

The view. MySQL cannot hand a consistent snapshot from one connection to another (PostgreSQL's
exported snapshot has no MySQL equivalent), so a `View` owns its readers: `N` connections that
each ran `START TRANSACTION WITH CONSISTENT SNAPSHOT` while no write could commit (as Debezium's
parallel snapshot does), so all N see the same data — the data at the binlog position read under
the same lock. `read_chunk` borrows one of them for the duration of a chunk (`View.reader()`), so
at most N chunks are read at once and every chunk is read inside the view. This is why the job
must run MySQL chunk reads in driver threads (a `ThreadPoolExecutor` of N), not in Spark tasks:
executors cannot reach the driver's connections.

`snapshot.locking.mode` (Debezium's `BinlogSnapshotChangeEventSource`):
- `minimal` (default): `FLUSH TABLES WITH READ LOCK` on a separate lock connection (or, where
  the global lock is refused, `FLUSH TABLES <captured tables> WITH READ LOCK`), held while the
  readers start their transactions and the binlog position and the schema are read, then
  released before any data is read. The lock connection is not a reader, so unlike Debezium
  table locks are released early too (Debezium cannot: its UNLOCK TABLES would commit its own
  snapshot transaction).
- `extended`: the same lock held until the view is closed (writes blocked for the whole snapshot).
- `none`: no lock. MariaDB reports each consistent snapshot's own binlog position
  (`binlog_snapshot_file` / `binlog_snapshot_position` status variables), so N readers are one
  view exactly when they all report the same position (retried, else one reader). MySQL has no
  such variable: its position is read right after the readers start (Debezium does the same: a
  change committed in between may be both in the snapshot and streamed), and N readers are
  trusted to agree only when the server position did not move while they started.
`snapshot.lock.timeout.ms` is the lock statements' `lock_wait_timeout` (whole seconds, at least 1).

The schema snapshot is `MySqlSource._schema_snapshot` at the view's position (the records the
streaming source writes on a first start, `event = SNAPSHOT_EVENT`), read while the lock is held;
`schema_change_records` gives the schema change events Debezium's snapshot emits before the data
when `include.schema.changes` is on.

A resumed snapshot (`fresh_view`) reads its remaining chunks in a new view, later than the first;
the stream, which starts at the first view's position, reconciles them. Its schema is the schema
history's at that position (the history is not rewritten).

Chunks: the key is the table's key as streaming emits it (primary key, or `message.key.columns`).
A one-column integer primary key is split by its range (`int_bounds`: a candidate every
`tidemark.snapshot.chunk.rows` values, each moved down to an existing key by one index dive)
unless the key is too sparse for that. Other keys: boundaries are every
`tidemark.snapshot.chunk.rows`-th key, walked along the key index inside the view (`LIMIT 2
OFFSET n-1` after the previous boundary: only the boundaries travel). Boundaries are bound back
as literals of the column's type, composite keys compared column by column (`_range`). Keys
with ENUM/SET/floating-point columns (whose order differs from their literals' order, or is not
exact) or nullable columns, and keyless tables are one chunk.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pymysql
import pymysql.cursors

from connectors.api import Record, TerminalError, TransientError
from connectors.format.envelope import VERSION
from connectors.settings.config import ConnectorConfig
from connectors.settings.model import MySqlSettings
from connectors.settings.overrides import parse_override
from connectors.settings.values import compile_regex
from connectors.snapshot.chunks import Chunk, table_chunks
from connectors.snapshot.grant_check import FILTERS, Denied, refuse_unreadable
from connectors.snapshot.int_bounds import range_boundaries
from connectors.snapshot.override_check import check_overrides
from connectors.snapshot.reading import chunk_context, config_of, marked_pieces, select_text
from connectors.sources.mysql import setup
from connectors.sources.mysql.connection import current_position
from connectors.sources.mysql.ddl import TableChange
from connectors.sources.mysql.history import SNAPSHOT_EVENT, schema_change_value
from connectors.sources.mysql.model import Table, Tables
from connectors.sources.mysql.quoting import quote_ident, quote_table
from connectors.sources.mysql.snapshot_read import SESSION_STATEMENTS, SnapshotRows, TextResult
from connectors.sources.mysql.source import SYSTEM_DBS, TABLE_TYPES, MySqlSource

log = logging.getLogger(__name__)

LOCKING_MODES = ("minimal", "extended", "none")
_INT_TYPES = frozenset(
    {"TINYINT", "INT1", "SMALLINT", "INT2", "MEDIUMINT", "INT3", "MIDDLEINT", "INT", "INTEGER", "INT4"}
    | {"BIGINT", "INT8", "SERIAL", "YEAR", "BOOL", "BOOLEAN"}
)
_EXACT_NUMBER = frozenset({"DECIMAL", "DEC", "FIXED", "NUMERIC"})
_BINARY = frozenset({"BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BIT"})
# literal order ≠ index order (ENUM/SET sort by index), or inexact (floats), or not comparable
_UNCHUNKABLE = frozenset({"ENUM", "SET", "FLOAT", "FLOAT4", "REAL", "DOUBLE", "FLOAT8", "JSON", "GEOMETRY"})
_NONE_ATTEMPTS = 5  # lock-free (locking mode none) tries at N agreeing readers
METHOD_WATERMARKS = "watermarks"  # tidemark.snapshot.mysql.method of the lock-free method (watermarks.py)


def _settings(cfg: ConnectorConfig) -> MySqlSettings:
    assert isinstance(cfg.source, MySqlSettings)
    return cfg.source


_DENIED = {1142: "no SELECT", 1143: "no SELECT on some of its columns"}  # table/column access denied


def _included(include: list[Any], db: str, table: str) -> bool:
    """Whether snapshot.include.collection.list (compiled; empty: every captured table) names it."""
    return not include or any(p.fullmatch(f"{db}.{table}") for p in include)


def _code(e: BaseException) -> int:
    return e.args[0] if e.args and isinstance(e.args[0], int) else 0


@dataclass
class View:
    """A consistent view: its readers, its binlog position, the schema at that position."""

    file: str
    pos: int
    gtids: str
    ts_ms: int  # the view's time: source.ts_ms of the schema change events (data: table_ts_ms)
    tables: Tables = field(repr=False)
    readers: list[Any] = field(repr=False)  # connections inside START TRANSACTION WITH CONSISTENT SNAPSHOT
    lock_conn: Any = field(default=None, repr=False)  # holds the lock (extended); closed by close()
    locking: str = "minimal"
    fresh: bool = False  # a resumed snapshot's later view
    _pool: queue.Queue[Any] = field(default_factory=queue.Queue, repr=False)
    _closed: bool = False
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _table_ts: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for r in self.readers:
            self._pool.put(r)

    @property
    def name(self) -> str:
        """An identifier of the view (the job passes a snapshot name to its tasks)."""
        return f"{self.file}:{self.pos}"

    @contextlib.contextmanager
    def reader(self) -> Iterator[Any]:
        """Borrow one reader connection (blocks while all N are busy)."""
        conn = self._pool.get()
        try:
            yield conn
        finally:
            self._pool.put(conn)

    def table_ts_ms(self, table: str) -> int:
        """source.ts_ms of a table's data records: Debezium's is the server's CURRENT_TIMESTAMP
        (whole seconds) read when the table's export starts, so here the time its first chunk
        started (the chunks of a table run in parallel; all share it)."""
        with self._guard:
            return self._table_ts.setdefault(table, int(time.time()) * 1000)

    def close(self) -> None:
        """End the readers' transactions and release a held lock."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
        for c in [*self.readers, self.lock_conn]:
            if c is None:
                continue
            try:
                c.close()
            except pymysql.err.MySQLError:
                pass


def position(view: View) -> dict[str, Any]:
    """The consistency point as a MySQL/MariaDB source offset (the keys streaming stores):
    streaming resumes there (by GTID set when the server has GTIDs)."""
    return {
        "file": view.file,
        "pos": view.pos,
        "gtids": view.gtids,
        "event": 0,
        "row": 0,
        "server_id": 0,
        "ts_sec": view.ts_ms // 1000,
        "snapshot": True,
    }


def source_block(cfg: ConnectorConfig, db: str, table: str | None, pos: Mapping[str, Any], ts_ms: int) -> Any:
    """marker → the `source` block of a snapshot record (BinlogSourceInfo during a snapshot: the
    view's file/pos, row 0, server_id 0, no gtid, thread or query)."""
    connector = "mariadb" if cfg.connector == "mariadb" else "mysql"

    def block(marker: str) -> dict[str, Any]:
        return {
            "version": VERSION,
            "connector": connector,
            "name": cfg.topic_prefix,
            "ts_ms": ts_ms,
            "snapshot": marker,
            "db": db,
            "sequence": None,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "table": table,
            "server_id": 0,
            "gtid": None,
            "file": pos.get("file"),
            "pos": pos.get("pos"),
            "row": 0,
            "thread": None,
            "query": None,
        }

    return block


class MySqlSnapshotter:
    """The driver's side: the view, the schema snapshot, the chunk plan."""

    def __init__(self, cfg: ConnectorConfig) -> None:
        self.cfg = cfg
        self.src = _settings(cfg)
        # The streaming source's schema code (table schemas, filters, the schema snapshot), unopened.
        self.source = MySqlSource(cfg)
        self.settings = self.source.settings
        self._conn = setup.connect(self.settings)
        self.mariadb = "mariadb" in self._version().lower()
        self.locking = cfg.source.snapshot_locking_mode
        self.watermarks = cfg.runtime.snapshot_mysql_method == METHOD_WATERMARKS
        if self.locking not in LOCKING_MODES:
            raise TerminalError(
                f"snapshot.locking.mode={self.locking} is not supported by Tidemark's MySQL/MariaDB snapshot",
                f"use one of {', '.join(LOCKING_MODES)}",
            )
        timeout_ms = cfg.source.snapshot_lock_timeout_ms
        self.lock_timeout_s = max(1, math.ceil(timeout_ms / 1000))
        self.schema_records: list[dict[str, Any]] = []

    def _version(self) -> str:
        with self._conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return str(cur.fetchone()[0])

    def close(self) -> None:
        with contextlib.suppress(pymysql.err.MySQLError):
            self._conn.close()

    # ------------------------------------------------------------------ what is stored
    def resumable(self, offset: Mapping[str, Any] | None) -> bool:
        """Whether streaming can resume from `offset` (its binlog file is on the server; on MySQL
        its GTIDs not purged)."""
        if not offset:
            return True
        try:
            setup.check_position(self._conn, offset, self.mariadb)
        except TerminalError:
            return False
        return True

    # ------------------------------------------------------------------ the view
    def export(self, *, reset: bool = False, stream: bool = True, readers: int | None = None) -> View:
        """A consistent view with `readers` connections (default snapshot.max.threads), its
        binlog position, and the schema snapshot recorded in the schema history at it.
        `reset`/`stream` are the job's decision flags: a binlog view needs no slot, so neither
        changes how it is taken (the stale offsets are reset by the job)."""
        del reset, stream
        return self._view(readers, fresh=False)

    def fresh_view(self, readers: int | None = None) -> View:
        """A new view for a resumed snapshot: its schema from the history, nothing rewritten."""
        return self._view(readers, fresh=True)

    def _reader(self) -> Any:
        conn = setup.connect(self.settings)
        with conn.cursor() as cur:
            for stmt in SESSION_STATEMENTS:
                cur.execute(stmt)
        return conn

    def _start(self, readers: list[Any]) -> None:
        for r in readers:
            with r.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")

    def _snapshot_position(self, conn: Any) -> tuple[str, int] | None:
        """MariaDB: the binlog position of this connection's consistent snapshot."""
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
            st = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        if "binlog_snapshot_file" not in st or not st.get("binlog_snapshot_file"):
            return None
        return st["binlog_snapshot_file"], int(st["binlog_snapshot_position"])

    def _lock(self, conn: Any, captured: list[tuple[str, str]]) -> str:
        """Take the global read lock, else table read locks; return which ("global"/"tables")."""
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION lock_wait_timeout = {self.lock_timeout_s}")
            try:
                cur.execute("FLUSH TABLES WITH READ LOCK")
                return "global"
            except pymysql.err.OperationalError as e:
                if _code(e) == 1205:
                    raise self._lock_timeout("FLUSH TABLES WITH READ LOCK") from None
                if _code(e) not in (1045, 1227, 1044):  # not a privilege refusal: a real error
                    raise
                log.info("the global read lock was refused (%s); locking the captured tables instead", e)
            if not captured:
                return "tables"
            names = ", ".join(quote_table(d, t) for d, t in captured)
            try:
                cur.execute(f"FLUSH TABLES {names} WITH READ LOCK")
            except pymysql.err.OperationalError as e:
                if _code(e) == 1205:
                    raise self._lock_timeout("FLUSH TABLES ... WITH READ LOCK") from None
                raise TerminalError(
                    f"snapshot.locking.mode={self.locking}: neither the global read lock nor table read locks "
                    f"could be taken ({e.args[-1] if e.args else e})",
                    "grant the connector user RELOAD (and LOCK TABLES), or set snapshot.locking.mode=none "
                    "(no lock: a change made during the schema read may be missed or doubled)",
                ) from None
        return "tables"

    def _lock_timeout(self, what: str) -> TerminalError:
        return TerminalError(
            f"{what} did not get the lock within snapshot.lock.timeout.ms "
            f"({self.lock_timeout_s}s): a long transaction or a table lock holds it",
            "find the blocking session (SHOW PROCESSLIST), let it finish or end it, or raise "
            "snapshot.lock.timeout.ms; the next start tries again",
        )

    def _captured_tables(self) -> list[tuple[str, str]]:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                "WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') ORDER BY 1, 2"
            )
            rows = [(str(d), str(t)) for d, t in cur.fetchall()]
        return [(d, t) for d, t in rows if d not in SYSTEM_DBS and self.source.filters.captures(d, t)]

    def _view(self, readers: int | None, *, fresh: bool) -> View:
        n = max(1, int(readers or self.cfg.source.snapshot_max_threads))
        if self.watermarks:
            return self._unlocked_view(fresh=fresh)
        locking = self.locking
        captured = self._captured_tables() if locking != "none" else []
        opened: list[Any] = []
        lock_conn = None
        try:
            if locking == "none":
                file, pos, gtids, opened = self._unlocked_readers(n)
            else:
                lock_conn = setup.connect(self.settings)
                t0 = time.monotonic()
                kind = self._lock(lock_conn, captured)
                opened = [self._reader() for _ in range(n)]
                self._start(opened)
                with lock_conn.cursor() as cur:
                    file, pos, gtids = current_position(cur)
            ts_ms = int(time.time() * 1000)
            tables = self._schema(file, pos, gtids, lock_conn or self._conn, fresh=fresh)
            if lock_conn is not None and locking == "minimal":
                lock_conn.close()  # UNLOCK: the readers' transactions keep the view
                lock_conn = None
                log.info(
                    "snapshot: writes were blocked for %.3fs (%s read lock, minimal locking)",
                    time.monotonic() - t0,
                    kind,
                )
        except BaseException:
            for c in [*opened, lock_conn]:
                if c is not None:
                    with contextlib.suppress(pymysql.err.MySQLError):
                        c.close()
            raise
        log.info(
            "snapshot: consistent view of %d reader(s) at %s:%s (gtids %s), locking %s",
            len(opened),
            file,
            pos,
            gtids or "-",
            locking,
        )
        return View(file, pos, gtids, ts_ms, tables, opened, lock_conn, locking, fresh)

    def _unlocked_view(self, *, fresh: bool) -> View:
        """The lock-free method's view: no lock, no consistent snapshot; its position is where
        the schema is read and the stream starts, its one reader plans the chunks (each chunk is
        read later, between its own watermarks: watermarks.py)."""
        reader = self._reader()
        try:
            with self._conn.cursor() as cur:
                file, pos, gtids = current_position(cur)
            tables = self._schema(file, pos, gtids, self._conn, fresh=fresh)
        except BaseException:
            with contextlib.suppress(pymysql.err.MySQLError):
                reader.close()
            raise
        log.info("snapshot: lock-free (watermarks) from %s:%s (gtids %s)", file, pos, gtids or "-")
        return View(
            file, pos, gtids, int(time.time() * 1000), tables, [reader], None, METHOD_WATERMARKS, fresh
        )

    def _unlocked_readers(self, n: int) -> tuple[str, int, str, list[Any]]:
        """Readers without a lock (snapshot.locking.mode=none): N that provably share one view,
        else one."""
        for attempt in range(_NONE_ATTEMPTS + 1):
            count = n if attempt < _NONE_ATTEMPTS else 1
            with self._conn.cursor() as cur:
                before = current_position(cur)
            opened = [self._reader() for _ in range(count)]
            self._start(opened)
            with self._conn.cursor() as cur:
                after = current_position(cur)
            if self.mariadb:
                spots = {self._snapshot_position(r) for r in opened}
                if len(spots) == 1 and None not in spots:
                    ((file, pos),) = spots  # type: ignore[misc]  # a one-element set of a tuple
                    gtids = self._gtid_at(file, pos) or after[2]
                    return file, pos, gtids, opened
            elif count == 1 or before == after:
                return after[0], after[1], after[2], opened
            for r in opened:
                r.close()
        raise TransientError("snapshot.locking.mode=none: could not open a consistent view", "retried")

    def _gtid_at(self, file: str, pos: int) -> str | None:
        with self._conn.cursor() as cur:
            try:
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
                r = cur.fetchone()
            except pymysql.err.MySQLError:
                return None
        return str(r[0]) if r and r[0] is not None else None

    def _schema(self, file: str, pos: int, gtids: str, conn: Any, *, fresh: bool) -> Tables:
        """The table model at the view: a new view records the schema snapshot in the history
        (as the streaming source's first start does); a resumed one recovers it from there."""
        if fresh:
            return self.source.history.recover({"file": file, "pos": pos, "gtids": gtids})
        self.source._conn = conn
        try:
            tables, _offset = self.source._schema_snapshot((file, pos, gtids))
        finally:
            self.source._conn = None
        self.schema_records = [r for r in self.source.history.records() if r["event"] == SNAPSHOT_EVENT]
        return tables

    # ------------------------------------------------------------------ schema change events
    def schema_change_records(self, view: View) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(key, value) payloads of the schema change events of the schema snapshot, in the order
        Debezium 3.6's binlog snapshot emits them (`BinlogSnapshotChangeEventSource.readTableStructure`),
        each at the view's position with snapshot "true"; empty unless include.schema.changes.
        Emit them before the data. The statements:

        1. `SET character_set_server=..., collation_server=...` (database "");
        2. `DROP TABLE IF EXISTS `db`.`t`` for every table of the schema snapshot, sorted by
           `db.table` (tableChanges: one DROP with table null: the model is empty then);
        3. per database that has such tables, in that order: `DROP DATABASE IF EXISTS`, `CREATE
           DATABASE ... CHARSET cs COLLATE coll`, `USE`, then `SHOW CREATE TABLE` of each table.

        The tables are the schema snapshot's, i.e. the schema history's: every table of every
        non-system database by default, the captured ones with
        schema.history.internal.store.only.captured.{tables,databases}.ddl. Debezium emits all of
        them, captured or not (measured: a database outside database.include.list gets its DROP
        TABLE, DROP/CREATE DATABASE, USE and CREATE TABLE events), so no capture filter here."""
        if not self.src.include_schema_changes:
            return []
        import orjson

        # (db, table) -> (SHOW CREATE TABLE text, its changes), from the history's snapshot records
        creates: dict[tuple[str, str], tuple[str, list[TableChange]]] = {}
        for r in self.schema_records:
            changes = [
                TableChange(
                    c["type"], c["db"], c["table"], Table.from_dict(c["definition"]), c.get("old_table")
                )
                for c in orjson.loads(r["table_changes"] or "[]")
            ]
            if changes:
                creates[(changes[0].db, changes[0].table)] = (r["ddl"], changes)
        # Debezium sorts table ids by their text `db.table`
        order = sorted(creates, key=lambda dt: f"{dt[0]}.{dt[1]}")
        server_vars, db_locales = self._charsets()
        pos = position(view)
        now = int(time.time() * 1000)

        def event(db: str, table: str | None, ddl: str, changes: list[TableChange]) -> tuple[Any, Any]:
            src = source_block(self.cfg, db, table, pos, view.ts_ms)("true")
            return schema_change_value(src, now, db, ddl, changes)

        out = [event("", None, server_vars, [])]
        for db, t in order:
            key, value = event(db, t, f"DROP TABLE IF EXISTS {quote_table(db, t)}", [])
            value["tableChanges"] = [{"type": "DROP", "id": f'"{db}"."{t}"', "table": None}]
            out.append((key, value))
        for db in dict.fromkeys(d for d, _ in order):  # databases in table order
            charset, collation = db_locales.get(db, (None, None))
            create = f"CREATE DATABASE {quote_ident(db)}"
            create += f" CHARSET {charset}" if charset else ""
            create += f" COLLATE {collation}" if collation else ""
            for ddl in (f"DROP DATABASE IF EXISTS {quote_ident(db)}", create, f"USE {quote_ident(db)}"):
                out.append(event(db, None, ddl, []))
            for d, t in order:
                if d == db:
                    ddl, changes = creates[(d, t)]
                    out.append(event(d, t, ddl, changes))
        return out

    def _charsets(self) -> tuple[str, dict[str, tuple[str | None, str | None]]]:
        """Debezium's `SET` statement of the server's character set variables (names sorted,
        values with `,`/`;` quoted), and each database's (character set, collation)."""
        with self._conn.cursor() as cur:
            cur.execute("SHOW VARIABLES WHERE Variable_name IN ('character_set_server', 'collation_server')")
            variables = sorted((str(k), "" if v is None else str(v)) for k, v in cur.fetchall())
            cur.execute(
                "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                "FROM information_schema.SCHEMATA"
            )
            locales = {str(d): (cs and str(cs), co and str(co)) for d, cs, co in cur.fetchall()}
        sets = ", ".join(f"{k}='{v}'" if ("," in v or ";" in v) else f"{k}={v}" for k, v in variables)
        return f"SET {sets}", locales

    # ------------------------------------------------------------------ the plan
    def plan(self, view: View, chunk_rows: int) -> tuple[list[Chunk], dict[str, Any]]:
        """The chunks of every table the snapshot reads, planned inside the view."""
        include = [compile_regex(str(p)) for p in self.cfg.source.snapshot_include_collection_list]
        names = [
            (t.db, t.name)
            for db in sorted(view.tables.db_charsets)
            for t in sorted(view.tables.in_db(db), key=lambda t: t.name)
            if self.source.filters.captures(t.db, t.name)
        ]
        self._check_includes(include, names)
        picked = [(d, t) for d, t in names if _included(include, d, t)]
        order = self.cfg.source.snapshot_tables_order_by_row_count
        with view.reader() as conn, conn.cursor() as cur:
            counts = self._estimates(cur, picked)  # (one query: ordering and integer-key plans)
            if order != "disabled":
                picked.sort(key=lambda dt: counts.get(dt, 0), reverse=order == "descending")
            filled = [self._has_rows(cur, d, t) for d, t in picked]
            last_filled = max((i for i, f in enumerate(filled) if f), default=-1)
            chunks: list[Chunk] = []
            for ti, (d, t) in enumerate(picked):
                bounds = (
                    self._boundaries(cur, view, d, t, chunk_rows, counts.get((d, t), 0)) if filled[ti] else []
                )
                chunks += table_chunks(
                    f"{d}.{t}", len(chunks), ti, len(picked), bounds, last_table=ti == last_filled
                )
        detail = {"tables": len(picked), "kind": "initial", "locking": view.locking}
        if self.watermarks:
            detail["method"] = METHOD_WATERMARKS
        return chunks, detail

    def _check_includes(self, include: list[Any], names: list[tuple[str, str]]) -> None:
        full = [f"{d}.{t}" for d, t in names]
        for pat, text in zip(include, self.cfg.source.snapshot_include_collection_list, strict=True):
            if not any(pat.fullmatch(n) for n in full):
                raise TerminalError(
                    f"snapshot.include.collection.list: {text!r} matches no captured table",
                    f"captured tables: {', '.join(full[:20]) or 'none'}; snapshot.include.collection.list "
                    "must name tables the connector captures (database/table include and exclude lists)",
                )

    def _estimates(self, cur: Any, tables: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The server's estimated row counts (TABLE_ROWS; InnoDB samples them) of the databases
        of `tables`."""
        dbs = sorted({d for d, _ in tables})
        if not dbs:
            return {}
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA IN ({', '.join(['%s'] * len(dbs))})",
            dbs,
        )
        return {(str(d), str(t)): int(n or 0) for d, t, n in cur.fetchall()}

    def preflight(self, *, stream: bool) -> None:
        """What a snapshot needs of the server, checked before any lock is taken: when a stream
        follows, the binlog settings and grants streaming needs (as Debezium checks them before its
        snapshot, so a wrong binlog_format is not found after a whole snapshot); the binlog
        position (and, for the lock-free method, the grants to read the binlog); SELECT on each
        table it reads; then each override."""
        if stream:
            setup.check_server(self._conn)
        with self._conn.cursor() as cur:
            current_position(cur)  # a snapshot needs its binlog position even when no stream follows
            if self.watermarks and not stream:
                setup.check_grants(cur)  # its tasks read the binlog between each chunk's watermarks
        self._conn.rollback()
        self.check_reads()

    def check_reads(self, labels: Mapping[str, str] | None = None, scope: str = FILTERS) -> None:
        """That the user may read each table the snapshot reads (chosen by `scope`), then each of
        their overrides (named by `labels`)."""
        self.check_grants(scope)
        self.check_overrides(labels)

    def check_grants(self, scope: str = FILTERS) -> None:
        """The tables the snapshot reads that the user may not SELECT (grant_check.py), found by
        trying each read for no row: MySQL's grants (roles, wildcards, column grants) are the
        server's to judge. A table the user holds no privilege on at all is hidden from it, in
        information_schema as in SHOW TABLES, and so is not captured (as for Debezium)."""
        include = [compile_regex(str(p)) for p in self.cfg.source.snapshot_include_collection_list]
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN {TABLE_TYPES}"
            )
            names = sorted(
                (str(d), str(t))
                for d, t in cur.fetchall()
                if d not in SYSTEM_DBS and self.source.filters.captures(d, t) and _included(include, d, t)
            )
            cur.execute("SELECT CURRENT_USER()")
            name, _, host = str(cur.fetchone()[0]).rpartition("@")
        self._conn.rollback()
        user = f"'{name}'@'{host}'"
        denied: dict[tuple[str, str], str] = {}
        for db, table in names:
            refused = self._refusal(f"SELECT * FROM {quote_table(db, table)} LIMIT 0")
            if refused is not None:
                code, reason = refused
                denied[db, table] = _DENIED.get(code, reason)
        grants = []  # MySQL grants one table per statement: a database's at once when several
        for db in sorted({d for d, _ in denied}):
            tables = [t for d, t in denied if d == db]
            on = "*" if len(tables) > 1 else quote_ident(tables[0])
            grants.append(f"GRANT SELECT ON {quote_ident(db)}.{on} TO {user}")
        refuse_unreadable(
            user, [Denied(f"{d}.{t}", why) for (d, t), why in denied.items()], "; ".join(grants), scope
        )

    def check_overrides(self, labels: Mapping[str, str] | None = None) -> None:
        """Each override of a captured table, tried before any lock is taken (override_check.py)."""
        check_overrides(
            self.src.select_overrides, self.source.filters.captures, quote_ident, self._trial, "mysql", labels
        )

    def _trial(self, query: str) -> str | None:
        refused = self._refusal(query)
        return None if refused is None else refused[1]

    def _refusal(self, query: str) -> tuple[int, str] | None:
        """The server's (code, reason) when it refuses to run `query`; None when it runs."""
        try:
            with self._conn.cursor() as cur:
                cur.execute(query)
        except pymysql.err.MySQLError as e:
            code = _code(e)
            if code == 1146:  # no such table: not snapshotted
                return None
            if code == 0 or 2000 <= code < 3000:  # the client's (a lost connection): not the statement
                raise
            return code, str(e.args[1]) if len(e.args) > 1 else str(e)
        finally:
            self._conn.rollback()  # no transaction left open on the connection the lock takes
        return None

    def _override(self, db: str, table: str) -> Any:
        text = self.src.select_overrides.get(f"{db}.{table}")
        return None if text is None else parse_override(f"{db}.{table}", text, "mysql")

    def _has_rows(self, cur: Any, db: str, table: str) -> bool:
        ov = self._override(db, table)
        if ov is None:
            cur.execute(f"SELECT 1 FROM {quote_table(db, table)} LIMIT 1")
        elif ov.chunkable and ov.where:
            # The override passed parse_override: one SELECT of this table, its condition only.
            cur.execute(f"SELECT 1 FROM {quote_table(db, table)} WHERE {ov.where} LIMIT 1")
        else:
            cur.execute(f"SELECT 1 FROM ({ov.sql}) AS snapshot_override LIMIT 1")
        return cur.fetchone() is not None

    def _boundaries(
        self, cur: Any, view: View, db: str, table: str, chunk_rows: int, estimate: int
    ) -> list[tuple[Any, ...]]:
        t = view.tables.get(db, table)
        assert t is not None
        key = key_columns(self.source, view.tables, db, table)
        ov = self._override(db, table)
        if not key or (ov is not None and not ov.chunkable) or not chunkable_key(t, key):
            return []
        if self.watermarks and not int_key(t, key):  # a window is folded in by integer key only
            return []
        if len(key) == 1 and int_key(t, key) and [k.lower() for k in t.primary_key] == [key[0].lower()]:
            planned = range_boundaries(
                cur,
                quote_table(db, table),
                quote_ident(key[0]),
                chunk_rows,
                estimate,
                lambda e: f"CAST({e} AS CHAR)",
            )
            if planned is not None:  # else too sparse: walk
                return planned
        # Each boundary is the chunk_rows-th key after the previous one, walked along the key
        # index inside the view (`LIMIT 2 OFFSET chunk_rows - 1`: the second row says the chunk
        # after it is not empty). On 2M rows this reads the index once, ~1.0 s; the COUNT(*)
        # and ROW_NUMBER() sample it replaced took 4.9-5.1 s (MariaDB materialises the window).
        cols = ", ".join(quote_ident(c) for c in key)
        texts = ", ".join(key_text(t, c) for c in key)
        literals = {c: key_literal(t, c, cur.connection) for c in key}
        bounds: list[tuple[Any, ...]] = []
        while True:
            after = Chunk(f"{db}.{table}", 0, bounds[-1] if bounds else None, None)
            where = f" WHERE {_range(key, after, literals)}" if bounds else ""
            # (no driver parameters: the literals are quoted already, a % in them stays as it is)
            cur.execute(
                f"SELECT {texts} FROM {quote_table(db, table)}{where} "
                f"ORDER BY {cols} LIMIT 2 OFFSET {max(1, int(chunk_rows)) - 1}"
            )
            found = cur.fetchall()
            if len(found) < 2:
                return bounds
            bounds.append(tuple(found[0]))


# --------------------------------------------------------------------------- keys
def key_columns(source: MySqlSource, tables: Tables, db: str, table: str) -> list[str]:
    """The key streaming emits for the table (primary key or message.key.columns)."""
    source.tables = tables
    return list(source._table_schema(db, table, tables.get(db, table)).key_names)


def int_key(t: Table, key: Sequence[str]) -> bool:
    """Whether every key column is an integer type (a lock-free chunk's window is applied by key)."""
    cols = [t.column(k) for k in key]
    return bool(key) and all(c is not None and c.base_type in _INT_TYPES for c in cols)


def chunkable_key(t: Table, key: Sequence[str]) -> bool:
    """Whether the table can be read in key ranges: not with ENUM/SET/floating-point/spatial key
    columns (see the module doc), nor with a nullable one (`message.key.columns` may name one: a
    NULL is in no range, and the whole table is one chunk instead)."""
    for name in key:
        c = t.column(name)
        if c is None or c.base_type in _UNCHUNKABLE or c.base_type in _SPATIAL or c.optional:
            return False
    return True


_SPATIAL = frozenset(
    {"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION"}
)


def key_text(t: Table, name: str) -> str:
    """The SELECT expression that reads a key column as the text its literal is made from:
    binary columns as hex (bound back as X'..'), the rest as the server prints them."""
    c = t.column(name)
    assert c is not None
    if c.base_type in _BINARY:
        return f"HEX({quote_ident(name)})"
    return f"CAST({quote_ident(name)} AS CHAR)"


def key_literal(t: Table, name: str, conn: Any) -> Any:
    """value (as `key_text` read it) → SQL literal of the column's type: integers and decimals
    unquoted (a quoted number compares as a double: wrong past 2**53), binary as X'hex', the rest
    quoted by the driver (temporal and character keys compare in their own type/collation)."""
    c = t.column(name)
    assert c is not None
    base = c.base_type

    def literal(v: Any) -> str:
        if base in _INT_TYPES:
            return str(int(v))
        if base in _EXACT_NUMBER:
            import decimal

            return str(decimal.Decimal(str(v)))
        if base in _BINARY:
            return "X'" + bytes.fromhex(str(v)).hex() + "'"
        return str(conn.escape(str(v)))

    return literal


# --------------------------------------------------------------------------- reading a chunk
def read_chunk(
    raw: Mapping[str, str] | ConnectorConfig,
    chunk: Chunk,
    view: View,
    pos: Mapping[str, Any],
    headers: tuple[tuple[str, bytes], ...],
) -> Iterator[pa.Table]:
    """The change-log rows of one chunk, read inside `view` on one of its readers (borrowed for
    the whole chunk), as Arrow tables of at most snapshot.fetch.size rows: an unbuffered cursor
    (`SSCursor`), so memory is bounded by that, not by the chunk. Runs in a driver thread."""
    cfg = raw if isinstance(raw, ConnectorConfig) else config_of(raw)
    db, _, name = chunk.table.partition(".")
    t = view.tables.get(db, name)
    if t is None:
        log.warning(
            "snapshot: table %s is not in the view's schema; its chunk %d is skipped",
            chunk.table,
            chunk.index,
        )
        return
    source = MySqlSource(cfg)
    source.tables = view.tables
    ts = source._table_schema(db, name, t)
    encoder = SnapshotRows(ts, t.columns, source.types)
    ctx = chunk_context(
        cfg, chunk, ts, source_block(cfg, db, name, pos, view.table_ts_ms(chunk.table)), headers
    )
    fetch = cfg.source.snapshot_fetch_size or 10240
    with view.reader() as conn:
        query = chunk_query(cfg, chunk, t, ts, encoder, conn)
        for pieces, encode in select_pieces(conn, query, chunk, encoder, fetch):
            yield from marked_pieces(chunk, ctx, pieces, encode, len)


def chunk_query(
    cfg: ConnectorConfig, chunk: Chunk, t: Table, ts: Any, encoder: SnapshotRows, conn: Any
) -> str:
    """The SELECT of a chunk: the table's columns in its key range, with its select override."""
    db, _, name = chunk.table.partition(".")
    key = list(ts.key_names)
    literals = {c: key_literal(t, c, conn) for c in key} if chunkable_key(t, key) else {}
    cond: list[str] = []
    if literals and (chunk.lower is not None or chunk.upper is not None):
        cond.append(_range(key, chunk, literals))
    source_sql = f"{quote_ident(db)}.{quote_ident(name)}"
    override = _settings(cfg).select_overrides.get(chunk.table)
    return select_text(chunk.table, source_sql, encoder.select_list(), cond, override, "mysql")


def select_pieces(
    conn: Any, query: str, chunk: Chunk, encoder: SnapshotRows, fetch: int
) -> Iterator[tuple[Iterator[Any], Callable[[Any], tuple[pa.Array | None, pa.Array]]]]:
    """Run a chunk's SELECT unbuffered; yields once (the result's pieces of at most `fetch` rows,
    and the encoder of a piece), or not at all when the table was dropped since the plan. The
    result is drained when the generator ends, so the connection can be reused."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    text: TextResult | None = None
    try:
        try:
            cur.execute(query)
        except pymysql.err.ProgrammingError as e:
            if _code(e) == 1146:  # dropped since the plan: nothing to read, as for Debezium
                log.warning("snapshot: table %s no longer exists; chunk %d skipped", chunk.table, chunk.index)
                return
            raise
        if TextResult.supported(cur):
            # the rows' bytes in bulk, column-wise (sources/mysql/snapshot_read.py)
            text = TextResult(cur)
            yield text.batches(fetch), encoder.encode_text
        else:
            yield iter(lambda: list(cur.fetchmany(fetch)), []), encoder.encode
    finally:
        # An unread unbuffered result must be drained before the reader is reused.
        with contextlib.suppress(pymysql.err.MySQLError):
            if text is not None:
                text.close()
            cur.close()


def _range(key: list[str], chunk: Chunk, literals: Mapping[str, Any]) -> str:
    """`chunks.range_condition`'s bounds (lower exclusive, upper inclusive, in the key's order),
    each value written as its own column's literal. A composite key is compared column by
    column, not as a row: MariaDB 10.11 reads a `(a, b) > (x, y)` condition from the first row
    of the index (a 200,000-row table: 160,003 index reads for a bound 160,000 rows in, against
    10,000 for the same LIMIT without it), while `a >= x AND (a > x OR b > y)` starts its range
    at `a = x`. The two are equal for non-null keys (nullable key columns are not chunked)."""

    def beyond(cols: list[str], vals: list[str], strict: str, loose: str, last: str) -> str:
        c = quote_ident(cols[0])
        if len(cols) == 1:
            return f"{c} {last} {vals[0]}"
        rest = beyond(cols[1:], vals[1:], strict, loose, last)
        return f"{c} {loose} {vals[0]} AND ({c} {strict} {vals[0]} OR ({rest}))"

    def values(b: tuple[Any, ...]) -> list[str]:
        return [literals[c](v) for c, v in zip(key, b, strict=True)]

    parts = []
    if chunk.lower is not None:
        parts.append(f"({beyond(key, values(chunk.lower), '>', '>=', '>')})")
    if chunk.upper is not None:
        parts.append(f"({beyond(key, values(chunk.upper), '<', '<=', '<=')})")
    return " AND ".join(parts)


def schema_change_events(snap: MySqlSnapshotter, view: View) -> list[Record]:
    """The schema snapshot's change events as records for the sinks (empty unless
    include.schema.changes): the `<topic.prefix>` topic, the streaming source's schemas."""
    src = snap.source
    pos = position(view)
    return [
        Record(
            src.namer.schema_change_topic,
            k,
            v,
            src.sc_key_schema,
            src.sc_value_schema,
            offset=pos,
            schema_change=True,
        )
        for k, v in snap.schema_change_records(view)
    ]
