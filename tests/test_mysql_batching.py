"""MySQL source batches and the engine's pipelining contract (`extra["more"]`): a batch cut for
size while the next binlog event is already buffered says more=True; once the stream has
nothing buffered at a transaction boundary a batch with more=False follows at once, without
waiting for the next change; every batch says `more` explicitly (the engine merges `extra` into
a held batch, so a missing key would leave it held until the next change)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from test_mysql_source import _cfg, _started

from connectors.sources.mysql.source import MySqlSource

N = 320  # a multiple of max.batch.size: the last size cut comes right before the idle stream


def _insert(mariadb: Any, db: str, n: int) -> None:
    with contextlib.closing(mariadb.connect(database=db)) as conn, conn.cursor() as cur:
        for i in range(n):  # autocommit: one transaction per row
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"v{i}"))


def test_catch_up_batches_say_more(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    _, src = _started(mariadb, tmp_path, unique_name, db, **{"max.batch.size": 16})
    try:
        _insert(mariadb, db, N)  # all on the server before the source reads
        batches = list(src.batches())
    finally:
        src.close()
    assert sum(len(b.records) for b in batches) == N
    assert batches[0].records == [] and batches[0].extra == {}  # the start position
    assert all(isinstance(b.extra.get("more"), bool) for b in batches[1:])
    assert any(b.extra["more"] for b in batches[1:])  # cut for size with the next events buffered
    assert batches[-1].extra["more"] is False
    assert all(len(b.records) <= 16 for b in batches)


def test_idle_stream_ends_a_more_run_at_once(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Streaming (not bounded): after the last buffered change a batch without `more` comes
    while the stream is idle, long before the run's time limit."""
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    cfg = _cfg(
        mariadb,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db, "max.batch.size": 16},
    )
    src = MySqlSource(cfg, max_seconds=40)
    src.open(None)
    got, seen_more, settled_after = 0, False, None
    t0 = time.monotonic()
    try:
        _insert(mariadb, db, N)
        for b in src.batches():
            got += len(b.records)
            if b.records or b.extra:
                assert isinstance(b.extra.get("more"), bool), b.extra
            seen_more = seen_more or bool(b.extra.get("more"))
            if got == N and not b.extra.get("more"):
                settled_after = time.monotonic() - t0
                src.stop()
                break
    finally:
        src.close()
    assert got == N and seen_more
    assert settled_after is not None and settled_after < 20, settled_after
