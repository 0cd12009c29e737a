"""`additional-conditions` filters of an `execute-snapshot` signal, checked with sqlglot.

A filter must be ONE boolean predicate over the table's own columns: comparisons, IN lists,
BETWEEN, LIKE, IS [NOT] NULL, AND/OR/NOT, arithmetic, literals and a short list of deterministic
functions. Everything is parsed, then every node of the tree is checked against an allow-list, so
sub-queries, other statements, user or session variables, placeholders and arbitrary functions
(`pg_sleep`, `SLEEP`, `LOAD_FILE`, ...) are refused whatever their spelling. Comments are refused
too: they are how an injection hides the rest of a statement. The accepted filter is kept as the
tree rendered back by sqlglot (`Condition.sql`), never as the text the user sent.

A blocking snapshot's filter may also be a whole `SELECT * FROM <table> WHERE ...` (Debezium
takes it as a `snapshot.select.statement.overrides` query): then its WHERE is the predicate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from connectors.settings.overrides import OverrideError, parse_override

DIALECTS = {"postgres": "postgres", "mysql": "mysql", "mariadb": "mysql"}

# Nodes a filter may contain. Anything else (Select, Subquery, Exists, Anonymous functions,
# Parameter, SessionParameter, Placeholder, PropertyEQ (`:=`), Star, Command, ...) is refused.
_OPERATORS: tuple[type[exp.Expression], ...] = (
    exp.And,
    exp.Or,
    exp.Not,
    exp.Xor,
    exp.Paren,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Escape,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Tuple,
)
_LEAVES: tuple[type[exp.Expression], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.DataType,
    exp.DataTypeParam,
    exp.Interval,
    exp.Var,  # an interval's unit; a bare word parses as a Column
)
_FUNCTIONS: tuple[type[exp.Expression], ...] = (
    exp.Cast,
    exp.Lower,
    exp.Upper,
    exp.Length,
    exp.Abs,
    exp.Coalesce,
    exp.Trim,
    exp.Substring,
    exp.Concat,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.Extract,
)
_ALLOWED = _OPERATORS + _LEAVES + _FUNCTIONS
# Functions sqlglot does not model (Anonymous) that are safe: the clock, in MySQL's spellings.
_SAFE_ANONYMOUS = frozenset({"now", "curdate", "curtime", "utc_timestamp", "utc_date", "sysdate"})
# What the whole filter may be: something true or false.
_BOOLEAN = (exp.Predicate, exp.Connector, exp.Not, exp.Xor, exp.Boolean, exp.Column)


class FilterError(ValueError):
    """Why a filter is refused (a message for the user)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A checked filter: `tree` is the parsed predicate; `sql(dialect)` renders it."""

    table: str
    tree: exp.Expr
    dialect: str

    @property
    def sql(self) -> str:
        return self.tree.sql(dialect=self.dialect)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.name for c in self.tree.find_all(exp.Column)))


def _refuse_comments(text: str, dialect: str) -> None:
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    except TokenError as e:
        raise FilterError(f"cannot be read as SQL ({str(e).splitlines()[0]})") from None
    if any(t.comments for t in tokens):
        raise FilterError("comments are not allowed in a filter")


def _paren_inner(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def check_filter(
    table: str, text: str, connector: str, columns: Iterable[str] | None = None, *, allow_select: bool = False
) -> Condition:
    """Parse and check one filter of `table`. `columns`: the table's columns when known (a
    column that is not one of them is refused). `allow_select`: a blocking snapshot's filter may
    be a `SELECT * FROM <table> WHERE ...` query. Raises FilterError."""
    dialect = DIALECTS[connector]
    if not isinstance(text, str) or not text.strip():
        raise FilterError("the filter is empty")
    _refuse_comments(text, dialect)
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except (ParseError, TokenError) as e:
        raise FilterError(f"cannot be read as SQL ({str(e).splitlines()[0]})") from None
    if len(statements) != 1:
        raise FilterError(f"must be one condition, found {len(statements)} statements")
    tree = statements[0]
    if isinstance(tree, exp.Select):
        if not allow_select:
            raise FilterError("must be a condition (the WHERE part), not a query")
        try:
            override = parse_override(table, text, dialect)
        except OverrideError as e:
            raise FilterError(str(e).split(": ", 1)[-1]) from None
        if not override.chunkable or override.where is None:
            raise FilterError(f"a query filter must be SELECT * FROM {table} WHERE <condition>")
        where = tree.args["where"]
        tree = where.this
    if not isinstance(_paren_inner(tree), _BOOLEAN):
        raise FilterError(f"must be a true/false condition, not {type(_paren_inner(tree)).__name__}")
    own = _own_names(table)
    known = {c.lower() for c in columns} if columns is not None else None
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            if node.name.lower() in _SAFE_ANONYMOUS and not node.expressions:
                continue
            raise FilterError(f"function {node.name}() is not allowed in a filter")
        if not isinstance(node, _ALLOWED):
            raise FilterError(f"{_describe(node)} is not allowed in a filter")
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            raise FilterError("sub-queries are not allowed in a filter")
        if isinstance(node, exp.Column):
            qualifier = tuple(p.name.lower() for p in node.parts[:-1])
            if qualifier and own[-len(qualifier) :] != qualifier:
                raise FilterError(f"column {node.sql(dialect=dialect)} is not a column of {table}")
            if known is not None and node.name.lower() not in known:
                raise FilterError(f"{table} has no column {node.name!r}")
    return Condition(table, tree, dialect)


def _own_names(table: str) -> tuple[str, ...]:
    return tuple(p.strip('"`').lower() for p in table.split("."))


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Union):
        return "a sub-query"
    if isinstance(node, exp.Parameter | exp.SessionParameter | exp.Placeholder | exp.PropertyEQ):
        return f"a variable or parameter ({node.sql()})"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name()}()"
    return type(node).__name__
