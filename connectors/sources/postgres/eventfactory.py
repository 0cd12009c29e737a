"""Event factory variants chosen at start from the options, so the default per-row path has no
extra test: `skip.messages.without.change` drops updates whose captured columns did not change,
`event.processing.failure.handling.mode` warn/skip drops a change whose values cannot be
converted instead of stopping the connector."""

from __future__ import annotations

from typing import Any

from connectors.api import Lsn, TidemarkError
from connectors.format.tableschema import TableSchema, failure_mode, skipped_failed_event, unchanged_update
from connectors.settings.model import PostgresSettings
from connectors.sources.postgres import pgoutput as pgo
from connectors.sources.postgres.events import PgEventFactory


class SkipUnchangedEventFactory(PgEventFactory):
    """Compares `before` and `after` as Debezium does: useful with REPLICA IDENTITY FULL only,
    since other updates carry no old row (or only the key's) and are emitted."""

    def change(self, out: list[Any], tx: Any, ts: TableSchema, m: Any, *rest: Any) -> None:
        if type(m) is pgo.Update and unchanged_update(ts, m.old, m.new):
            return
        super().change(out, tx, ts, m, *rest)


class FailureTolerantMixin:
    """A change whose conversion raises is left out (its records, none counted yet: values are
    converted before the transaction counters move) and logged per the mode."""

    failure_mode = "warn"

    def change(self, out: list[Any], tx: Any, ts: TableSchema, m: Any, lsn: int, *rest: Any) -> None:
        n = len(out)
        try:
            super().change(out, tx, ts, m, lsn, *rest)  # type: ignore[misc]
        except TidemarkError:
            raise
        except Exception as exc:  # noqa: BLE001 - the mode says what to do with any conversion failure
            del out[n:]
            skipped_failed_event(self.failure_mode, exc, f"change of {ts.collection} at LSN {Lsn(lsn)}")


def factory_class(src: PostgresSettings) -> type[PgEventFactory]:
    cls: type[PgEventFactory] = (
        SkipUnchangedEventFactory if src.skip_messages_without_change else PgEventFactory
    )
    mode = failure_mode(src)
    if mode != "fail":
        cls = type("FailureTolerantEventFactory", (FailureTolerantMixin, cls), {"failure_mode": mode})
    return cls
