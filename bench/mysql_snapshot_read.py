"""MariaDB snapshot chunk read, rows/s of one reader thread: the column-wise text path
(`TextResult` + `SnapshotRows.encode_text`, what `read_chunk` uses) against the row path it
replaced (PyMySQL `SSCursor.fetchmany` + `SnapshotRows.encode` through `TableSchema.row`), and
`mariadb --quick --batch` of the same SELECT to /dev/null, in the same run on one private MariaDB.

The table is the one of issue 10's Performance section: bench(id bigint primary key, name text,
qty int, price decimal(10,2), created timestamp(6), note text) with 128-character notes. Each
figure is `read_chunk` of the whole table as one chunk inside a consistent-snapshot view (the
change-log rows included), repeated --repeat times, alternating; the median is reported.

    .venv/bin/python bench/mysql_snapshot_read.py --rows 1000000 --repeat 3

One JSON line per figure, and one with the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import emit, log  # noqa: E402

TABLE = (
    "CREATE TABLE bench (id BIGINT PRIMARY KEY, name TEXT, qty INT, price DECIMAL(10,2), "
    "created TIMESTAMP(6) NULL, note TEXT)"
)


def load(db: Any, dbname: str, n: int) -> None:
    conn = db.connect(database=dbname)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(TABLE)
            step = 100_000
            for lo in range(1, n + 1, step):
                hi = min(n, lo + step - 1)
                cur.execute(
                    "INSERT INTO bench SELECT seq, CONCAT('name-', seq), seq % 1000, (seq % 1000000) / 100, "
                    "TIMESTAMPADD(MICROSECOND, seq * 1234567, '2020-01-01 00:00:00'), "
                    f"LEFT(REPEAT(MD5(seq), 4), 128) FROM seq_{lo}_to_{hi}"
                )
    finally:
        conn.close()


def read_all(cfg: Any, snap: Any, view: Any, row_path: bool) -> tuple[int, float]:
    from connectors.snapshot import mysql as snapmod
    from connectors.sources.mysql.snapshot_read import TextResult

    chunks, _ = snap.plan(view, 10**12)  # one chunk: the whole table
    supported = TextResult.supported
    if row_path:
        TextResult.supported = staticmethod(lambda cur: False)  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        rows = 0
        for c in chunks:
            for piece in snapmod.read_chunk(cfg, c, view, snapmod.position(view), ()):
                rows += piece.num_rows
        return rows, time.perf_counter() - t0
    finally:
        TextResult.supported = supported  # type: ignore[method-assign]


def cli_read(db: Any, dbname: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [
            "mariadb",
            "--no-defaults",
            f"--host={db.host}",
            f"--port={db.port}",
            f"--user={db.user}",
            f"--password={db.password}",
            "--quick",
            "--batch",
            "-e",
            f"SELECT id, name, qty, price, created, note FROM `{dbname}`.bench",
        ],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fetch", type=int, default=10240, help="snapshot.fetch.size")
    a = ap.parse_args(argv)

    from connectors.app.embedded.mariadb import start_mariadb
    from connectors.settings.config import from_mapping
    from connectors.snapshot.mysql import MySqlSnapshotter

    with (
        tempfile.TemporaryDirectory(prefix="tidemark-bench-mysnap-") as base,
        contextlib.ExitStack() as stack,
    ):
        db = start_mariadb(None, innodb_buffer_pool_size="512M")
        stack.callback(db.destroy)
        dbname = db.create_database("snapbench")
        log(f"MariaDB {db.scalar('SELECT VERSION()')}: loading {a.rows} rows")
        load(db, dbname, a.rows)
        props = dict(
            db.props(),
            **{
                "connector.class": "mariadb",
                "name": "bench",
                "topic.prefix": "tm",
                "database.server.id": "4242",
                "database.include.list": dbname,
                "snapshot.fetch.size": str(a.fetch),
                "snapshot.mode": "initial",
                "debezium.sink.type": "jsonl",
                "debezium.sink.jsonl.path": "-",
                "tidemark.warehouse": str(Path(base) / "wh"),
            },
        )
        cfg = from_mapping(props)
        snap = MySqlSnapshotter(cfg)
        stack.callback(snap.close)
        view = snap.export(readers=1)
        stack.callback(view.close)
        cli_read(db, dbname)  # warm the buffer pool
        times: dict[str, list[float]] = {"row_path": [], "text_path": [], "mariadb_cli": []}
        for r in range(a.repeat):
            for name in ("row_path", "text_path"):
                rows, s = read_all(cfg, snap, view, name == "row_path")
                assert rows == a.rows, (name, rows)
                times[name].append(s)
                log(f"round {r + 1} {name}: {rows / s:,.0f} rows/s")
            times["mariadb_cli"].append(cli_read(db, dbname))
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, s in med.items():
            emit({"figure": k, "rows": a.rows, "median_s": round(s, 3), "rows_per_s": round(a.rows / s)})
        emit(
            {
                "figure": "ratios",
                "text_vs_row_path": round(med["row_path"] / med["text_path"], 2),
                "text_vs_mariadb_cli": round(med["mariadb_cli"] / med["text_path"], 3),
                "repeat": a.repeat,
                "fetch": a.fetch,
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
