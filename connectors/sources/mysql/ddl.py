"""MySQL DDL → table model changes, the way Debezium's `MySqlAntlrDdlParser` applies them.

sqlglot (dialect `mysql`) parses the statement structure; because sqlglot normalises type
names (INTEGER → INT, REAL → FLOAT, BOOL → BOOLEAN) and does not know spatial types, the column
type keywords Debezium reports as `typeName` are read from sqlglot's token stream of the original
text, and spatial/`NATIONAL`/`LONG VARCHAR` types are rewritten only in the copy sqlglot parses.

`DdlParser.apply(sql, current_db)` mutates a `Tables` model and returns the `TableChange`s it
made; statements sqlglot cannot parse raise `UnparseableDdl` (the caller applies
`schema.history.internal.skip.unparseable.ddl`, and skips statements that touch only tables
outside the filters: `ddl_targets` names them without parsing). ALTER TABLE goes through
`alterprep` first (forms sqlglot cannot parse: CONVERT TO CHARACTER SET, ADD COLUMN (a, b),
MariaDB IF [NOT] EXISTS...); an ALTER action that is not understood is reported, never skipped silently.

Types: MariaDB's UUID is parsed as such (Debezium's MariaDB grammar: `UUID`, jdbcType OTHER);
INET4/INET6, which Debezium's grammar lacks, are read as types too. A type word nobody knows
(a newer server's type) does not make a statement unparseable: the column gets that type name,
and the connector stops with table, column and type if rows of it must be converted.

Keys as Debezium keeps them: the PRIMARY KEY, else the first UNIQUE key whose columns are all
NOT NULL (a column's own UNIQUE / SERIAL counts whatever its nullability) — it becomes the
table's `primaryKeyColumnNames` and so the message key.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from connectors.sources.mysql import model
from connectors.sources.mysql.alterprep import AlterParts, split_alter
from connectors.sources.mysql.model import Column, Table, Tables

log = logging.getLogger(__name__)

ChangeType = Literal["CREATE", "ALTER", "DROP"]


class UnparseableDdl(Exception):
    def __init__(self, sql: str, reason: str) -> None:
        super().__init__(f"cannot parse DDL statement: {reason}\n  statement: {sql[:500]}")
        self.sql = sql


@dataclass
class TableChange:
    type: ChangeType
    db: str
    table: str
    definition: Table
    old_table: str | None = None  # set for renames

    @property
    def id(self) -> str:
        new = f'"{self.db}"."{self.table}"'
        if self.old_table is not None:
            return f'"{self.db}"."{self.old_table}",{new}'
        return new


@dataclass
class DdlResult:
    """What one statement did: table changes, database-level effect, the db it applies to."""

    changes: list[TableChange]
    database: str | None
    kind: str  # create_table, alter_table, drop_table, rename_table, create_database, drop_database,
    #             use, truncate, ignored
    truncated: list[tuple[str, str]] | None = None


_SPATIAL_RE = re.compile(
    r"(?<![\w`])(point|linestring|polygon|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)"
    r"(?=\s*(?:$|[,)\s]))",
    re.I,
)
_REWRITES = [
    (re.compile(r"\bnational\s+(char|varchar|character)\b", re.I), r"\1"),
    (re.compile(r"\bnchar\s+varchar\b", re.I), "varchar"),
    (re.compile(r"\blong\s+varbinary\b", re.I), "mediumblob"),
    (re.compile(r"\blong\s+varchar\b", re.I), "mediumtext"),
    (re.compile(r"\bmiddleint\b", re.I), "mediumint"),
    (re.compile(r"\bint1\b", re.I), "tinyint"),
    (re.compile(r"\bint2\b", re.I), "smallint"),
    (re.compile(r"\bint3\b", re.I), "mediumint"),
    (re.compile(r"\bint8\b", re.I), "bigint"),
    (re.compile(r"\bfloat4\b", re.I), "float"),
    (re.compile(r"\bfloat8\b", re.I), "double"),
    (re.compile(r"\bgeomcollection\b", re.I), "geometry"),
]
# MariaDB types sqlglot does not know, in a type position: parsed as BLOB, named from the tokens
_MARIADB_TYPE_RE = re.compile(r"(?<![\w`])(inet4|inet6)(?=\s*(?:$|[,)\s]))", re.I)
_NAME_KEYWORDS = {"COLUMN", "ADD", "MODIFY", "CHANGE", "AFTER", "BY", "KEY", "INDEX", "ON", "EXISTS", "TO"}
_TYPE_WORDS = set(model.KNOWN_TYPES)
# Words that open a table-level definition (never a column name unless quoted), and the ones that
# may follow a column's type: an unknown type is only guessed between those.
_DEFINITION_WORDS = {
    "KEY",
    "INDEX",
    "CONSTRAINT",
    "UNIQUE",
    "PRIMARY",
    "FOREIGN",
    "FULLTEXT",
    "SPATIAL",
    "CHECK",
    "PERIOD",
    "PARTITION",
    "SUBPARTITION",
    "LIKE",
    "AS",
    "SYSTEM",
    "IF",
}
_AFTER_TYPE_WORDS = {
    "NOT",
    "NULL",
    "DEFAULT",
    "PRIMARY",
    "PRIMARY KEY",
    "UNIQUE",
    "KEY",
    "COMMENT",
    "COLLATE",
    "CHARACTER",
    "CHARSET",
    "AUTO_INCREMENT",
    "GENERATED",
    "AS",
    "INVISIBLE",
    "VISIBLE",
    "REFERENCES",
    "CHECK",
    "UNSIGNED",
    "SIGNED",
    "ZEROFILL",
    "BINARY",
    "ON",
    "FIRST",
    "AFTER",
    "COLUMN_FORMAT",
    "STORAGE",
    "WITH",
    "WITHOUT",
    "CONSTRAINT",
    "COMPRESSED",
    "PERSISTENT",
    "VIRTUAL",
    "STORED",
}


def _prepare(sql: str) -> str:
    def in_type_position(m: re.Match[str]) -> bool:
        # Only a type position: the previous word is a column name, not a keyword.
        before = sql[: m.start()].rstrip()
        prev = re.search(r"(`[^`]*`|\w+)$", before)
        return not (prev is None or prev.group(1).upper() in _NAME_KEYWORDS or before.endswith(("(", ",")))

    out = _SPATIAL_RE.sub(lambda m: "GEOMETRY" if in_type_position(m) else m.group(0), sql)
    sql = out
    out = _MARIADB_TYPE_RE.sub(lambda m: "BLOB" if in_type_position(m) else m.group(0), sql)
    for rx, repl in _REWRITES:
        out = rx.sub(repl, out)
    return out


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`\"'":
        q = name[0]
        return name[1:-1].replace(q + q, q)
    return name


def _definition_position(tokens: list[Any], i: int) -> bool:
    """tokens[i] can be the name of a column being defined (CREATE TABLE list, ADD, MODIFY, CHANGE)."""
    t = tokens[i]
    if t.token_type not in (TokenType.VAR, TokenType.IDENTIFIER) and not t.text.isidentifier():
        return False
    prev = tokens[i - 1]
    return (
        prev.token_type in (TokenType.L_PAREN, TokenType.COMMA)
        or prev.text.upper() in ("COLUMN", "ADD", "MODIFY")
        or (
            prev.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and i >= 2
            and tokens[i - 2].text.upper() in ("CHANGE", "COLUMN")
        )
    )


def _unknown_types(sql: str) -> tuple[str, dict[str, list[str]]]:
    """`sql` with each unknown type word in a column definition (an identifier sqlglot cannot
    parse as a type, e.g. a newer server's type) and its parameters replaced by BLOB, and
    column name (lower) → [TYPE WORD]. Used only once a statement failed to parse."""
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except TokenError:
        return sql, {}
    spans: list[tuple[int, int]] = []
    found: dict[str, list[str]] = {}
    n = len(tokens)
    for i in range(1, n - 1):
        t, nxt = tokens[i], tokens[i + 1]
        if (
            nxt.token_type != TokenType.VAR
            or nxt.text.upper() in _TYPE_WORDS
            or not _definition_position(tokens, i)
        ):
            continue
        if t.token_type != TokenType.IDENTIFIER and t.text.upper() in _DEFINITION_WORDS:
            continue
        j, end = i + 2, nxt.end
        if j < n and tokens[j].token_type == TokenType.L_PAREN:  # parameters: foo(3)
            depth = 0
            while j < n:
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[j].token_type, 0)
                end = tokens[j].end
                j += 1
                if depth == 0:
                    break
        after = tokens[j] if j < n else None
        if (
            after is not None
            and after.token_type not in (TokenType.COMMA, TokenType.R_PAREN)
            and after.text.upper() not in _AFTER_TYPE_WORDS
        ):
            continue
        spans.append((nxt.start, end))
        found.setdefault(_unquote(t.text).lower(), [nxt.text.upper()])
    for start, end in reversed(spans):
        sql = sql[:start] + "BLOB" + sql[end + 1 :]
    return sql, found


def _scan_type_names(sql: str) -> dict[str, list[str]]:
    """column name (lower) → original type keywords + UNSIGNED/ZEROFILL, from the token stream."""
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except TokenError:
        return {}
    out: dict[str, list[str]] = {}
    n = len(tokens)
    for i in range(1, n - 1):
        t, nxt = tokens[i], tokens[i + 1]
        word = nxt.text.upper()
        if word not in _TYPE_WORDS or not _definition_position(tokens, i):
            continue
        words = [word]
        j = i + 2
        if word in ("NATIONAL", "LONG") and j < n:
            words.append(tokens[j].text.upper())
            j += 1
            if words[-1] == "CHAR" and j < n and tokens[j].text.upper() == "VARYING":
                words.append("VARYING")
                j += 1
        elif word in ("DOUBLE",) and j < n and tokens[j].text.upper() == "PRECISION":
            words.append("PRECISION")
            j += 1
        elif word in ("CHAR", "CHARACTER") and j < n and tokens[j].text.upper() == "VARYING":
            words.append("VARYING")
            j += 1
        if j < n and tokens[j].token_type == TokenType.L_PAREN:
            depth = 0
            while j < n:
                if tokens[j].token_type == TokenType.L_PAREN:
                    depth += 1
                elif tokens[j].token_type == TokenType.R_PAREN:
                    depth -= 1
                    if depth == 0:
                        j += 1
                        break
                j += 1
        while j < n and tokens[j].text.upper() in ("UNSIGNED", "SIGNED", "ZEROFILL"):
            if tokens[j].text.upper() != "SIGNED":
                words.append(tokens[j].text.upper())
            j += 1
        out.setdefault(_unquote(t.text).lower(), words)
    return out


def _type_name(words: list[str]) -> str:
    """Debezium's typeName: the type keyword(s), then UNSIGNED / ZEROFILL."""
    base = [w for w in words if w not in ("UNSIGNED", "ZEROFILL")]
    name = " ".join(base)
    if name in ("DOUBLE PRECISION",):
        name = "DOUBLE PRECISION"
    if "UNSIGNED" in words or ("ZEROFILL" in words):
        name += " UNSIGNED"  # ZEROFILL implies UNSIGNED in MySQL
    if "ZEROFILL" in words:
        name += " ZEROFILL"
    return name


_DTYPE_NAMES = {
    "UINT": "INT UNSIGNED",
    "UTINYINT": "TINYINT UNSIGNED",
    "USMALLINT": "SMALLINT UNSIGNED",
    "UMEDIUMINT": "MEDIUMINT UNSIGNED",
    "UBIGINT": "BIGINT UNSIGNED",
    "UDOUBLE": "DOUBLE UNSIGNED",
    "UDECIMAL": "DECIMAL UNSIGNED",
    "UFLOAT": "FLOAT UNSIGNED",
    "TIMESTAMPTZ": "TIMESTAMP",
}


class DdlParser:
    """Applies DDL statements to a `Tables` model."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    # ------------------------------------------------------------------ entry point
    def apply(self, sql: str, current_db: str | None) -> DdlResult:
        text = sql.strip().rstrip(";").strip()
        if not text:
            return DdlResult([], current_db, "ignored")
        m = re.match(r"(?is)^rename\s+tables?\s+(.*)$", text)
        if m:
            return self._rename_tables(m.group(1), current_db)
        parts = split_alter(text) if re.match(r"(?is)^alter\s", text) else None
        if parts is not None:
            return self._alter(parts, text, current_db)
        prepared = _prepare(text)
        unknown: dict[str, list[str]] = {}
        stmts: list[Any] | None
        try:
            stmts = sqlglot.parse(prepared, read="mysql")
        except (ParseError, TokenError) as e:
            if not _is_table_ddl(text):
                return DdlResult([], current_db, "ignored")
            stmts = _parse_with_unknown_types(prepared, unknown)
            if stmts is None:
                raise UnparseableDdl(text, str(e).splitlines()[0]) from None
        if len(stmts) == 1 and isinstance(stmts[0], exp.Command) and _is_table_ddl(text) and not unknown:
            # sqlglot falls back to an opaque Command for what it cannot read: unknown types?
            stmts = _parse_with_unknown_types(prepared, unknown) or stmts
        if len(stmts) != 1 or stmts[0] is None:
            raise UnparseableDdl(text, "expected exactly one statement")
        st = stmts[0]
        types = {**unknown, **_scan_type_names(text)}
        if isinstance(st, exp.Use):
            return DdlResult([], _unquote(st.this.name) if st.this else current_db, "use")
        if isinstance(st, exp.Create):
            kind = (st.args.get("kind") or "").upper()
            if kind in ("DATABASE", "SCHEMA"):
                return self._create_db(st)
            if kind == "TABLE":
                return self._create_table(st, current_db, types)
            if kind == "INDEX" and st.args.get("unique"):
                return self._create_unique_index(st, current_db)
            return DdlResult([], current_db, "ignored")
        if isinstance(st, exp.Drop):
            kind = (st.args.get("kind") or "").upper()
            if kind in ("DATABASE", "SCHEMA"):
                return self._drop_db(st)
            if kind == "TABLE":
                return self._drop_tables(st, current_db)
            return DdlResult([], current_db, "ignored")
        if isinstance(st, exp.TruncateTable):
            ids = [self._tid(t, current_db) for t in st.expressions]
            return DdlResult([], ids[0][0] if ids else current_db, "truncate", truncated=ids)
        if isinstance(st, exp.Command) and _is_table_ddl(text):
            raise UnparseableDdl(text, "statement not understood")
        return DdlResult([], current_db, "ignored")

    # ------------------------------------------------------------------ helpers
    def _tid(self, t: exp.Expression, current_db: str | None) -> tuple[str, str]:
        if isinstance(t, exp.Schema):
            t = t.this
        name = t.name
        db = t.args.get("db")
        dbn = db.name if db is not None else current_db
        if not dbn:
            raise UnparseableDdl(t.sql("mysql"), f"no database selected for table {name!r}")
        return dbn, name

    def _db_charset(self, db: str) -> str:
        return self.tables.db_charsets.get(db) or self.tables.server_charset

    def _create_db(self, st: exp.Create) -> DdlResult:
        name = st.this.name
        changes = []
        if st.args.get("replace"):  # MariaDB CREATE OR REPLACE DATABASE drops the old one first
            changes = self._drop_db(st).changes
        cs = _charset_of(st.args.get("properties"))
        if cs:
            self.tables.db_charsets[name] = cs
        else:
            self.tables.db_charsets.setdefault(name, self.tables.server_charset)
        return DdlResult(changes, name, "create_database")

    def _drop_db(self, st: exp.Drop | exp.Create) -> DdlResult:
        target = st.this if st.this is not None else (st.args.get("tables") or st.expressions)[0]
        name = target.name
        changes = []
        for t in list(self.tables.in_db(name)):
            self.tables.drop(t.db, t.name)
            changes.append(TableChange("DROP", t.db, t.name, t))
        self.tables.db_charsets.pop(name, None)
        return DdlResult(changes, name, "drop_database")

    def _create_table(self, st: exp.Create, current_db: str | None, types: dict[str, list[str]]) -> DdlResult:
        target = st.this
        db, name = self._tid(target, current_db)
        props = st.args.get("properties")
        like = None
        if props is not None:
            for p in props.expressions:
                if isinstance(p, exp.LikeProperty):
                    like = p.this
        if like is None and isinstance(target, exp.Schema):
            for e in target.expressions:
                if isinstance(e, exp.LikeProperty):
                    like = e.this
        if st.args.get("exists") and self.tables.get(db, name) is not None:
            return DdlResult([], db, "create_table")
        if like is not None:
            sdb, sname = self._tid(like, current_db)
            src = self.tables.get(sdb, sname)
            if src is None:
                log.warning("CREATE TABLE %s.%s LIKE %s.%s: source table unknown", db, name, sdb, sname)
                return DdlResult([], db, "create_table")
            table = Table.from_dict(src.to_dict())
            table.db, table.name = db, name
            self.tables.put(table)
            return DdlResult([TableChange("CREATE", db, name, table)], db, "create_table")
        if not isinstance(target, exp.Schema):
            # CREATE TABLE ... AS SELECT: columns unknown without executing it.
            raise UnparseableDdl(st.sql("mysql"), "CREATE TABLE without a column list")
        charset = _charset_of(props) or self._db_charset(db)
        table = Table(db, name, default_charset=charset, comment=_comment_of(props))
        for e in target.expressions:
            if isinstance(e, exp.ColumnDef):
                col, key = self._column(e, types, charset, len(table.columns) + 1)
                table.columns.append(col)
                if key == "primary":
                    _set_pk(table, [col.name])
                elif key == "unique" and not table.primary_key:
                    table.primary_key = [col.name]  # Debezium: a column's UNIQUE, whatever its nullability
            else:
                _apply_key(table, e)
        self.tables.put(table)
        return DdlResult([TableChange("CREATE", db, name, table)], db, "create_table")

    def _drop_tables(self, st: exp.Drop, current_db: str | None) -> DdlResult:
        changes = []
        db = current_db
        targets = st.args.get("tables") or st.expressions or ([st.this] if st.this is not None else [])
        for t in targets:
            db, name = self._tid(t, current_db)
            old = self.tables.drop(db, name)
            if old is not None:
                changes.append(TableChange("DROP", db, name, old))
        return DdlResult(changes, db, "drop_table")

    def _rename_tables(self, body: str, current_db: str | None) -> DdlResult:
        changes = []
        db = current_db
        for pair in re.split(r",(?=(?:[^`]*`[^`]*`)*[^`]*$)", body):
            m = _RENAME_PAIR_RE.match(pair)
            if not m:
                raise UnparseableDdl("RENAME TABLE " + body, "bad RENAME TABLE list")
            (odb, oname), (ndb, nname) = (
                _split_id(m.group(1), current_db),
                _split_id(m.group(2), current_db),
            )
            table = self.tables.drop(odb, oname)
            db = ndb
            if table is None:
                continue
            table.db, table.name = ndb, nname
            self.tables.put(table)
            changes.append(TableChange("ALTER", ndb, nname, table, old_table=oname if odb == ndb else None))
        return DdlResult(changes, db, "rename_table")

    def _alter(self, parts: AlterParts, text: str, current_db: str | None) -> DdlResult:
        db, name = _split_id(parts.head[len("ALTER TABLE ") :], current_db)
        current = self.tables.get(db, name)
        if current is None:
            log.debug("ALTER TABLE %s.%s: table not in the model, ignored", db, name)
            return DdlResult([], db, "alter_table")
        unknown: dict[str, list[str]] = {}
        st = self._parse_alter(parts, text, unknown) if parts.sql else None
        table = Table.from_dict(current.to_dict())
        new_name = self._alter_actions(st, table, text, parts.if_exists, unknown) if st is not None else None
        if parts.convert is not None:
            _convert_charset(
                table, parts.convert[0] or _collation_charset(parts.convert[1]) or self._db_charset(db)
            )
        old_name = None
        if new_name is not None and new_name != (db, name):
            self.tables.drop(db, name)
            old_name = name if new_name[0] == db else None
            table.db, table.name = new_name
            db, name = new_name
        self.tables.put(table)
        return DdlResult([TableChange("ALTER", db, name, table, old_table=old_name)], db, "alter_table")

    @staticmethod
    def _parse_alter(parts: AlterParts, text: str, unknown: dict[str, list[str]]) -> exp.Alter:
        """sqlglot's tree of the rewritten statement; an action it cannot parse is named.
        Columns of unknown types go into `unknown` (name → [TYPE])."""

        def parse(sql: str) -> exp.Expr | None:
            prepared = _prepare(sql)
            try:
                st = sqlglot.parse_one(prepared, read="mysql")
            except (ParseError, TokenError):
                st = None
            if not isinstance(st, exp.Alter):  # sqlglot falls back to a Command for what it cannot read
                stmts = _parse_with_unknown_types(prepared, unknown)
                st = stmts[0] if stmts and len(stmts) == 1 else st
            return st

        st = parse(parts.sql)
        if isinstance(st, exp.Alter):
            return st
        bad = next(
            (a for a in parts.actions if not isinstance(parse(f"{parts.head} {a}"), exp.Alter)), parts.sql
        )
        raise UnparseableDdl(text, f"ALTER TABLE action not understood: {bad[:200]}")

    def _alter_actions(
        self, st: exp.Alter, table: Table, text: str, if_exists: set[str], unknown: dict[str, list[str]]
    ) -> tuple[str, str] | None:
        """Apply each action to `table`; return the new (db, name) of a RENAME. Actions that
        could change the row layout but are not understood raise UnparseableDdl, so the model
        never silently goes stale."""
        types = {**unknown, **_scan_type_names(text)}
        _table_options(
            table, st.args.get("options") or []
        )  # before the actions: new columns take its charset
        charset = table.default_charset or self._db_charset(table.db)
        new_name = None
        for act in st.args.get("actions") or []:
            if isinstance(act, exp.ColumnDef):
                col, key = self._column(act, types, charset, 0)
                if act.args.get("exists") and table.column(col.name) is not None:
                    continue  # MariaDB ADD COLUMN IF NOT EXISTS of an existing column
                _insert(table, col, act.args.get("position"))
                _column_key(table, col.name, key)
            elif isinstance(act, exp.ModifyColumn):
                self._modify(table, act, types, charset, if_exists, text)
            elif isinstance(act, exp.RenameColumn):
                c = table.column(act.this.name)
                if c is not None:
                    old = c.name
                    c.name = act.args["to"].name
                    table.primary_key = [c.name if k == old else k for k in table.primary_key]
            elif isinstance(act, exp.Drop):
                if (act.args.get("kind") or "").upper() == "COLUMN":
                    for c in act.args.get("tables") or act.expressions or []:
                        dropped = table.column(c.name)
                        if dropped is not None:
                            table.columns.remove(dropped)
                            table.primary_key = [
                                k for k in table.primary_key if k.lower() != col.name.lower()
                            ]
                # DROP INDEX / KEY / FOREIGN KEY / CHECK / CONSTRAINT: no column change. A unique key
                # serving as the message key stays the key (as in Debezium).
            elif isinstance(act, exp.AddConstraint):
                for k in act.expressions:
                    _apply_key(table, k)
            elif isinstance(act, exp.DropPrimaryKey):
                table.primary_key = []
            elif isinstance(act, exp.AlterRename):
                new_name = self._tid(act.this, table.db)
            elif isinstance(act, exp.AlterColumn):
                c = table.column(act.this.name)
                if c is not None:
                    if act.args.get("drop"):
                        c.has_default, c.default, c.default_is_expr = False, None, False
                    elif act.args.get("default") is not None:
                        c.has_default = True
                        c.default, c.default_is_expr = _default_text(act.args["default"])
                    # SET VISIBLE / INVISIBLE: the column stays in the row image
            elif isinstance(act, (exp.RenameIndex, exp.AlterIndex, exp.ForceProperty)):
                pass
            else:
                raise UnparseableDdl(text, f"ALTER TABLE action not supported: {act.sql('mysql')[:200]}")
        return new_name

    def _modify(
        self,
        table: Table,
        act: exp.ModifyColumn,
        types: dict[str, list[str]],
        charset: str,
        if_exists: set[str],
        text: str,
    ) -> None:
        cd = act.this
        old = act.args.get("rename_from")
        old_name = old.name if old is not None else cd.name
        existing = table.column(old_name)
        col, key = self._column(cd, types, charset, 0)
        if existing is None:
            if old_name.lower() in if_exists:
                return  # MariaDB MODIFY/CHANGE ... IF EXISTS of a missing column
            raise UnparseableDdl(text, f"unknown column {old_name!r} in {table.db}.{table.name}")
        idx = table.columns.index(existing)
        pos = cd.args.get("position")
        if pos is None:
            table.columns[idx] = col
        else:
            table.columns.pop(idx)
            _insert(table, col, pos)
        table.primary_key = [col.name if k.lower() == old_name.lower() else k for k in table.primary_key]
        if col.name in table.primary_key:
            col.optional = False
        _column_key(table, col.name, key)

    def _create_unique_index(self, st: exp.Create, current_db: str | None) -> DdlResult:
        """CREATE UNIQUE INDEX: the table's message key when it has no primary key (Debezium)."""
        idx = st.this
        db, name = self._tid(idx.args["table"], current_db)
        current = self.tables.get(db, name)
        params = idx.args.get("params")
        cols = _key_columns(params.args.get("columns") or []) if params is not None else []
        if current is None or current.primary_key or not _unique_key_qualifies(current, cols):
            return DdlResult([], db, "ignored")
        table = Table.from_dict(current.to_dict())
        table.primary_key = [table.column(c).name for c in cols]  # type: ignore[union-attr]  # checked above
        self.tables.put(table)
        return DdlResult([TableChange("ALTER", db, name, table)], db, "alter_table")

    def _column(
        self, cd: exp.ColumnDef, types: dict[str, list[str]], table_charset: str | None, position: int
    ) -> tuple[Column, str | None]:
        """The column and the key its definition declares: "primary", "unique" (UNIQUE, SERIAL) or None."""
        name = cd.name
        kind = cd.args.get("kind")
        words = types.get(name.lower())
        dtype = kind.this.name if kind is not None else "TEXT"
        type_name = _type_name(words) if words else _DTYPE_NAMES.get(dtype, dtype)
        base = type_name.split(" ", 1)[0]
        if base == "SERIAL":
            type_name, base = "BIGINT UNSIGNED", "BIGINT"
        if base == "CHARACTER" and "VARYING" in type_name:
            base = "VARCHAR"
        params = [p for p in (kind.expressions if kind is not None else [])]
        length = scale = None
        enum_values: list[str] = []
        if base in ("ENUM", "SET"):
            enum_values = [_literal_text(p) for p in params]
            length = 1 if base == "ENUM" else max(1, sum(len(v) for v in enum_values) + len(enum_values) - 1)
        else:
            nums = [int(_literal_text(p)) for p in params if _literal_text(p).lstrip("-").isdigit()]
            if nums:
                length = nums[0]
                if len(nums) > 1:
                    scale = nums[1]
            if base in ("DECIMAL", "DEC", "FIXED", "NUMERIC"):
                if length is None:
                    length = 10
                if scale is None:
                    scale = 0
        jdbc = model.JDBC_TYPES.get(base, model.OTHER)
        if base in ("NATIONAL",):
            jdbc = model.NVARCHAR if "VARCHAR" in type_name or "VARYING" in type_name else model.NCHAR
        col = Column(
            name=name,
            type_name=type_name,
            position=position,
            jdbc_type=jdbc,
            length=length,
            scale=scale,
            enum_values=enum_values,
            type_expression=type_name,
        )
        key: str | None = None
        charset = None
        collate = None
        for c in cd.constraints:
            k = c.kind
            if isinstance(k, exp.NotNullColumnConstraint):
                col.optional = bool(k.args.get("allow_null"))
            elif isinstance(k, exp.DefaultColumnConstraint):
                col.has_default = True
                col.default, col.default_is_expr = _default_text(k.this)
            elif isinstance(k, exp.AutoIncrementColumnConstraint):
                col.auto_increment = col.generated = True  # Debezium's DDL parser marks both
            elif isinstance(k, exp.PrimaryKeyColumnConstraint):
                key = "primary"
            elif isinstance(k, exp.UniqueColumnConstraint) and key is None:
                key = "unique"
            elif isinstance(k, (exp.ComputedColumnConstraint, exp.GeneratedAsIdentityColumnConstraint)):
                col.generated = True
            elif isinstance(k, exp.CommentColumnConstraint):
                col.comment = _literal_text(k.this)
            elif isinstance(k, exp.CharacterSetColumnConstraint):
                charset = k.this.name.lower()
            elif isinstance(k, exp.CollateColumnConstraint):
                collate = k.this.name.lower()
        if dtype == "SERIAL" or (words and words[0] == "SERIAL"):
            col.optional, col.auto_increment = False, True
            key = key or "unique"  # SERIAL = BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
        if base in model.STRING_TYPES or base == "NATIONAL":
            if charset is None and collate:
                charset = collate.split("_", 1)[0]
            col.charset = charset or table_charset
            if base in ("NCHAR", "NVARCHAR", "NATIONAL"):
                col.charset = "utf8mb3" if charset is None else charset
        if key == "primary":
            col.optional = False
        return col, key


def _parse_with_unknown_types(prepared: str, unknown: dict[str, list[str]]) -> list[Any] | None:
    """Second try for a statement sqlglot refused: with unknown column types as placeholders
    (their names go into `unknown`). None when that does not parse either."""
    sql, found = _unknown_types(prepared)
    if not found:
        return None
    try:
        stmts = sqlglot.parse(sql, read="mysql")
    except (ParseError, TokenError):
        return None
    unknown.update(found)
    return stmts


# --------------------------------------------------------------------------- statement targets
_ID1 = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_ID = rf"{_ID1}(?:\.{_ID1})?"
_TABLE_TARGET_RES = [
    re.compile(rx, re.I | re.S)
    for rx in (
        rf"^\s*create\s+(?:or\s+replace\s+)?(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?({_ID})",
        rf"^\s*alter\s+(?:online\s+)?(?:ignore\s+)?table\s+(?:if\s+exists\s+)?({_ID})",
        rf"^\s*truncate\s+(?:table\s+)?({_ID})",
        rf"^\s*(?:create\s+(?:or\s+replace\s+)?(?:online\s+|offline\s+)?(?:unique\s+|fulltext\s+|spatial\s+)?"
        rf"|drop\s+(?:online\s+|offline\s+)?)index\s+(?:if\s+(?:not\s+)?exists\s+)?{_ID1}\s+"
        rf"(?:using\s+\w+\s+)?on\s+({_ID})",
    )
]
_DROP_TABLES_RE = re.compile(
    r"^\s*drop\s+(?:temporary\s+)?tables?\s+(?:if\s+exists\s+)?(.+?)"
    r"(?:\s+(?:restrict|cascade|wait\s+\d+|nowait))?\s*;?\s*(?:/\*.*\*/\s*)?$",
    re.I | re.S,
)
_RENAME_RE = re.compile(r"^\s*rename\s+tables?\s+(.+?)\s*;?\s*$", re.I | re.S)
# one `old TO new` of RENAME TABLE: quoted names may hold spaces and doubled backquotes
_RENAME_PAIR_RE = re.compile(rf"^\s*({_ID})\s+to\s+({_ID})\s*$", re.I | re.S)
_DATABASE_RE = re.compile(
    rf"^\s*(?:create|drop|alter)\s+(?:or\s+replace\s+)?(?:database|schema)\s+"
    rf"(?:if\s+(?:not\s+)?exists\s+)?({_ID1})",
    re.I | re.S,
)


@dataclass
class DdlTargets:
    """What a statement changes, read without parsing it: tables and databases."""

    tables: list[tuple[str, str]]
    databases: list[str]


def ddl_targets(sql: str, current_db: str | None) -> DdlTargets | None:
    """The tables (db, name) or databases a table/database DDL statement changes, from its head
    alone (it need not parse); None when the statement is not recognised or a table name has no
    database."""
    text = sql.strip()
    try:
        m = _DATABASE_RE.match(text)
        if m:
            return DdlTargets([], [_unquote(m.group(1))])
        for rx in _TABLE_TARGET_RES:
            m = rx.match(text)
            if m:
                return DdlTargets([_split_id(m.group(1), current_db)], [])
        m = _DROP_TABLES_RE.match(text)
        if m:
            names = re.split(r",(?=(?:[^`]*`[^`]*`)*[^`]*$)", m.group(1))
            return DdlTargets([_split_id(n, current_db) for n in names], [])
        m = _RENAME_RE.match(text)
        if m:
            out = []
            for pair in re.split(r",(?=(?:[^`]*`[^`]*`)*[^`]*$)", m.group(1)):
                ends = _RENAME_PAIR_RE.match(pair)
                if not ends:
                    return None
                out += [_split_id(ends.group(1), current_db), _split_id(ends.group(2), current_db)]
            return DdlTargets(out, [])
    except UnparseableDdl:  # a table name without a database and none selected
        return None
    return None


def _split_id(text: str, current_db: str | None) -> tuple[str, str]:
    parts = re.findall(r"`((?:[^`]|``)*)`|([^.`]+)", text.strip())
    names = [(a.replace("``", "`") if a else b) for a, b in parts]
    if len(names) == 1:
        if not current_db:
            raise UnparseableDdl(text, "no database selected")
        return current_db, names[0]
    return names[0], names[1]


def _is_table_ddl(text: str) -> bool:
    return bool(
        re.match(
            r"(?is)^\s*(create(\s+or\s+replace)?|alter(\s+online|\s+ignore)*|drop|rename|truncate)\s+"
            r"(temporary\s+)?(table|database|schema)\b",
            text,
        )
    )


def _literal_text(e: Any) -> str:
    if isinstance(e, exp.DataTypeParam):
        e = e.this
    if isinstance(e, exp.Literal):
        return str(e.this)
    if isinstance(e, exp.Expression):
        return e.name or e.sql("mysql")
    return str(e)


def _default_text(e: exp.Expression) -> tuple[str | None, bool]:
    """(default text, is-expression). NULL → (None, False)."""
    if isinstance(e, exp.Null):
        return None, False
    if isinstance(e, exp.Literal):
        return str(e.this), False
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal):
        return "-" + str(e.this.this), False
    if isinstance(e, exp.Boolean):
        return ("1" if e.this else "0"), False
    if isinstance(e, exp.BitString):
        return f"b'{e.this}'", False
    if isinstance(e, exp.HexString):
        return str(int(e.this, 16)), False
    if isinstance(e, exp.Paren):
        return _default_text(e.this) if isinstance(e.this, (exp.Literal, exp.Neg)) else (e.sql("mysql"), True)
    if isinstance(e, exp.Column) and not e.table:
        return e.name, e.name.upper().startswith(("CURRENT_", "NOW", "LOCALTIME"))
    return e.sql("mysql"), True


