"""ALTER TABLE forms sqlglot does not parse, rewritten (on its token stream) into ones it does.

sqlglot 30 falls back to an opaque `Command` for several MySQL/MariaDB ALTER TABLE forms, which
would stop the connector as "unparseable". `split_alter(sql)` cuts the statement into its
comma-separated actions and rewrites them:

  * `ALTER ONLINE|IGNORE TABLE`, `WAIT n` / `NOWAIT`           → dropped (no schema effect);
  * `CONVERT TO CHARACTER SET|CHARSET cs [COLLATE co]`         → taken out, returned as `convert`;
  * `ADD [COLUMN] [IF NOT EXISTS] (c1 def, c2 def)`            → `ADD COLUMN c1 def, ADD COLUMN c2 def`;
  * `MODIFY|CHANGE [COLUMN] IF EXISTS ...`                      → without `IF EXISTS` (the column
    names are returned in `if_exists`: a missing one is then no error);
  * MariaDB `ADD INDEX|KEY|CONSTRAINT ... IF NOT EXISTS`           → without `IF NOT EXISTS`;
  * `RENAME AS x`                                               → `RENAME TO x`;
  * partition maintenance, `DISABLE|ENABLE KEYS`, tablespace and `ADD [CONSTRAINT x] CHECK` actions
    → dropped: they change no column and no key.

Everything else is passed through unchanged for sqlglot; what it still cannot parse is reported
by the caller with the action's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

# First word(s) of actions that change neither columns nor keys.
_NO_EFFECT_FIRST = frozenset(
    {
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "TRUNCATE",
        "COALESCE",
        "REORGANIZE",
        "EXCHANGE",
        "DISCARD",
        "IMPORT",
        "DISABLE",
        "ENABLE",
        "REMOVE",
    }
)


@dataclass
class AlterParts:
    head: str  # "ALTER TABLE <name>"
    actions: list[str]  # rewritten actions, in order
    convert: tuple[str | None, str | None] | None = None  # (charset, collation) of CONVERT TO
    if_exists: set[str] = field(default_factory=set)  # lower-case columns of MODIFY/CHANGE IF EXISTS

    @property
    def sql(self) -> str:
        return f"{self.head} {', '.join(self.actions)}" if self.actions else ""


def _word(t: Token) -> str:
    return t.text.upper() if t.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) else ""


def _split_top(tokens: list[Token]) -> list[list[Token]]:
    """Token runs separated by commas outside parentheses."""
    out: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        if t.token_type == TokenType.COMMA and depth == 0:
            out.append([])
        else:
            out[-1].append(t)
    return [run for run in out if run]


def split_alter(sql: str) -> AlterParts | None:
    """The statement's head and rewritten actions; None when it is not an ALTER TABLE."""
    try:
        toks = sqlglot.tokenize(sql, read="mysql")
    except TokenError:
        return None
    words = [_word(t) for t in toks]
    i = 1
    if not words or words[0] != "ALTER":
        return None
    if i < len(words) and words[i] in ("ONLINE", "IGNORE"):
        i += 1
    if i >= len(words) or words[i] != "TABLE":
        return None
    i += 1
    if words[i : i + 2] == ["IF", "EXISTS"]:
        i += 2
    name_start = i
    i += 1
    while i + 1 < len(toks) and toks[i].token_type == TokenType.DOT:
        i += 2
    head = "ALTER TABLE " + sql[toks[name_start].start : toks[i - 1].end + 1]
    if i < len(words) and words[i] == "NOWAIT":
        i += 1
    elif i + 1 < len(words) and words[i] == "WAIT":
        i += 2
    parts = AlterParts(head, [])
    for run in _split_top(toks[i:]):
        _action(sql, run, parts)
    return parts


def _text(sql: str, run: list[Token]) -> str:
    return sql[run[0].start : run[-1].end + 1]


def _action(sql: str, run: list[Token], parts: AlterParts) -> None:
    w = [_word(t) for t in run]
    if (
        w[0] in _NO_EFFECT_FIRST
        or w[0].startswith("PARTITION")
        or (w[0] in ("ADD", "DROP") and w[1:2] == ["PARTITION"])
        or (w[0] == "ADD" and ("CHECK" in w[1:4]))
    ):
        return
    if w[:2] == ["CONVERT", "TO"]:
        j = 4 if w[2:4] == ["CHARACTER", "SET"] else 3
        j += 1 if j < len(w) and run[j].token_type == TokenType.EQ else 0
        charset = run[j].text.lower() if j < len(run) and w[j] != "DEFAULT" else None
        collation = None
        if "COLLATE" in w:
            k = w.index("COLLATE") + 1
            k += 1 if k < len(run) and run[k].token_type == TokenType.EQ else 0
            collation = run[k].text.lower() if k < len(run) else None
        parts.convert = (charset, collation)
        return
    if w[0] == "ADD":
        j = 1
        if j < len(w) and w[j] == "COLUMN":
            j += 1
        if w[j : j + 3] == ["IF", "NOT", "EXISTS"]:
            j += 3
        if (
            j < len(run)
            and run[j].token_type == TokenType.L_PAREN
            and run[-1].token_type == TokenType.R_PAREN
        ):
            exists = "IF NOT EXISTS " if j > 1 and w[j - 1] == "EXISTS" else ""
            for col in _split_top(run[j + 1 : -1]):
                parts.actions.append(f"ADD COLUMN {exists}{_text(sql, col)}")
            return
        at = next((i for i in range(2, len(w) - 2) if w[i : i + 3] == ["IF", "NOT", "EXISTS"]), None)
        if w[1] != "COLUMN" and at is not None:  # MariaDB ADD INDEX|KEY|CONSTRAINT ... IF NOT EXISTS
            parts.actions.append(f"{_text(sql, run[:at])} {_text(sql, run[at + 3 :])}")
            return
    if w[0] in ("MODIFY", "CHANGE"):
        j = 2 if w[1:2] == ["COLUMN"] else 1
        if w[j : j + 2] == ["IF", "EXISTS"]:
            rest = run[j + 2 :]
            if rest:
                parts.if_exists.add(rest[0].text.strip("`").lower())
            parts.actions.append(f"{w[0]} COLUMN {_text(sql, rest)}")
            return
    if w[:2] == ["RENAME", "AS"]:
        parts.actions.append(f"RENAME TO {_text(sql, run[2:])}")
        return
    parts.actions.append(_text(sql, run))
