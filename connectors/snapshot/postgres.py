"""PostgreSQL initial snapshots: one consistent view, planned into primary-key chunks, each chunk
read by a task into change-log rows.

The view. A new slot is created with `EXPORT_SNAPSHOT` on a replication connection: the exported
snapshot sees exactly the data before the slot's consistent point, so streaming from the slot
afterwards misses and repeats nothing. When the slot already exists (`always`, `when_needed`
with a stored position, or a slot left by an earlier attempt) a TEMPORARY slot exports the view,
as Debezium does; the stream then starts at the existing slot's position, before the view, and
replays the changes in between (every replayed change is an upsert or a delete of a row the
snapshot already has: applying them again gives the same table). The driver keeps the exporting
connection idle while the tasks run: the snapshot lives as long as it does.

A resumed snapshot (after a crash the exported snapshot is gone) reads its remaining chunks in a
fresh view (`pg_export_snapshot()`), later than the first one; the stream, which starts at the
slot's position, reconciles them the same way.

Chunks. A one-column integer primary key is split by its range (`int_bounds`: a candidate every
`tidemark.snapshot.chunk.rows` values, each moved down to an existing key by one index dive)
unless the key is too sparse for that. Otherwise boundaries are keys sampled inside the view
(`TABLESAMPLE SYSTEM` when the table is large, every key otherwise). Boundaries are read as text
and bound as quoted literals, so any key type works (the server casts them back); composite keys
compare as rows, as their index orders them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg2
import pyarrow as pa
from psycopg2 import sql
from psycopg2.extensions import quote_ident

from connectors.api import Lsn, TerminalError
from connectors.format import envelope as env
from connectors.format.topics import TopicNamer
from connectors.settings.config import ConnectorConfig
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.settings.model import PostgresSettings
from connectors.settings.overrides import parse_override
from connectors.settings.values import compile_regex
from connectors.snapshot.chunks import Chunk, pick_boundaries, range_condition, table_chunks
from connectors.snapshot.grant_check import FILTERS, Denied, refuse_unreadable
from connectors.snapshot.int_bounds import range_boundaries
from connectors.snapshot.kept import Kept
from connectors.snapshot.override_check import OVERRIDE, check_overrides
from connectors.snapshot.reading import chunk_context, config_of, marked_pieces, select_text
from connectors.sources.postgres import checks, oids, publications, slots
from connectors.sources.postgres.catalog import list_tables
from connectors.sources.postgres.connection import PgConnParams, connect, translate_error
from connectors.sources.postgres.snapshot_read import (
    SnapshotColumns,
    conninfo,
    read_batches,
    snapshot_connection,
)
from connectors.sources.postgres.tables import TableCache
from connectors.sources.postgres.types import TypeModes

log = logging.getLogger(__name__)

SAMPLE_KEYS = 200  # sampled keys per planned chunk: boundaries within ~1/200 of a chunk
# A task thread's connections, kept from chunk to chunk of one snapshot (connectors.snapshot.kept):
# the catalog connection (psycopg2) and the ADBC reader, whose connect looks up the server's types.
_CATALOG: Kept[Any] = Kept(lambda conn: conn.close())
_READER: Kept[Any] = Kept(lambda conn: conn.close())


def _settings(cfg: ConnectorConfig) -> PostgresSettings:
    assert isinstance(cfg.source, PostgresSettings)
    return cfg.source


@dataclass
class View:
    """An exported snapshot and the position streaming starts from."""

    name: str  # the snapshot id tasks pass to SET TRANSACTION SNAPSHOT
    lsn: int  # consistency point (the slot's consistent point, or the WAL position of a fresh view)
    xid: int | None  # source.txId of snapshot records
    ts_us: int  # source.ts_us of snapshot records (the view's time)
    conn: Any = field(repr=False)  # holds the snapshot alive; close() ends it
    fresh: bool = False  # a resumed snapshot's later view

    def close(self) -> None:
        try:
            self.conn.close()
        except psycopg2.Error:
            pass


def position(view: View) -> dict[str, Any]:
    """The consistency point as a PostgreSQL source offset (the keys streaming stores)."""
    return {
        "lsn": view.lsn,
        "lsn_flush": view.lsn,
        "lsn_commit": view.lsn,
        "txId": view.xid,
        "ts_usec": view.ts_us,
        "snapshot": True,
    }


class PgSnapshotter:
    """The driver's side: the view, the tables, the chunk plan."""

    def __init__(self, cfg: ConnectorConfig) -> None:
        self.cfg = cfg
        self.src = _settings(cfg)
        self.params = PgConnParams.from_settings(self.src)
        self.filters = TableFilters.from_settings(self.src)
        self._conn = connect(self.params)

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------------ what is stored
    def resumable(self, offset: Mapping[str, Any] | None) -> bool:
        """Whether streaming can resume from `offset` (the slot and its WAL are still there)."""
        if not offset:
            return True
        info = slots.slot_info(self._conn, self.src.slot_name)
        return slots.check_resume(info, int(offset.get("lsn_flush", 0)), self.src.slot_name) is None

    def preflight(self, *, stream: bool) -> None:
        """What a snapshot needs of the server, checked before anything starts: a slot (permanent,
        or temporary for a snapshot without a stream) needs what streaming needs (wal_level=logical,
        a role that may replicate, free slots), with the hint that fixes it; then each override."""
        del stream  # PostgreSQL's view always comes from a slot
        checks.check_server(self._conn, self.params)
        self.check_reads()

    def check_reads(self, labels: Mapping[str, str] | None = None, scope: str = FILTERS) -> None:
        """That the user may read each table the snapshot reads (chosen by `scope`), then each of
        their overrides (named by `labels`)."""
        self.check_grants(scope)
        self.check_overrides(labels)

    def check_grants(self, scope: str = FILTERS) -> None:
        """The tables the snapshot reads that the user may not read (grant_check.py): no USAGE on
        the schema, or no SELECT on a column it needs (a captured one or the primary key). The
        privilege functions follow role membership, and a column-level grant of those is enough."""
        include = [compile_regex(p) for p in self.src.snapshot_include_collection_list]
        cols: dict[tuple[str, str], list[str]] = {}  # the needed columns it may not SELECT
        no_usage: set[str] = set()
        nothing: set[tuple[str, str]] = set()  # not one column readable
        with self._conn.cursor() as cur:
            cur.execute(_UNREADABLE_SQL)
            for schema, name, column, key, any_column, readable, usage in cur.fetchall():
                if not self._reads(schema, name, include):
                    continue
                lacking = cols.setdefault((schema, name), [])
                if not usage:
                    no_usage.add(schema)
                if not readable and (key or self.filters.captures_column(schema, name, column)):
                    lacking.append(column)
                if not any_column:
                    nothing.add((schema, name))
            cur.execute("SELECT current_user")
            user = str(cur.fetchone()[0])
        denied: list[Denied] = []
        for (schema, name), lacking in sorted(cols.items()):
            why = [f"no USAGE on schema {schema}"] if schema in no_usage else []
            if lacking:
                why.append("no SELECT" if (schema, name) in nothing else f"no SELECT on {', '.join(lacking)}")
            if why:
                denied.append(Denied(f"{schema}.{name}", ", ".join(why)))

        def ident(name: str) -> str:
            return str(quote_ident(name, self._conn))

        grants = [f"GRANT USAGE ON SCHEMA {ident(s)} TO {ident(user)}" for s in sorted(no_usage)]
        selects = [f"{ident(s)}.{ident(t)}" for (s, t), lacking in sorted(cols.items()) if lacking]
        if selects:
            grants.append(f"GRANT SELECT ON {', '.join(selects)} TO {ident(user)}")
        refuse_unreadable(user, denied, "; ".join(grants), scope)

    def _reads(self, schema: str, name: str, include: list[Any]) -> bool:
        """Whether a snapshot reads the table: captured, and in snapshot.include.collection.list."""
        if not self.filters.captures(schema, name):
            return False
        return not include or any(p.fullmatch(f"{schema}.{name}") for p in include)

    def check_overrides(self, labels: Mapping[str, str] | None = None) -> None:
        """Each override of a captured table, tried before the slot is made (override_check.py)."""
        check_overrides(
            self.src.select_overrides,
            self.filters.captures,
            lambda name: quote_ident(name, self._conn),
            self._trial,
            "postgres",
            labels,
        )

    def _trial(self, query: str) -> str | None:
        with self._conn.cursor() as cur:  # autocommit: a refused statement leaves nothing open
            try:
                cur.execute(query)
            except psycopg2.errors.UndefinedTable:
                return None
            except (psycopg2.ProgrammingError, psycopg2.DataError, psycopg2.NotSupportedError) as exc:
                return exc.diag.message_primary or str(exc).strip().splitlines()[0]
        return None

    # ------------------------------------------------------------------ the view
    def export(self, *, reset: bool, stream: bool = True) -> View:
        """Publication, slot and an exported snapshot at the slot's consistent point.
        `reset`: the stored position is stale — a slot that lost its WAL is dropped first.
        `stream=False` (initial_only, ...): a temporary slot only — no slot is left holding WAL
        for a stream that never comes (Debezium creates none either)."""
        src = self.src
        tables = list_tables(self._conn)
        captured = [(s, t) for s, t, *_ in tables if self.filters.captures(s, t)]
        publications.ensure_publication(
            self._conn,
            src.publication_name,
            src.publication_autocreate_mode,
            captured,
            via_root=src.publish_via_partition_root,
        )
        info = slots.slot_info(self._conn, src.slot_name)
        if info is not None and reset and info.wal_status == "lost":
            slots.drop_slot(self._conn, src.slot_name)
            info = None
        repl = connect(self.params, replication=True)
        try:
            with repl.cursor() as cur:
                if info is None and stream:
                    name, temporary = src.slot_name, ""
                else:
                    # The slot exists: a temporary slot exports the view (dropped with the connection).
                    name, temporary = f"tidemark_snap_{uuid.uuid4().hex[:12]}", " TEMPORARY"
                # PostgreSQL makes the slot consistent once the transactions running now have
                # ended: a long transaction (or DDL in progress) holds this step up, as for Debezium.
                log.info(
                    "snapshot: creating slot %s with an exported snapshot (waits for open transactions)", name
                )
                cur.execute(
                    f"CREATE_REPLICATION_SLOT {quote_ident(name, cur)}{temporary} LOGICAL pgoutput EXPORT_SNAPSHOT"
                )
                _slot, consistent, snapshot_name, _plugin = cur.fetchone()
        except psycopg2.Error as exc:
            repl.close()
            raise translate_error(exc, f"creating replication slot {name} with an exported snapshot") from exc
        if not temporary:
            log.info("created logical replication slot %s (plugin pgoutput) at %s", name, consistent)
        lsn = Lsn.parse(consistent).value
        xid, ts_us = self._view_facts(snapshot_name)
        return View(snapshot_name, lsn, xid, ts_us, repl)

    def fresh_view(self) -> View:
        """A new exported snapshot on an ordinary connection (resuming after a crash)."""
        conn = connect(self.params)
        try:
            conn.autocommit = False
            with conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cur.execute(
                    "SELECT pg_export_snapshot(), pg_current_wal_lsn()::text, "
                    "txid_snapshot_xmin(txid_current_snapshot()), (extract(epoch FROM now()) * 1000000)::bigint"
                )
                name, lsn, xid, ts_us = cur.fetchone()
        except psycopg2.Error as exc:
            conn.close()
            raise translate_error(exc, "exporting a snapshot") from exc
        return View(name, Lsn.parse(lsn).value, int(xid), int(ts_us), conn, fresh=True)

    def _view_facts(self, snapshot_name: str) -> tuple[int | None, int]:
        """(source.txId, source.ts_us) of the view's records: the exported snapshot's xmin (an
        id of the view's own time; Debezium assigns one to its snapshot transaction) and the
        snapshot transaction's start time, one value for every record, as Debezium's."""
        with self._in_view(snapshot_name) as cur:
            cur.execute(
                "SELECT txid_snapshot_xmin(txid_current_snapshot()), (extract(epoch FROM now()) * 1000000)::bigint"
            )
            xid, ts_us = cur.fetchone()
        return (int(xid) if xid is not None else None), int(ts_us)

    class _InView:
        def __init__(self, conn: Any, name: str) -> None:
            self.conn, self.name = conn, name

        def __enter__(self) -> Any:
            self.conn.autocommit = False
            self.cur = self.conn.cursor()
            self.cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self.cur.execute("SET TRANSACTION SNAPSHOT %s", (self.name,))
            return self.cur

        def __exit__(self, *exc: Any) -> None:
            self.cur.close()
            self.conn.rollback()
            self.conn.autocommit = True

    def _in_view(self, snapshot_name: str) -> PgSnapshotter._InView:
        return PgSnapshotter._InView(self._conn, snapshot_name)

    # ------------------------------------------------------------------ the plan
    def plan(self, view: View, chunk_rows: int) -> tuple[list[Chunk], dict[str, Any]]:
        """The chunks of every table the snapshot reads, planned inside the view. A server error
        (the checks before the slot should leave none) is one message, not the driver's traceback."""
        try:
            return self._plan(view, chunk_rows)
        except psycopg2.Error as exc:
            raise translate_error(exc, "snapshot planning") from None

    def _plan(self, view: View, chunk_rows: int) -> tuple[list[Chunk], dict[str, Any]]:
        src = self.src
        include = [compile_regex(p) for p in src.snapshot_include_collection_list]
        with self._in_view(view.name) as cur:
            cur.execute(_TABLES_SQL)
            rows = cur.fetchall()
            tables: list[tuple[str, str, float]] = []
            for schema, name, _kind, _is_partition, reltuples in rows:
                # As Debezium 3.6 (measured): a partitioned table and its partitions are each read
                # when the filters capture both, whatever publish.via.partition.root says.
                if not self._reads(schema, name, include):
                    continue
                tables.append((schema, name, max(0.0, float(reltuples or 0))))
            self._check_includes(include, rows)
            if src.snapshot_locking_mode == "shared" and tables:
                self._lock_shared(cur, [(s, t) for s, t, _ in tables])
            order = src.snapshot_tables_order_by_row_count
            if order != "disabled":
                tables.sort(key=lambda t: t[2], reverse=order == "descending")
            chunks: list[Chunk] = []
            # Debezium marks the final record `last` even when the tables after it are empty.
            filled = [self._has_rows(cur, schema, name) for schema, name, _ in tables]
            last_filled = max((i for i, f in enumerate(filled) if f), default=-1)
            for ti, (schema, name, estimate) in enumerate(tables):
                bounds = self._boundaries(cur, schema, name, estimate, chunk_rows) if filled[ti] else []
                chunks += table_chunks(
                    f"{schema}.{name}", len(chunks), ti, len(tables), bounds, last_table=ti == last_filled
                )
        detail = {"tables": len(tables), "slot": src.slot_name, "kind": "initial"}
        return chunks, detail

    def _lock_shared(self, cur: Any, tables: list[tuple[str, str]]) -> None:
        """snapshot.locking.mode=shared, as Debezium: ACCESS SHARE locks on the tables while their
        structure and key boundaries are read (no DROP or ALTER meanwhile; writes go on), waiting
        at most snapshot.lock.timeout.ms. Released when the planning transaction ends."""
        ms = self.src.snapshot_lock_timeout_ms
        names = sql.SQL(", ").join(
            sql.SQL("{}.{}").format(sql.Identifier(s), sql.Identifier(t)) for s, t in tables
        )
        try:
            cur.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{ms}ms")))
            cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(names))
        except psycopg2.errors.LockNotAvailable:
            raise TerminalError(
                f"snapshot.locking.mode=shared: the captured tables could not be locked within "
                f"snapshot.lock.timeout.ms={ms} (another session holds an exclusive lock: DDL or VACUUM FULL)",
                "wait for that session, raise snapshot.lock.timeout.ms, or use snapshot.locking.mode=none",
            ) from None

    def _has_rows(self, cur: Any, schema: str, name: str) -> bool:
        """Whether the snapshot reads any row of the table (its override's condition applied)."""
        table = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))
        override = self.src.select_overrides.get(f"{schema}.{name}")
        if override is None:
            cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(table))
        else:
            ov = parse_override(f"{schema}.{name}", override, "postgres")
            # The override passed parse_override: one SELECT of this table (never other text).
            inner = (
                f"SELECT 1 FROM {table.as_string(cur)} WHERE {ov.where}"
                if ov.chunkable and ov.where
                else None
            )
            cur.execute(f"SELECT EXISTS ({inner or ov.sql})")
        return bool(cur.fetchone()[0])

    def _check_includes(self, include: list[Any], rows: list[tuple[Any, ...]]) -> None:
        if not include:
            return
        names = [f"{s}.{t}" for s, t, *_ in rows if self.filters.captures(s, t)]
        for pat, text in zip(include, self.src.snapshot_include_collection_list, strict=True):
            if not any(pat.fullmatch(n) for n in names):
                raise TerminalError(
                    f"snapshot.include.collection.list: {text!r} matches no captured table",
                    f"captured tables: {', '.join(names[:20]) or 'none'}; snapshot.include.collection.list "
                    "must name tables the connector captures (table.include.list / schema.include.list)",
                )

    def _boundaries(
        self, cur: Any, schema: str, name: str, estimate: float, chunk_rows: int
    ) -> list[tuple[Any, ...]]:
        key, info = self._key_columns(schema, name)
        override = self.src.select_overrides.get(f"{schema}.{name}")
        if not key or (
            override is not None and not parse_override(f"{schema}.{name}", override, "postgres").chunkable
        ):
            return []
        if estimate < chunk_rows:
            cur.execute(
                sql.SQL("SELECT count(*) FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(name))
            )
            estimate = float(cur.fetchone()[0])
            if estimate <= chunk_rows:
                return []
        col = info.column(key[0]) if len(key) == 1 and info.primary_key == key else None
        if col is not None and col.type_oid in (oids.INT2, oids.INT4, oids.INT8):
            # A one-column integer primary key: boundaries from its range (snapshot/int_bounds.py)
            table = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name)).as_string(cur)
            planned = range_boundaries(
                cur, table, quote_ident(key[0], cur), chunk_rows, int(estimate), lambda e: f"({e})::text"
            )
            if planned is not None:  # else too sparse: sampled below
                return planned
        want = SAMPLE_KEYS * max(1, int(estimate // chunk_rows))
        pct = min(100.0, 100.0 * want / max(estimate, 1.0))
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in key)
        # Aliased: ORDER BY "id" would otherwise sort by the text output column of that name.
        texts = sql.SQL(", ").join(
            sql.SQL("{}::text AS {}").format(sql.Identifier(c), sql.Identifier(f"_k{i}"))
            for i, c in enumerate(key)
        )
        # SYSTEM samples whole pages: cheap on large tables, but clumpy on small ones, where
        # row-level BERNOULLI sampling costs little.
        method = sql.SQL("SYSTEM" if estimate > 1_000_000 else "BERNOULLI")
        sample = (
            sql.SQL(" TABLESAMPLE {} ({})").format(method, sql.Literal(pct)) if pct < 100 else sql.SQL("")
        )
        cur.execute(
            sql.SQL("SELECT {} FROM {}.{}{} ORDER BY {}").format(
                texts, sql.Identifier(schema), sql.Identifier(name), sample, cols
            )
        )
        keys = [tuple(r) for r in cur.fetchall()]
        cur.execute(
            sql.SQL("SELECT {} FROM {}.{} ORDER BY {} LIMIT 1").format(
                texts,
                sql.Identifier(schema),
                sql.Identifier(name),
                sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(c)) for c in key),
            )
        )
        top = cur.fetchone()
        return pick_boundaries(keys, int(estimate), chunk_rows, tuple(top) if top is not None else None)

    def _key_columns(self, schema: str, name: str) -> tuple[list[str], Any]:
        """The key the chunks split on: message.key.columns for the table, else the primary key
        (or the replica-identity index); and the table's catalog entry."""
        from connectors.sources.postgres import catalog

        info = catalog.load_table(self._conn, schema, name)
        rules = ColumnRules.from_settings(self.src)
        override = rules.key_override(f"{schema}.{name}")
        if override:
            return list(override), info
        return info.primary_key or (info.identity_index_columns if info.replica_identity == "i" else []), info


