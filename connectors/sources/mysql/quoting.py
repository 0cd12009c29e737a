"""MySQL identifier quoting, shared by the streaming source and the snapshot readers."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    """`name` as a backquoted identifier; a backquote inside it is doubled, as the server expects."""
    return "`" + name.replace("`", "``") + "`"


def quote_table(db: str, table: str) -> str:
    return f"{quote_ident(db)}.{quote_ident(table)}"
