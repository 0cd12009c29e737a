"""skip.messages.without.change for PostgreSQL: an event factory that drops updates whose
captured columns did not change. Chosen at start only when the option is on, so the default
per-row path has no extra test."""

from __future__ import annotations

from typing import Any

from connectors.postgres import pgoutput as pgo
from connectors.postgres.events import PgEventFactory
from connectors.tableschema import TableSchema, unchanged_update


class SkipUnchangedEventFactory(PgEventFactory):
    """Compares `before` and `after` as Debezium does: useful with REPLICA IDENTITY FULL only,
    since other updates carry no old row (or only the key's) and are emitted."""

    def change(self, out: list[Any], tx: Any, ts: TableSchema, m: Any, *rest: Any) -> None:
        if type(m) is pgo.Update and unchanged_update(ts, m.old, m.new):
            return
        super().change(out, tx, ts, m, *rest)
