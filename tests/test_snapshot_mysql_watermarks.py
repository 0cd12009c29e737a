"""MariaDB lock-free initial snapshots (`tidemark.snapshot.mysql.method=watermarks`): chunks read by
Spark tasks between binlog watermarks, the window folded into each chunk, and the stream skipping
what the chunks hold — so every change lands exactly once (a strict replay, which refuses a
duplicate insert or a change of an absent row, reproduces the table)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import cdc
import pytest
from mycdc import write_config

from connectors.api import ConfigError
from connectors.settings.config import from_mapping, load
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.progress import SnapshotProgress
from connectors.snapshot.watermarks import Cover, _fold
from connectors.sources.mysql.events import RowChange


def strict_replay(records: list[dict[str, Any]]) -> dict[int, tuple[str, int]]:
    """`cdc.replay`, refusing what exactly-once delivery never gives: a snapshot or insert of a
    key that exists, an update or delete of one that does not."""
    state: dict[int, tuple[str, int]] = {}
    for r in records:
        v = r["value"]
        if v is None or "op" not in v["payload"]:
            continue
        p = v["payload"]
        op = p["op"]
        key = (p["after"] or p["before"])["id"]
        if op in ("r", "c"):
            assert key not in state, f"{op} of id {key}, which exists: delivered twice ({p['source']})"
        else:
            assert key in state, f"{op} of id {key}, which does not exist ({p['source']})"
        if op == "d":
            del state[key]
        else:
            state[key] = (p["after"]["name"], p["after"]["qty"])
    return state


def _config(tmp_path: Path, mariadb: Any, db: str, server_id: int, **kw: Any) -> Path:
    return write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=server_id,
        db=db,
        jsonl=tmp_path / "out.jsonl",
        snapshot__mode="initial",
        tidemark__snapshot__mysql__method="watermarks",
        tidemark__spark__master="local[2]",
        **kw,
    )


def test_lock_free_snapshot_under_writes_is_exactly_once(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    db = mariadb_database
    connect = partial(mariadb.connect, database=db)
    n = max(50_000, cdc.SNAPSHOT_ROWS // 5)
    cdc.create_bench(connect, "mysql", n)
    cfg = _config(
        tmp_path,
        mariadb,
        db,
        7411,
        sinks="jsonl,delta",
        tidemark__snapshot__chunk__rows=max(1000, n // 10),
    )
    run = cdc.snapshot_under_writes(
        cfg, tmp_path / "out.jsonl", connect, "mysql", rows=n, seed=21, min_writes=50
    )
    assert "lock-free (watermarks)" in run.first.stderr and "completed" in run.first.stderr
    assert strict_replay(run.records) == run.state
    # every chunk recorded the high watermark it is consistent at, and the stream skipped by them
    loaded = load(cfg)
    state = SnapshotProgress(loaded.warehouse, loaded.name).latest()
    assert state is not None and state.completed and state.detail.get("method") == "watermarks"
    assert len(state.chunks) >= 10 and set(state.highs) == {c.index for c in state.chunks}
    assert "skips the rows the lock-free snapshot's chunks hold" in run.first.stderr
    marks = [r["value"]["payload"]["source"]["snapshot"] for r in run.snapshot]
    assert marks.count("first") == 1 and marks.count("last") == 1
    # the Delta change log holds each snapshot row once
    changelog = tmp_path / "warehouse" / "tm" / "changelog"
    rows = cdc.delta_rows(changelog, ["op", "collection"])
    assert sum(1 for r in rows if r["op"] == "r") == len(run.snapshot)


def test_lock_free_snapshot_sigkill_resumes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    connect = partial(mariadb.connect, database=db)
    n = 40_000
    cdc.create_bench(connect, "mysql", n)
    cfg = _config(
        tmp_path,
        mariadb,
        db,
        7412,
        sinks="delta,jsonl",
        snapshot__max__threads=1,
        tidemark__snapshot__chunk__rows=n // 20,
    )
    cdc.sigkill_mid_snapshot_then_resume(
        cfg,
        tmp_path / "out.jsonl",
        tmp_path / "warehouse" / "tm" / "changelog",
        connect,
        n,
        between=lambda: mariadb.execute("UPDATE bench SET qty = 1000 WHERE id = 1", database=db),
    )


def test_lock_free_snapshot_emits_what_the_locking_method_emits(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    """Tables the lock-free method reads whole (a character key, no key) or in integer-key
    chunks (a composite key), with values of many types: the same records as the locking
    method's, but for the binlog position and time in `source`."""
    db = mariadb_database
    for sql in (
        "CREATE TABLE tags (tag varchar(20) PRIMARY KEY, n int, d decimal(10,3), at datetime(3), j json)",
        "INSERT INTO tags VALUES ('a', 1, 1.5, '2024-01-02 03:04:05.678', '{\"k\": [1, 2]}'), ('B', NULL, -2.25, "
        "NULL, NULL)",
        "CREATE TABLE pairs (a int unsigned, b bigint, v varbinary(8), y year, PRIMARY KEY (a, b))",
        "INSERT INTO pairs SELECT seq % 7, seq, unhex('00ff'), 1999 + seq % 30 FROM seq_1_to_3000",
        "CREATE TABLE loose (v int, t text)",
        "INSERT INTO loose VALUES (1, 'x'), (1, 'x'), (2, NULL)",
    ):
        mariadb.execute(sql, database=db)

    def records(method: str, server_id: int) -> list[Any]:
        run_dir = tmp_path / method
        run_dir.mkdir()
        cfg = write_config(
            run_dir / "c.properties",
            mariadb,
            server_id=server_id,
            db=db,
            sinks="jsonl",
            jsonl=run_dir / "out.jsonl",
            snapshot__mode="initial_only",
            tidemark__snapshot__mysql__method=method,
            tidemark__snapshot__chunk__rows=500,
            tidemark__spark__master="local[2]",
        )
        cdc.run_cli("snapshot", "--config", str(cfg), timeout=300)
        out = []
        for r in cdc.read_jsonl(run_dir / "out.jsonl"):
            p = r["value"]["payload"]
            for k in ("file", "pos", "ts_ms", "ts_us", "ts_ns"):
                p["source"].pop(k, None)
            for k in ("ts_ms", "ts_us", "ts_ns"):
                p.pop(k, None)
            out.append(r)
        return out

    locking, lock_free = records("locking", 7413), records("watermarks", 7414)
    # the data (the schema snapshot's change events, include.schema.changes, come first in both)
    assert sum(1 for r in locking if "op" in r["value"]["payload"]) == 3000 + 2 + 3
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, lock_free)) == sorted(map(key, locking))
    # composite integer keys were chunked (and so went through the window logic)
    loaded = load(tmp_path / "watermarks" / "c.properties")
    state = SnapshotProgress(loaded.warehouse, loaded.name).latest()
    assert state is not None and sum(1 for c in state.chunks if c.table.endswith(".pairs")) > 1