_TABLES_SQL = """
SELECT n.nspname, c.relname, c.relkind::text, c.relispartition, c.reltuples
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
ORDER BY 1, 2
"""

# The columns the user may not SELECT (through a table-level or a column-level grant; the
# functions follow role membership), or in a schema it may not use: whether each is in the
# primary key, whether any column of its table is readable, whether it is, and the schema's USAGE.
_UNREADABLE_SQL = """
SELECT n.nspname, c.relname, a.attname, coalesce(a.attnum = ANY(i.indkey), false),
       has_any_column_privilege(c.oid, 'SELECT'), has_column_privilege(c.oid, a.attnum, 'SELECT'),
       has_schema_privilege(n.oid, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
  AND (NOT has_schema_privilege(n.oid, 'USAGE')
       OR NOT has_table_privilege(c.oid, 'SELECT') AND NOT has_column_privilege(c.oid, a.attnum, 'SELECT'))
ORDER BY 1, 2, a.attnum
"""


# --------------------------------------------------------------------------- a task's side
def source_block(cfg: ConnectorConfig, schema: str, table: str, pos: Mapping[str, Any], ts_us: int) -> Any:
    """marker → the `source` block of a snapshot record (PostgreSQL)."""
    src = _settings(cfg)
    lsn = pos.get("lsn")

    def block(marker: str) -> dict[str, Any]:
        return {
            "version": env.VERSION,
            "connector": "postgresql",
            "name": cfg.topic_prefix,
            "ts_ms": ts_us // 1000,
            "snapshot": marker,
            "db": src.database_dbname,
            "sequence": f'[null,"{lsn}"]',
            "ts_us": ts_us,
            "ts_ns": ts_us * 1000,
            "schema": schema,
            "table": table,
            "txId": pos.get("txId"),
            "lsn": lsn,
            "xmin": None,
            "origin": None,
            "origin_lsn": None,
        }

    return block


