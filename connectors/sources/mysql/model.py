"""In-memory relational model of MySQL/MariaDB tables, as Debezium's `Tables`/`Table`/`Column`.

The model is what rows are decoded with (binlog row events carry only positional values), what
the schema change events describe (`tableChanges`), and what the schema history replays.
Everything here is plain data: cheap to copy (`Tables.copy()`), JSON round-trippable
(`to_dict`/`from_dict`) so history rows can store table snapshots.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

# java.sql.Types codes used by Debezium's MySQL DDL parser (jdbcType in tableChanges).
BIT = -7
TINYINT = -6
SMALLINT = 5
INTEGER = 4
BIGINT = -5
REAL = 7
FLOAT = 6
DOUBLE = 8
NUMERIC = 2
DECIMAL = 3
CHAR = 1
VARCHAR = 12
NCHAR = -15
NVARCHAR = -9
DATE = 91
TIME = 92
TIMESTAMP = 93
TIMESTAMP_WITH_TIMEZONE = 2014
BINARY = -2
VARBINARY = -3
BLOB = 2004
BOOLEAN = 16
OTHER = 1111

# Base type keyword (first word of typeName) → jdbcType, as MySqlAntlrDdlParser registers them.
JDBC_TYPES: dict[str, int] = {
    "CHAR": CHAR,
    "CHARACTER": CHAR,
    "VARCHAR": VARCHAR,
    "TINYTEXT": VARCHAR,
    "TEXT": VARCHAR,
    "MEDIUMTEXT": VARCHAR,
    "LONGTEXT": VARCHAR,
    "NCHAR": NCHAR,
    "NVARCHAR": NVARCHAR,
    "TINYINT": SMALLINT,
    "INT1": SMALLINT,
    "SMALLINT": SMALLINT,
    "INT2": SMALLINT,
    "MEDIUMINT": INTEGER,
    "INT3": INTEGER,
    "MIDDLEINT": INTEGER,
    "INT": INTEGER,
    "INTEGER": INTEGER,
    "INT4": INTEGER,
    "BIGINT": BIGINT,
    "INT8": BIGINT,
    "REAL": REAL,
    "DOUBLE": DOUBLE,
    "FLOAT8": DOUBLE,
    "FLOAT": FLOAT,
    "FLOAT4": FLOAT,
    "DECIMAL": DECIMAL,
    "DEC": DECIMAL,
    "FIXED": DECIMAL,
    "NUMERIC": NUMERIC,
    "BIT": BIT,
    "TIME": TIME,
    "TIMESTAMP": TIMESTAMP_WITH_TIMEZONE,
    "DATETIME": TIMESTAMP,
    "BINARY": BINARY,
    "VARBINARY": VARBINARY,
    "BLOB": BLOB,
    "TINYBLOB": BLOB,
    "MEDIUMBLOB": BLOB,
    "LONGBLOB": BLOB,
    "YEAR": INTEGER,
    "DATE": DATE,
    "BOOL": BOOLEAN,
    "BOOLEAN": BOOLEAN,
    "SERIAL": BIGINT,
    "ENUM": CHAR,
    "SET": CHAR,
    "JSON": OTHER,
    "GEOMETRY": OTHER,
    "POINT": OTHER,
    "LINESTRING": OTHER,
    "POLYGON": OTHER,
    "MULTIPOINT": OTHER,
    "MULTILINESTRING": OTHER,
    "MULTIPOLYGON": OTHER,
    "GEOMETRYCOLLECTION": OTHER,
    "GEOMCOLLECTION": OTHER,
    "VECTOR": OTHER,
    # MariaDB-only: UUID as MariaDbAntlrDdlParser registers it; INET4/INET6 are unknown to Debezium's
    # grammar and get PostgreSQL's `inet` treatment (OTHER, a string) here
    "UUID": OTHER,
    "INET4": OTHER,
    "INET6": OTHER,
}

STRING_TYPES = frozenset(
    {
        "CHAR",
        "CHARACTER",
        "VARCHAR",
        "TINYTEXT",
        "TEXT",
        "MEDIUMTEXT",
        "LONGTEXT",
        "NCHAR",
        "NVARCHAR",
        "ENUM",
        "SET",
    }
)
# Base type words a column may have besides the JDBC_TYPES keys (`NATIONAL CHAR`, `LONG VARCHAR`).
KNOWN_TYPES = frozenset(JDBC_TYPES) | {"NATIONAL", "LONG"}
SPATIAL_TYPES = frozenset(
    {
        "GEOMETRY",
        "POINT",
        "LINESTRING",
        "POLYGON",
        "MULTIPOINT",
        "MULTILINESTRING",
        "MULTIPOLYGON",
        "GEOMETRYCOLLECTION",
        "GEOMCOLLECTION",
    }
)


@dataclass
class Column:
    """One column. `type_name` is Debezium's typeName (upper case, e.g. `INT UNSIGNED`, `VARCHAR`);
    `length`/`scale` are None when the DDL gave none. `default` is the literal default text
    (already unquoted) or None with `has_default` telling `DEFAULT NULL` from no default."""

    name: str
    type_name: str
    position: int
    jdbc_type: int = OTHER
    length: int | None = None
    scale: int | None = None
    optional: bool = True
    auto_increment: bool = False
    generated: bool = False
    charset: str | None = None
    has_default: bool = False
    default: str | None = None
    default_is_expr: bool = False  # CURRENT_TIMESTAMP, NOW(), other expressions
    enum_values: list[str] = field(default_factory=list)
    comment: str | None = None
    type_expression: str | None = None

    @property
    def base_type(self) -> str:
        return self.type_name.split(" ", 1)[0]

    @property
    def unsigned(self) -> bool:
        return " UNSIGNED" in self.type_name or self.base_type == "SERIAL"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Column":
        return cls(**d)


@dataclass
class Table:
    db: str
    name: str
    columns: list[Column] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    default_charset: str | None = None
    comment: str | None = None

    @property
    def id(self) -> str:
        return f"{self.db}.{self.name}"

    def column(self, name: str) -> Column | None:
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None

    def renumber(self) -> None:
        for i, c in enumerate(self.columns, 1):
            c.position = i

    def to_dict(self) -> dict[str, Any]:
        return {
            "db": self.db,
            "name": self.name,
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "default_charset": self.default_charset,
            "comment": self.comment,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Table":
        return cls(
            d["db"],
            d["name"],
            [Column.from_dict(c) for c in d["columns"]],
            list(d.get("primary_key") or []),
            d.get("default_charset"),
            d.get("comment"),
        )


@dataclass
class Tables:
    """All known tables plus database default charsets. `version` increases on every change so
    decoders compiled against a table can be cached per (table, version)."""

    tables: dict[tuple[str, str], Table] = field(default_factory=dict)
    db_charsets: dict[str, str] = field(default_factory=dict)
    server_charset: str = "utf8mb4"
    versions: dict[tuple[str, str], int] = field(default_factory=dict)
    _counter: int = 0

    def get(self, db: str, name: str) -> Table | None:
        return self.tables.get((db, name))

    def put(self, table: Table) -> None:
        table.renumber()
        self._counter += 1
        self.tables[(table.db, table.name)] = table
        self.versions[(table.db, table.name)] = self._counter

    def drop(self, db: str, name: str) -> Table | None:
        self.versions.pop((db, name), None)
        return self.tables.pop((db, name), None)

    def version(self, db: str, name: str) -> int:
        return self.versions.get((db, name), 0)

    def in_db(self, db: str) -> list[Table]:
        return [t for (d, _), t in self.tables.items() if d == db]

    def copy(self) -> "Tables":
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": [t.to_dict() for t in self.tables.values()],
            "db_charsets": dict(self.db_charsets),
            "server_charset": self.server_charset,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tables":
        out = cls(
            db_charsets=dict(d.get("db_charsets") or {}), server_charset=d.get("server_charset") or "utf8mb4"
        )
        for td in d.get("tables") or []:
            out.put(Table.from_dict(td))
        return out
