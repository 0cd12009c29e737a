"""A chunk found in the Delta change log after a crash counts as done in every sink, so its other
sinks' output must be durable before its Delta commit: a jsonl append that fails must leave the
chunk out of Delta, and the resumed snapshot must then deliver it to both."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cdc
import pytest
from mycdc import write_config

from connectors.settings.config import load
from spark_jobs import snapshot as job


def test_a_failed_jsonl_append_leaves_the_chunk_out_of_delta(
    mariadb: Any, mariadb_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", database=db)
    mariadb.execute("INSERT INTO t SELECT seq, 'x' FROM seq_1_to_5000", database=db)
    out = tmp_path / "out.jsonl"
    cfg = load(
        write_config(
            tmp_path / "c.properties",
            mariadb,
            server_id=7441,
            db=db,
            sinks="delta,jsonl",
            jsonl=out,
            snapshot__mode="initial",
            snapshot__max__threads=1,
            tidemark__snapshot__chunk__rows=1000,
        )
    )
    real, calls = os.sendfile, [0]

    def failing_third(*args: Any) -> int:
        calls[0] += 1
        if calls[0] == 3:  # the third chunk's append dies (a crash of the driver, as far as it goes)
            raise OSError(5, "Input/output error")
        return real(*args)

    monkeypatch.setattr(os, "sendfile", failing_third)
    with pytest.raises(OSError):
        job.run(cfg)
    monkeypatch.setattr(os, "sendfile", real)
    resumed = job.run(cfg)
    assert resumed.decision.resume
    ids = [p["after"]["id"] for r in cdc.read_jsonl(out) if (p := r["value"]["payload"]).get("op") == "r"]
    assert sorted(set(ids)) == list(range(1, 5001))  # nothing lost (a repeat would be allowed)
    logged = cdc.delta_rows(tmp_path / "warehouse" / "tm" / "changelog", ["op", "after"])
    assert sum(1 for r in logged if r["op"] == "r") == 5000  # Delta: each row once


def test_every_commit_starts_from_the_newest_table_version(
    mariadb: Any, mariadb_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver commits each chunk to the change log and records it in `_state/snapshots`
    through tables it keeps open. An open deltalake table does not move to the version its own
    `create_write_transaction` wrote, and a commit from an old version is checked against every
    commit since: O(chunks²) driver time (400 chunks: 26 s of commits instead of 5 s). Every
    commit here must start from the version on disk."""
    from deltalake import DeltaTable, writer

    db = mariadb_database
    mariadb.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", database=db)
    mariadb.execute("INSERT INTO t SELECT seq, 'x' FROM seq_1_to_3000", database=db)
    cfg = load(
        write_config(
            tmp_path / "c.properties",
            mariadb,
            server_id=7442,
            db=db,
            sinks="delta",
            snapshot__mode="initial",
            tidemark__snapshot__chunk__rows=100,
        )
    )
    stale: list[tuple[str, int, int]] = []

    def on_disk(uri: str) -> int:
        return DeltaTable(uri).version()

    real_commit = DeltaTable.create_write_transaction

    def commit(self: Any, *args: Any, **kw: Any) -> Any:
        if self.version() != on_disk(self.table_uri):
            stale.append(("changelog", self.version(), on_disk(self.table_uri)))
        return real_commit(self, *args, **kw)

    real_write = writer.write_deltalake

    def write(table_or_uri: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(table_or_uri, DeltaTable) and table_or_uri.version() != on_disk(table_or_uri.table_uri):
            stale.append(("progress", table_or_uri.version(), on_disk(table_or_uri.table_uri)))
        return real_write(table_or_uri, *args, **kw)

    monkeypatch.setattr(DeltaTable, "create_write_transaction", commit)
    monkeypatch.setattr("deltalake.write_deltalake", write)
    out = job.run(cfg)
    assert (out.rows, out.chunks) == (3000, 30)
    assert stale == []
    progress = DeltaTable(str(tmp_path / "warehouse" / "_state" / "snapshots"))
    assert progress.version() >= 30  # planned, 30 chunk_done commits (through the open table)
