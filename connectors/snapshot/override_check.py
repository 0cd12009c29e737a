"""Each `snapshot.select.statement.overrides.<table>` of a captured table, tried on the server
before a snapshot starts anything (no slot, no lock, no Spark): sqlglot checks the statement's
shape when the configuration loads, but only the database knows its columns and types. A
misspelt column is then one message naming the property, not a driver's traceback mid-plan
with a slot or a global read lock already taken."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from connectors.api import TerminalError
from connectors.snapshot.reading import select_text

OVERRIDE = "snapshot.select.statement.overrides."


def check_overrides(
    overrides: Mapping[str, str],
    captures: Callable[[str, str], bool],
    quote: Callable[[str], str],
    trial: Callable[[str], str | None],
    dialect: str,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Run each captured table's override as its snapshot reads it, returning no row (`LIMIT 0`:
    the server parses and plans it, and reads nothing). `trial(query)` runs one query and
    returns the server's reason when it refuses the statement (None when it runs, or when the
    table does not exist: a snapshot reads no such table, and Debezium ignores its override).
    `labels`: what to call a table's statement in the message (default: its property)."""
    for table, text in sorted(overrides.items()):
        ns, _, name = table.partition(".")
        if not name or not captures(ns, name):
            continue  # not read by a snapshot, so not run
        source = f"{quote(ns)}.{quote(name)}"
        query = select_text(table, source, "*", [], text, dialect) + " LIMIT 0"
        reason = trial(query)
        if reason is None:
            continue
        label = (labels or {}).get(table, f"{OVERRIDE}{table}")
        raise TerminalError(
            f"{label}: the database refused it: {reason}",
            f"correct the statement (the columns and types of {table}) or remove it; "
            "nothing was started (no slot, lock or Spark job)",
        )