def _charset_of(node: Any) -> str | None:
    if node is None:
        return None
    items = node.expressions if isinstance(node, exp.Properties) else [node]
    collate = None
    for p in items:
        if isinstance(p, exp.CharacterSetProperty):
            return p.this.name.lower()
        if isinstance(p, exp.CollateProperty):
            collate = p.this.name.lower()
    return collate.split("_", 1)[0] if collate else None


def _comment_of(props: Any) -> str | None:
    if props is None:
        return None
    for p in props.expressions:
        if isinstance(p, exp.SchemaCommentProperty):
            return _literal_text(p.this)
    return None


def _key_columns(exprs: list[Any]) -> list[str]:
    """Column names of a key's parts: `a`, `a DESC`, prefix parts `a(10)`."""
    out = []
    for e in exprs:
        if isinstance(e, exp.Ordered):
            e = e.this
        out.append(e.this.name if isinstance(e, exp.ColumnPrefix) else e.name)
    return out


def _pk_names(pk: exp.Expression) -> list[str]:
    return _key_columns(pk.expressions)


def _unique_key_qualifies(table: Table, names: list[str]) -> bool:
    """Debezium uses a UNIQUE key as the message key only if all its columns exist and are NOT NULL."""
    cols = [table.column(n) for n in names]
    return bool(cols) and all(c is not None and not c.optional for c in cols)


