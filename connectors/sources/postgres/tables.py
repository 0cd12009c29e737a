"""Relation-OID → TableSchema cache, rebuilt when pgoutput announces a changed relation.

Column names/types come from the stream's Relation message (authoritative for the tuples that
follow); nullability, defaults and the primary key come from the catalog — logical decoding does
not carry them (Debezium reads them the same way).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

import psycopg2

from connectors.api import TerminalError
from connectors.format import envelope as env
from connectors.format import tableschema
from connectors.format.tableschema import ColumnDef, TableSchema
from connectors.format.topics import TopicNamer
from connectors.settings.config import ConnectorConfig
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.settings.model import PostgresSettings
from connectors.sources.postgres import catalog, pgoutput, types
from connectors.sources.postgres.connection import translate_error

log = logging.getLogger(__name__)


class TableCache:
    def __init__(
        self,
        conn: Any,
        cfg: ConnectorConfig,
        namer: TopicNamer,
        filters: TableFilters,
        rules: ColumnRules,
        warned: set[Hashable] | None = None,
        *,
        snapshot: bool = False,
    ) -> None:
        self.conn, self.cfg, self.namer, self.filters, self.rules = conn, cfg, namer, filters, rules
        self.snapshot = snapshot  # schema parameters as Debezium's snapshot spells them
        assert isinstance(cfg.source, PostgresSettings)
        self.modes = types.TypeModes.from_settings(cfg.source)
        try:
            self.registry = catalog.TypeRegistry(conn)
        except psycopg2.Error as exc:
            raise translate_error(exc, "reading the type catalog (pg_type)") from exc
        self._relations: dict[int, pgoutput.Relation] = {}
        self._schemas: dict[int, TableSchema | None] = {}
        self._warned = warned if warned is not None else set()  # columns already reported left out
        self._keys: dict[tuple[str, str], list[str]] = {}  # the last primary key built per table name

    def relation(self, rel: pgoutput.Relation) -> None:
        old = self._relations.get(rel.oid)
        if old is not None and _same_shape(old, rel):
            return
        self._relations[rel.oid] = rel
        self._schemas.pop(rel.oid, None)

    def get(self, oid: int) -> TableSchema | None:
        try:
            return self._schemas[oid]
        except KeyError:
            pass
        rel = self._relations.get(oid)
        if rel is None:
            raise pgoutput.PgOutputError(f"pgoutput: change for relation {oid} before its Relation message")
        try:
            ts = self._build(rel) if self.filters.captures(rel.namespace, rel.name) else None
        except psycopg2.Error as exc:
            # This second connection drops with the server too: retried, not the end of the run.
            raise translate_error(exc, f"reading the catalog for {rel.namespace}.{rel.name}") from exc
        self._schemas[oid] = ts
        return ts

    def for_table(self, namespace: str, name: str) -> TableSchema | None:
        """The schema streaming builds for this table, from the catalog alone (snapshots read
        tables before any Relation message): None when the filters leave the table out."""
        found = self.for_table_with_columns(namespace, name)
        return None if found is None else found[0]

    def for_table_with_columns(
        self, namespace: str, name: str
    ) -> tuple[TableSchema, list[catalog.ColumnInfo]] | None:
        """`for_table` and the catalog columns of `TableSchema.columns`, position for position
        (what snapshot_read.SnapshotColumns takes), read in one catalog look-up."""
        if not self.filters.captures(namespace, name):
            return None
        try:
            info = catalog.load_table(self.conn, namespace, name)
        except LookupError:
            raise TerminalError(
                f"table {namespace}.{name} does not exist (dropped or renamed since it was listed)",
                "check the table list; a table dropped mid-snapshot is left out on the next start",
            ) from None
        except psycopg2.Error as exc:
            raise translate_error(exc, f"reading the catalog for {namespace}.{name}") from exc
        rel = relation_from_catalog(info)
        self.relation(rel)
        ts = self.get(rel.oid)
        if ts is None:
            return None
        by_name = {c.name: c for c in info.columns}
        return ts, [by_name[c.name] for c in self._relations[rel.oid].columns]

    def _build(self, rel: pgoutput.Relation) -> TableSchema:
        info = self._catalog(rel)
        by_name = {c.name: c for c in info.columns}
        cols: list[ColumnDef] = []
        source_types: dict[str, tuple[str, dict[str, str]]] = {}
        for rc in rel.columns:
            ci = by_name.get(rc.name) or catalog.ColumnInfo(rc.name, 0, rc.type_oid, rc.typmod)
            if ci.type_oid != rc.type_oid or ci.typmod != rc.typmod:
                # The catalog moved on (ALTER after this change was logged): trust the stream.
                ci = catalog.ColumnInfo(
                    rc.name,
                    ci.position,
                    rc.type_oid,
                    rc.typmod,
                    ci.not_null,
                    ci.default_expr,
                    ci.type_name,
                    *catalog.typmod_length_scale(rc.type_oid, rc.typmod),
                )
            if self.rules.propagate_columns or self.rules.propagate_types:
                # datatype.propagate.source.type matches "<schema>.<table>.<type>" (Debezium's TableId + type name)
                tname, params = types.source_type(ci, self.registry, snapshot=self.snapshot)
                source_types[rc.name] = (f"{rel.namespace}.{rel.name}.{tname}", params)
            mapping = types.column_mapping(ci, self.registry, self.modes)
            if mapping is None:
                self._warn_left_out(f"{rel.namespace}.{rel.name}", ci)
                cols.append(ColumnDef(rc.name, mapping_schema_placeholder(), emitted=False))
                continue
            cols.append(
                ColumnDef(
                    rc.name,
                    mapping.schema,
                    mapping.convert,
                    ci.type_name,
                    ci.length,
                    ci.scale,
                    types.toast_placeholder(mapping.schema, self.modes),
                )
            )
        pk = info.primary_key or (info.identity_index_columns if info.replica_identity == "i" else [])
        self._keys[rel.namespace, rel.name] = pk
        return tableschema.build(
            rel.namespace,
            rel.name,
            cols,
            pk,
            prefix=self.cfg.topic_prefix,
            namer=self.namer,
            filters=self.filters,
            rules=self.rules,
            source_schema=env.PG_SOURCE,
            unavailable_marker=pgoutput.UNCHANGED_TOAST,
            source_type=lambda c: source_types[c.name],
        )

    def _catalog(self, rel: pgoutput.Relation) -> catalog.TableInfo:
        """The catalog's columns and key of the relation's table, looked up by name as Debezium
        does. A table renamed or dropped after this change was logged is no longer under that
        name (the stream runs behind the catalog): then, as Debezium goes on, the Relation
        message's columns, each optional and without a default, and the key last built for the
        name (else the relation's key flags) - not a stop at every start until the slot is moved."""
        try:
            return catalog.load_table(self.conn, rel.namespace, rel.name)
        except LookupError:
            pass
        table = f"{rel.namespace}.{rel.name}"
        if ("gone", table) not in self._warned:
            self._warned.add(("gone", table))
            log.warning(
                "table %s is no longer in the catalog under this name (renamed or dropped since "
                "these changes were logged): its columns come from the stream, each optional, as "
                "Debezium reads them",
                table,
            )
        key = self._keys.get((rel.namespace, rel.name))
        if key is None:
            key = [c.name for c in rel.columns if c.is_key] if rel.replica_identity == "d" else []
        columns = [
            catalog.ColumnInfo(
                c.name,
                i,
                c.type_oid,
                c.typmod,
                False,
                None,
                "",
                *catalog.typmod_length_scale(c.type_oid, c.typmod),
            )
            for i, c in enumerate(rel.columns, 1)
        ]
        return catalog.TableInfo(rel.namespace, rel.name, columns, key, rel.replica_identity, oid=rel.oid)

    def _warn_left_out(self, table: str, ci: catalog.ColumnInfo) -> None:
        # Once per column and run: a table's schema is rebuilt on every new Relation message
        # (reconnects, ALTERs), and the column stays left out the same way each time.
        key = (table, ci.name)
        if key in self._warned:
            return
        self._warned.add(key)
        info = self.registry.get(ci.type_oid)
        kind = _KINDS.get(info.typtype, "") if info is not None else ""
        if info is not None and info.is_array:
            elem = self.registry.get(info.elem_oid)
            kind = f"an array of {elem.name}" if elem is not None else "an array"
        name = ci.type_name or (info.name if info is not None else f"oid {ci.type_oid}")
        log.warning(
            "column %s.%s (type %s%s) has no Debezium mapping and is left out of the change events, "
            "as Debezium does; set include.unknown.datatypes=true to send its text as bytes",
            table,
            ci.name,
            name,
            f", {kind}" if kind else "",
        )


_KINDS = {
    "c": "a composite type",
    "m": "a multirange",
    "p": "a pseudo-type",
    "d": "a domain",
    "r": "a range",
    "b": "a base type",
    "e": "an enum",
}


def relation_from_catalog(info: catalog.TableInfo) -> pgoutput.Relation:
    """The Relation message pgoutput would send for this table: its columns in attnum order
    without generated ones (pgoutput leaves them out unless publish_generated_columns is set),
    the replica identity's columns flagged as key."""
    ident = info.replica_identity
    if ident == "f":
        key: set[str] | None = None  # FULL: every column is part of the identity
    elif ident == "i":
        key = set(info.identity_index_columns)
    elif ident == "d":
        key = set(info.primary_key)
    else:
        key = set()
    cols = [
        pgoutput.RelationColumn(1 if key is None or c.name in key else 0, c.name, c.type_oid, c.typmod)
        for c in info.columns
        if not c.generated
    ]
    return pgoutput.Relation(info.oid, info.schema, info.name, ident, cols)


def mapping_schema_placeholder() -> Any:
    from connectors.format.schema import prim

    return prim("bytes", optional=True)


def _same_shape(a: pgoutput.Relation, b: pgoutput.Relation) -> bool:
    return (a.namespace, a.name, a.replica_identity) == (b.namespace, b.name, b.replica_identity) and [
        (c.name, c.type_oid, c.typmod, c.flags) for c in a.columns
    ] == [(c.name, c.type_oid, c.typmod, c.flags) for c in b.columns]
