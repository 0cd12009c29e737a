"""A PostgreSQL snapshot chunk whose connection the server ended is read again by its task, in the
same exported snapshot, a bounded number of times (`spark_jobs.snapshot_tasks.run_chunk`); a
snapshot that is gone is not retried. Runs the task function in this process, on the shared
server, with its connections kept from one chunk to the next as in a Spark worker."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from cfgutil import config

from connectors.api import TransientError
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.kept import Kept
from spark_jobs import snapshot_tasks
from spark_jobs.snapshot_tasks import ChunkSpec, run_chunk

ROWS = 1000


def _end_other_sessions(pg: Any, db: str, keep: int) -> int:
    """End every session of `db` but the exporter's (what a server restart of backends, an idle
    timeout or a network drop does to the connections a task keeps between chunks)."""
    return int(
        pg.scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> %s AND pid <> pg_backend_pid()",
            (db, keep),
            dbname="postgres",
        )
    )


def test_a_dropped_connection_is_read_again_in_the_same_view(
    pg: Any,
    pg_database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", dbname=pg_database)
    pg.execute(f"INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, {ROWS}) g", dbname=pg_database)
    exporter = pg.connect(autocommit=False, dbname=pg_database)
    try:
        with exporter.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT pg_export_snapshot(), pg_backend_pid()")
            name, exporter_pid = cur.fetchone()
        # Rows changed after the export are not in the view: a re-read must not see them.
        pg.execute("UPDATE t SET v = 'later'", dbname=pg_database)
        cfg = config("postgres", pg.props(**{"database.dbname": pg_database}), topic__prefix="r")
        spec = ChunkSpec(
            dict(cfg.origin.raw),
            Chunk("public.t", 0, None, None),
            "snap0001",
            name,
            {"lsn": 1, "txId": 1, "ts_usec": 0},
            (),
            ("jsonl",),
            staging=str(tmp_path),
        )

        def lines(res: Any) -> list[tuple[Any, Any]]:
            """(key, after) of each record: the envelope's ts_ms differs from one read to the next."""
            out = []
            for line in Path(res.jsonl_part).read_bytes().splitlines():
                rec = orjson.loads(line)
                out.append((rec["key"]["payload"]["id"], rec["value"]["payload"]["after"]))
            return sorted(out, key=lambda r: r[0])

        first = run_chunk(spec)  # opens the connections the thread keeps
        assert first.rows == ROWS and [a["v"] for _, a in lines(first)] == [
            f"v{i}" for i in range(1, ROWS + 1)
        ]

        assert _end_other_sessions(pg, pg_database, exporter_pid) >= 1
        caplog.set_level(logging.WARNING, logger="spark_jobs.snapshot_tasks")
        again = run_chunk(spec)
        assert again.rows == ROWS and lines(again) == lines(first)
        # The failed attempts' parts were removed: only the two good ones are left.
        assert sorted(tmp_path.glob("*.jsonl")) == sorted(Path(r.jsonl_part) for r in (first, again))
        retried = [r.getMessage() for r in caplog.records if "reading it again" in r.getMessage()]
        assert len(retried) == 1 and "chunk 0 of public.t" in retried[0], retried
        assert "password" not in retried[0] and pg.password not in retried[0]

        # The same drop with a single attempt is the error the retry absorbed.
        assert _end_other_sessions(pg, pg_database, exporter_pid) >= 1
        monkeypatch.setattr(snapshot_tasks, "CHUNK_ATTEMPTS", 1)
        with pytest.raises(TransientError, match="server closed the connection|terminating connection"):
            run_chunk(spec)
        monkeypatch.undo()

        # A snapshot that is gone is no passing fault: one attempt, no retry.
        exporter.rollback()
        caplog.clear()
        with pytest.raises(Exception, match="snapshot"):
            run_chunk(spec)
        assert not [r for r in caplog.records if "reading it again" in r.getMessage()]
    finally:
        Kept.drop_all()
        exporter.close()
