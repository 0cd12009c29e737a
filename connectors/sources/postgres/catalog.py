"""PostgreSQL catalog look-ups: the type registry (pg_type) and table metadata (pg_attribute & co).

The registry loads every row of pg_type in one query and re-reads lazily when an OID it has not
seen shows up (an enum or domain created after start-up), like Debezium's TypeRegistry.
`load_table` reads one table's columns, primary key and replica identity in two queries;
`list_tables` lists the tables there are (for the publication and the start-up warnings).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from connectors.sources.postgres.oids import NO_TYPMOD
from connectors.sources.postgres.textparse import parse_array
from connectors.sources.postgres.typmod import typmod_length_scale

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """One pg_type row, reduced to what type mapping needs."""

    oid: int
    name: str  # typname, e.g. "int4", "_text", "my_enum"
    namespace: str  # nspname, e.g. "pg_catalog", "public"
    typtype: str  # 'b' base, 'e' enum, 'd' domain, 'r' range, 'm' multirange, 'c' composite, 'p' pseudo
    category: str  # typcategory, e.g. 'A' for arrays
    elem_oid: int = 0  # typelem of array types (0 otherwise)
    base_oid: int = 0  # typbasetype of domains
    base_typmod: int = NO_TYPMOD  # typtypmod of domains
    enum_labels: tuple[str, ...] = ()
    delim: str = ","  # typdelim: array elements of this type are separated by it (PostGIS: ':')

    @property
    def is_array(self) -> bool:
        # typcategory 'A' excludes fixed-length "arrays" like point/name that also set typelem.
        return self.category == "A" and self.elem_oid != 0

    @property
    def is_enum(self) -> bool:
        return self.typtype == "e"

    @property
    def is_domain(self) -> bool:
        return self.typtype == "d"


_TYPES_SQL = """
SELECT t.oid::int8, t.typname, n.nspname, t.typtype, t.typcategory, t.typelem::int8,
       t.typbasetype::int8, t.typtypmod,
       CASE WHEN t.typtype = 'e' THEN
         (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e
          WHERE e.enumtypid = t.oid) END,
       t.typdelim::text
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
"""


class TypeRegistry:
    """All of pg_type, keyed by OID. `get` re-reads the catalog once for an unknown OID."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._by_oid: dict[int, TypeInfo] = {}
        self._by_name: dict[str, TypeInfo] = {}
        self.reload()

    def reload(self, where: str = "", params: tuple[Any, ...] = ()) -> None:
        with self._conn.cursor() as cur:
            cur.execute(_TYPES_SQL + where, params)
            rows = cur.fetchall()
        for row in rows:
            info = TypeInfo(
                int(row[0]),
                row[1],
                row[2],
                row[3],
                row[4],
                int(row[5]),
                int(row[6]),
                int(row[7]),
                tuple(_text_array(row[8])) if row[8] is not None else (),
                row[9] or ",",
            )
            self._by_oid[info.oid] = info
            # Extension types (hstore, ltree, citext, geometry) are looked up by bare name; first
            # namespace wins but pg_catalog always does, so a user type cannot shadow a built-in.
            if info.name not in self._by_name or info.namespace == "pg_catalog":
                self._by_name[info.name] = info

    def get(self, oid: int) -> TypeInfo | None:
        info = self._by_oid.get(oid)
        if info is None:
            # A type created after we loaded (new enum/domain/extension): read just that one.
            self.reload(" WHERE t.oid = %s", (oid,))
            info = self._by_oid.get(oid)
        return info

    def refresh_enum(self, oid: int) -> TypeInfo | None:
        """Re-read one type, e.g. after ALTER TYPE ... ADD VALUE changed an enum's labels."""
        self.reload(" WHERE t.oid = %s", (oid,))
        return self._by_oid.get(oid)

    def by_name(self, name: str) -> TypeInfo | None:
        return self._by_name.get(name)

    def root(self, info: TypeInfo) -> tuple[TypeInfo, int]:
        """Follow a domain chain to its base type; returns (base type, nearest domain typmod)."""
        typmod = NO_TYPMOD
        seen = 0
        while info.is_domain and seen < 32:
            if typmod == NO_TYPMOD:
                typmod = info.base_typmod
            nxt = self.get(info.base_oid)
            if nxt is None:
                break
            info = nxt
            seen += 1
        return info, typmod

    def __len__(self) -> int:
        return len(self._by_oid)