def _apply_key(table: Table, e: exp.Expression) -> None:
    """A table-level key definition (CREATE TABLE element, ALTER TABLE ADD ...): PRIMARY KEY
    replaces the key; the first UNIQUE key whose columns are all NOT NULL becomes the key of a
    table without one (MySqlAntlrDdlParser.parseUniqueIndexColumnNames). Indexes, foreign keys
    and checks change nothing here."""
    if isinstance(e, exp.Constraint):
        for k in e.expressions:
            _apply_key(table, k)
    elif isinstance(e, exp.PrimaryKey):
        _set_pk(table, _pk_names(e))
    elif isinstance(e, exp.UniqueColumnConstraint) and not table.primary_key:
        schema = e.this
        names = _key_columns(schema.expressions) if isinstance(schema, exp.Schema) else []
        if _unique_key_qualifies(table, names):
            table.primary_key = [table.column(n).name for n in names]  # type: ignore[union-attr]  # names of its columns


def _column_key(table: Table, name: str, key: str | None) -> None:
    """The key a column definition declares (ADD/MODIFY/CHANGE COLUMN ... PRIMARY KEY | UNIQUE)."""
    if key == "primary":
        _set_pk(table, [name])
    elif key == "unique" and not table.primary_key:
        table.primary_key = [name]