def test_watermarks_is_refused_for_postgres() -> None:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "localhost",
        "database.user": "u",
        "database.dbname": "d",
        "topic.prefix": "p",
        "debezium.sink.type": "jsonl",
        "debezium.sink.jsonl.path": "/tmp/never-written.jsonl",
        "tidemark.snapshot.mysql.method": "watermarks",
    }
    with pytest.raises(ConfigError, match="applies to MySQL/MariaDB only"):
        from_mapping(props)


# --------------------------------------------------------------------------- folding and the cover
def _rc(op: str, before: list[Any] | None, after: list[Any] | None, at: int, table: str = "t") -> RowChange:
    return RowChange("d", table, op, before, after, None, None, "", {}, (1, at, 0, 0))  # type: ignore[arg-type]


def test_fold_keeps_the_last_image_of_each_key_in_the_chunk_range() -> None:
    chunk = Chunk("d.t", 1, (10,), (20,))
    changes = [
        _rc("c", None, [15, "new"], 1),
        _rc("u", [15, "new"], [15, "newer"], 2),
        _rc("d", [12, "x"], None, 3),
        _rc("c", None, [25, "outside"], 4),  # another chunk's key: not this chunk's business
        _rc("u", [11, "a"], [30, "a"], 5),  # the key moved out of the range: gone from this chunk
        _rc("u", [40, "b"], [18, "b"], 6),  # and into it
    ]
    assert _fold(changes, [0], chunk) == {"15": [15, "newer"], "12": None, "11": None, "18": [18, "b"]}


def test_cover_skips_only_what_a_chunk_read_later_holds() -> None:
    class Model:
        columns = [type("C", (), {"name": "id"})(), type("C", (), {"name": "v"})()]

    # chunks (-inf, 10] read at pos 100, (10, 20] at 300, (20, +inf) at 200
    cover = Cover((1, 300), {("d", "t"): ([(10,), (20,)], [(1, 100), (1, 300), (1, 200)], ("id",))})

    def rc(op: str, before: Any, after: Any, at: int) -> RowChange:
        r = _rc(op, before, after, at)
        r.table_model = Model()  # type: ignore[assignment]
        return r

    assert not cover.skips(rc("c", None, [5, "x"], 150))  # after chunk 0's watermark
    assert cover.skips(rc("c", None, [15, "x"], 150))  # chunk 1 read later: it holds this
    assert cover.skips(rc("u", [10, "x"], [10, "y"], 50))
    assert not cover.skips(rc("c", None, [25, "x"], 250))
    # a key moved from a chunk that holds the change to one that does not: streamed
    assert not cover.skips(rc("u", [15, "x"], [5, "x"], 150))
    assert not cover.skips(_rc("c", None, [1], 10, table="other"))
    # a TRUNCATE before every chunk of the table is held; one between them drops the cover
    assert cover.truncate("d", "t", (1, 50, 0, 0))
    assert not cover.truncate("d", "t", (1, 150, 0, 0))
    assert not cover.skips(rc("c", None, [15, "x"], 160))
