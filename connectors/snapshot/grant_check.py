"""Whether `database.user` may read every table a snapshot reads, checked before a snapshot
starts anything (no slot, no lock, no Spark). Without it, one table the user may not SELECT
stopped the snapshot while planning, after PostgreSQL's slot or MySQL's global read lock was
taken, with the driver's traceback. Debezium needs the same grant; it fails later, mid-snapshot.

Each connector finds its unreadable tables its own way (PostgreSQL asks the catalog's privilege
functions, which follow role membership; MySQL tries the read); this module words the refusal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from connectors.api import TerminalError

_SHOWN = 10  # tables named in the message; the count says how many more
# Where the snapshot's tables come from, for the way out of the refusal: the connector's filters,
# unless a signal chose them (a blocking snapshot passes its own).
FILTERS = "table.include.list or snapshot.include.collection.list"


@dataclass(frozen=True)
class Denied:
    """A table the snapshot would read and the user may not: `why` is what is missing."""

    table: str  # schema.table (PostgreSQL) or db.table (MySQL), as in table.include.list
    why: str


def refuse_unreadable(user: str, denied: Sequence[Denied], grant: str, scope: str = FILTERS) -> None:
    """Raise one TerminalError naming every unreadable table (the first ten, and how many more),
    with `grant`: the statement that fixes it, for the DBA to run; or leaving the table out of
    `scope`, what chose it."""
    if not denied:
        return
    shown = "; ".join(f"{d.table} ({d.why})" for d in denied[:_SHOWN])
    more = f"; and {len(denied) - _SHOWN} more" if len(denied) > _SHOWN else ""
    noun = "a table" if len(denied) == 1 else f"{len(denied)} tables"
    raise TerminalError(
        f"database.user {user} may not read {noun} the snapshot reads: {shown}{more}",
        f"grant it ({grant}), or leave the table out of {scope}; "
        "nothing was started (no slot, lock or Spark job)",
    )