def _table_options(table: Table, options: list[Any]) -> None:
    """ALTER TABLE options: [DEFAULT] CHARACTER SET / COLLATE set the default charset of columns
    added later, COMMENT the table comment; ENGINE, ALGORITHM, LOCK, AUTO_INCREMENT, ROW_FORMAT,
    ORDER BY ... have no schema effect."""
    charset = collate = None
    for opt in options:
        if isinstance(opt, exp.CharacterSetProperty):
            charset = opt.this.name.lower()
        elif isinstance(opt, exp.CollateProperty):
            collate = _collation_charset(opt.this.name)
        elif isinstance(opt, exp.SchemaCommentProperty):
            table.comment = _literal_text(opt.this)
    table.default_charset = charset or collate or table.default_charset


def _collation_charset(collation: str | None) -> str | None:
    return collation.lower().split("_", 1)[0] if collation else None


def _convert_charset(table: Table, charset: str) -> None:
    """ALTER TABLE ... CONVERT TO CHARACTER SET: the table default and every character column
    (MySQL also widens TEXT types when needed; the binlog's table map carries the real length
    prefix, so decoding is unaffected)."""
    table.default_charset = charset
    for c in table.columns:
        if c.base_type in model.STRING_TYPES and c.base_type not in ("NCHAR", "NVARCHAR"):
            c.charset = charset


