"""skip.messages.without.change on MariaDB (Debezium's MySQL connector refuses MariaDB, so this
follows the PostgreSQL conformance test's cases, where Debezium 3.6 itself is the oracle): an update
whose captured columns — after column.exclude.list, masks and truncation — did not change is
dropped, and is not counted in the transaction metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc import payload, read_jsonl, run_cli
from mycdc import write_config

UPDATES = [
    "UPDATE t SET ign = 'i2' WHERE id = 1",  # excluded column only
    "UPDATE t SET x = 'x2' WHERE id = 1",  # captured change: kept
    "UPDATE t SET x = x, ign = 'i3' WHERE id = 1",  # nothing captured changes
    "UPDATE t SET m = 'bbb' WHERE id = 1",  # hidden by the mask
    "UPDATE t SET tr = 'abd' WHERE id = 1",  # hidden by the truncation
    "UPDATE t SET id = 2, ign = 'i4' WHERE id = 1",  # key change: kept (delete + create)
]


@pytest.mark.parametrize("skip", [False, True])
def test_skip_messages_without_change(
    skip: bool, mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    dbn = mariadb_database
    conn = mariadb.connect(database=dbn)
    with conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, x VARCHAR(10), ign VARCHAR(10), m VARCHAR(10), "
            "tr VARCHAR(10))"
        )
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        prefix="sk",
        **{
            "column.exclude.list": rf"{dbn}\.t\.ign",
            "column.mask.with.3.chars": rf"{dbn}\.t\.m",
            "column.truncate.to.2.chars": rf"{dbn}\.t\.tr",
            "skip.messages.without.change": str(skip).lower(),
            "provide.transaction.metadata": "true",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # schema and start position
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, 'x1', 'i1', 'aaa', 'abc')")
        conn.begin()
        for sql in UPDATES:
            cur.execute(sql)
        conn.commit()
    conn.close()
    run_cli("run", "--config", str(cfg), "--until-caught-up")

    recs = read_jsonl(out)
    rows = [payload(r) for r in recs if r["topic"] == f"sk.{dbn}.t" and r["value"] is not None]
    if skip:
        assert [r["op"] for r in rows] == ["c", "u", "d", "c"]
        assert rows[1]["before"]["x"] == "x1" and rows[1]["after"]["x"] == "x2"
    else:
        assert [r["op"] for r in rows] == ["c", "u", "u", "u", "u", "u", "d", "c"]
    assert all(r["after"]["m"] == "***" and r["after"]["tr"] == "ab" for r in rows if r["after"])
    end = [payload(r) for r in recs if r["topic"] == "sk.transaction" and payload(r)["status"] == "END"][-1]
    assert end["event_count"] == len(rows) - 1  # the insert was its own transaction
    assert [r["transaction"]["total_order"] for r in rows[1:]] == list(range(1, len(rows)))
