"""`snapshot.mode=recovery` (MySQL/MariaDB): rebuild a lost or damaged schema history.

As Debezium's: no data is read; the tables' current structure is recorded in the schema history
at the stored offset, and streaming resumes from that offset. That is right only if no table
changed since the stored position, so the binlog between the stored position and now is read
first (`SHOW BINLOG EVENTS`, a page at a time) and a schema change there refuses the recovery,
naming the statement and where it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

from connectors.api import TerminalError
from connectors.settings.config import ConnectorConfig
from connectors.sources.mysql import setup
from connectors.sources.mysql.connection import current_position
from connectors.sources.mysql.source import MySqlSource

log = logging.getLogger(__name__)

PAGE = 5000  # binlog events per SHOW BINLOG EVENTS page
# Statements that change a table or database structure (comments and `use db;` may come first).
_DDL = re.compile(
    r"^(?:\s*/\*.*?\*/)*\s*(?:use\s+\S+;\s*)?(?:/\*.*?\*/\s*)*"
    r"(?:CREATE|ALTER|DROP|RENAME|TRUNCATE)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?"
    r"(?:TABLE|TABLES|DATABASE|SCHEMA|INDEX|UNIQUE|FULLTEXT|SPATIAL|VIEW)\b",
    re.IGNORECASE | re.DOTALL,
)


def _files(cur: Any, first: str) -> list[str]:
    cur.execute("SHOW BINARY LOGS")
    names = [str(r[0]) for r in cur.fetchall()]
    return names[names.index(first) :] if first in names else []


def _events(cur: Any, file: str, pos: int) -> Iterator[tuple[str, int, str, str]]:
    """(file, position, event type, info) of the events of `file` from `pos`, a page at a time."""
    offset = 0
    while True:
        cur.execute(f"SHOW BINLOG EVENTS IN %s FROM %s LIMIT {offset}, {PAGE}", (file, pos))
        rows = cur.fetchall()
        for r in rows:
            yield file, int(r[1]), str(r[2]), str(r[5] or "")
        if len(rows) < PAGE:
            return
        offset += PAGE


def schema_changes_since(cur: Any, offset: Mapping[str, Any]) -> Iterator[tuple[str, int, str]]:
    """(file, position, statement) of every schema change in the binlog after `offset`."""
    end_file, end_pos, _ = current_position(cur)
    start_file, start_pos = str(offset["file"]), int(offset["pos"])
    for f in _files(cur, start_file):
        for file, pos, kind, info in _events(cur, f, start_pos if f == start_file else 4):
            if file == end_file and pos >= end_pos:
                return
            if kind == "Query" and _DDL.match(info):
                yield file, pos, info
        if f == end_file:
            return


def recover_history(cfg: ConnectorConfig, offset: Mapping[str, Any] | None) -> None:
    """Rebuild the schema history at `offset` from the tables' current structure, or refuse."""
    if not offset:
        raise TerminalError(
            "snapshot.mode=recovery rebuilds the schema history for a stored offset, and none is stored",
            "use snapshot.mode=initial (a first start snapshots the schema and the data)",
        )
    source = MySqlSource(cfg)
    source._conn = setup.connect(source.settings)
    try:
        facts = setup.check_server(source._conn, source.server_id)
        setup.check_position(source._conn, offset, facts["mariadb"], source.config_path)
        with source._conn.cursor() as cur:
            found = next(schema_changes_since(cur, offset), None)
        if found is not None:
            file, pos, statement = found
            raise TerminalError(
                f"snapshot.mode=recovery: the schema changed after the stored position "
                f"{offset['file']}:{offset['pos']} ({file}:{pos}: {statement.strip()[:200]}), so the current "
                "table structure cannot stand for the structure at that position",
                "run `tidemark offsets reset --config FILE --yes` with snapshot.mode=initial: a new snapshot of "
                "the schema and the data (or snapshot.mode=when_needed)",
            )
        source._schema_snapshot(at=(str(offset["file"]), int(offset["pos"]), str(offset.get("gtids") or "")))
        log.info(
            "snapshot.mode=recovery: schema history rebuilt at %s:%s from the current table structures",
            offset["file"],
            offset["pos"],
        )
    finally:
        source.close()