def _set_pk(table: Table, names: list[str]) -> None:
    real = []
    for n in names:
        c = table.column(n)
        if c is not None:
            c.optional = False  # MySQL forces primary key columns NOT NULL
            real.append(c.name)
    table.primary_key = real


def _insert(table: Table, col: Column, pos: Any) -> None:
    if pos is not None and (pos.args.get("position") or "").upper() == "FIRST":
        table.columns.insert(0, col)
    elif pos is not None and pos.this is not None:
        after = table.column(pos.this.name)
        idx = table.columns.index(after) + 1 if after is not None else len(table.columns)
        table.columns.insert(idx, col)
    else:
        table.columns.append(col)
    table.renumber()


def table_from_show_create(db: str, create_sql: str, tables: Tables) -> Table:
    """Bootstrap: the model of one table from `SHOW CREATE TABLE` text."""
    parser = DdlParser(tables)
    tables.drop(db, _create_name(create_sql))
    res = parser.apply(create_sql, db)
    if not res.changes:
        raise UnparseableDdl(create_sql, "SHOW CREATE TABLE output not understood")
    return res.changes[0].definition


def _create_name(sql: str) -> str:
    m = re.match(
        r"(?is)^\s*create\s+(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?(`(?:[^`]|``)*`|\S+)", sql
    )
    if not m:
        return ""
    name = m.group(1)
    return _split_id(name, "_")[1]