def read_chunk(
    raw: Mapping[str, str],
    chunk: Chunk,
    snapshot_name: str,
    pos: Mapping[str, Any],
    headers: tuple[tuple[str, bytes], ...],
) -> Iterator[pa.Table]:
    """The change-log rows of one chunk, as Arrow tables of at most snapshot.fetch.size rows
    (memory is bounded by that, not by the chunk)."""
    cfg = config_of(raw)
    src = _settings(cfg)
    params = PgConnParams.from_settings(src)
    schema, _, name = chunk.table.partition(".")
    info = conninfo(src)
    key = (snapshot_name, info, params.initial_statements)
    try:
        conn = _CATALOG.get(key, lambda: connect(params))
        with PgSnapshotter._InView(conn, snapshot_name) as cur:
            namer = TopicNamer.from_settings(src)
            cache = TableCache(
                conn,
                cfg,
                namer,
                TableFilters.from_settings(src),
                ColumnRules.from_settings(src),
                snapshot=True,
            )
            cur.execute("SELECT to_regclass(%s)", (f"{quote_ident(schema, cur)}.{quote_ident(name, cur)}",))
            if cur.fetchone()[0] is None:
                # Dropped (or renamed) since the plan: nothing left to read, as for Debezium.
                log.warning(
                    "snapshot: table %s no longer exists; its chunk %d is skipped", chunk.table, chunk.index
                )
                return
            found = cache.for_table_with_columns(schema, name)
            if found is None:
                return
            ts, columns = found
            encoder = SnapshotColumns(ts, columns, cache.registry, TypeModes.from_settings(src))
            key_cols = cache_key_columns(ts)

            def ident(c: str) -> str:
                return quote_ident(c, cur)

            def literal(v: Any) -> str:
                return sql.Literal(v).as_string(cur)

            cond = [c for c in [range_condition(key_cols, chunk, ident, literal)] if c]
            source_sql = f"{ident(schema)}.{ident(name)}"
            override = src.select_overrides.get(chunk.table)
        query_text = select_text(chunk.table, source_sql, encoder.select_list(), cond, override, "postgres")
    except psycopg2.Error as exc:
        _CATALOG.drop()
        err = translate_error(exc, f"snapshot read of {chunk.table}")
        if err.transient:  # a dropped connection: the task reads the chunk again on a new one
            raise err from None
        raise
    except BaseException:
        _CATALOG.drop()
        raise
    ts_us = int(pos.get("ts_usec") or time.time_ns() // 1000)
    ctx = chunk_context(cfg, chunk, ts, source_block(cfg, schema, name, pos, ts_us), headers)
    fetch = src.snapshot_fetch_size or 10240
    try:
        reader = _READER.get(key, lambda: snapshot_connection(info, params.initial_statements))
        what = f"snapshot read of {chunk.table}" + (f" ({OVERRIDE}{chunk.table})" if override else "")
        batches = read_batches(
            info, query_text, snapshot=snapshot_name, fetch_rows=fetch, connection=reader, what=what
        )
        yield from marked_pieces(chunk, ctx, batches, encoder.encode, lambda b: b.num_rows)
    except BaseException:  # a failure, or the task stopped mid-chunk: no half-used connection kept
        _READER.drop()
        raise


def cache_key_columns(ts: Any) -> list[str]:
    """The real (not adjusted) names of the key columns the chunks were planned on."""
    return list(ts.key_names)