def _text_array(value: Any) -> list[str]:
    # psycopg2 decodes text[] to a list already; be tolerant of a raw '{a,b}' string too.
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(v) for v in parse_array(str(value))]


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    position: int  # attnum
    type_oid: int
    typmod: int = NO_TYPMOD
    not_null: bool = False
    default_expr: str | None = None  # pg_get_expr(adbin) text, e.g. "nextval('t_id_seq'::regclass)"
    type_name: str = ""  # format_type(atttypid, atttypmod), e.g. "numeric(10,2)"
    length: int | None = None  # declared length/precision from typmod, when the type has one
    scale: int | None = None  # declared scale (numeric) / fractional seconds precision (temporal)
    generated: str = ""  # attgenerated ('s' stored generated column)


@dataclass(frozen=True, slots=True)
class TableInfo:
    schema: str
    name: str
    columns: list[ColumnInfo]
    primary_key: list[str]
    replica_identity: str  # 'd' default, 'f' full, 'n' nothing, 'i' index
    identity_index_columns: list[str] = field(default_factory=list)
    oid: int = 0

    def column(self, name: str) -> ColumnInfo | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None


_COLUMNS_SQL = """
SELECT c.oid::int8, c.relreplident, a.attname, a.attnum, a.atttypid::int8, a.atttypmod, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), format_type(a.atttypid, a.atttypmod), a.attgenerated::text
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE n.nspname = %s AND c.relname = %s
ORDER BY a.attnum
"""

_INDEX_SQL = """
SELECT i.indisprimary, i.indisreplident, array_agg(a.attname::text ORDER BY k.ord)
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %s AND (i.indisprimary OR i.indisreplident)
GROUP BY i.indexrelid, i.indisprimary, i.indisreplident
"""


def load_table(conn: Any, schema: str, table: str) -> TableInfo:
    """Columns (in attnum order), primary key, replica identity and its index columns of one table."""
    with conn.cursor() as cur:
        cur.execute(_COLUMNS_SQL, (schema, table))
        rows = cur.fetchall()
        if not rows:
            raise LookupError(f"table {schema}.{table} not found (or it has no columns)")
        rel_oid = int(rows[0][0])
        ident = rows[0][1]
        ident = ident.decode() if isinstance(ident, bytes) else str(ident)
        cur.execute(_INDEX_SQL, (rel_oid,))
        idx_rows = cur.fetchall()
    columns = []
    for _oid, _ri, name, attnum, typ, typmod, notnull, default, fmt, generated in rows:
        length, scale = typmod_length_scale(int(typ), int(typmod))
        columns.append(
            ColumnInfo(
                name,
                int(attnum),
                int(typ),
                int(typmod),
                bool(notnull),
                default,
                fmt,
                length,
                scale,
                generated or "",
            )
        )
    pk: list[str] = []
    ident_cols: list[str] = []
    for is_pk, is_ident, cols in idx_rows:
        names = _text_array(cols)
        if is_pk:
            pk = names
        if is_ident:
            ident_cols = names
    return TableInfo(schema, table, columns, pk, ident, ident_cols, rel_oid)


SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "pg_internal", "catalog_history")

# (schema, table, relkind, replica identity, has a primary key)
TableRow = tuple[str, str, str, str, bool]

_TABLES_SQL = """
SELECT n.nspname, c.relname, c.relkind::text, c.relreplident::text,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
  AND n.nspname <> ALL (%s)
  AND n.nspname NOT LIKE 'pg\\_temp\\_%%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%%'
ORDER BY 1, 2
"""


def list_tables(conn: Any) -> list[TableRow]:
    """Ordinary ('r') and partitioned ('p') tables outside system schemas; partitions of a
    partitioned table are included too."""
    with conn.cursor() as cur:
        cur.execute(_TABLES_SQL, (list(SYSTEM_SCHEMAS),))
        return [(s, t, k, ri, bool(pk)) for s, t, k, ri, pk in cur.fetchall()]
