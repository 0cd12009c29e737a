"""Throughput of snapshot_read (read_batches + SnapshotColumns.encode) against COPY TO STDOUT.

    .venv/bin/python tests/perf_pg_snapshot_columns.py [--rows N] [--fetch N ...]

Starts a private PostgreSQL, fills the streaming benchmark's `bench` table, then prints one JSON
line per figure: COPY (SELECT ...) TO STDOUT (psycopg2, output discarded), read_batches alone,
read_batches + encode; each read in its own subprocess so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

FILL = """
CREATE TABLE bench (
    id bigint PRIMARY KEY, name text, qty int, price numeric(10,2), created timestamptz, note text);
INSERT INTO bench
SELECT g, 'customer-' || g, (g % 100)::int, ((g % 100000) / 100.0)::numeric(10,2),
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1.234567 second', repeat(md5(g::text), 4)
FROM generate_series(1, ROWS) g;

"""


class _Null:
    def __init__(self) -> None:
        self.n = 0

    def write(self, b: Any) -> int:
        self.n += len(b)
        return len(b)


def _child(args: argparse.Namespace) -> None:
    """One measured read, in this process: prints {rows, seconds, peak_rss_mb}."""
    import adbc_driver_postgresql.dbapi  # noqa: F401 - its import (once per worker) is not the read
    from cfgutil import config

    from connectors.format.topics import TopicNamer
    from connectors.settings.filters import ColumnRules, TableFilters
    from connectors.sources.postgres import connection
    from connectors.sources.postgres.snapshot_read import SnapshotColumns, conninfo, read_batches
    from connectors.sources.postgres.tables import TableCache

    props = json.loads(args.props)
    cfg = config("postgres", props)
    src = cfg.source
    conn = connection.connect(connection.PgConnParams.from_settings(src))
    cache = TableCache(
        conn,
        cfg,
        TopicNamer.from_settings(src),
        TableFilters.from_settings(src),
        ColumnRules.from_settings(src),
    )
    found = cache.for_table_with_columns("public", "bench")
    assert found is not None
    sc = SnapshotColumns(found[0], found[1], cache.registry, cache.modes)
    conn.close()
    sql = f"SELECT {sc.select_list()} FROM public.bench WHERE id <= {args.limit}"
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    rows = 0
    out_bytes = 0
    for batch in read_batches(
        conninfo(src), sql, snapshot=None, fetch_rows=args.fetch[0], read_ahead=args.read_ahead
    ):
        rows += batch.num_rows
        if args.mode == "encode":
            key, after = sc.encode(batch)
            out_bytes += after.nbytes + (key.nbytes if key is not None else 0)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "rows": rows,
                "seconds": dt,
                "peak_rss_mb": peak / 1024,
                "start_rss_mb": base / 1024,
                "json_bytes": out_bytes,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--fetch", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--mode", default="encode")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--props", default="{}")
    ap.add_argument("--read-ahead", type=int, default=0)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return

    from harness import start_pg

    pg = start_pg()
    try:
        db = pg.create_database("snapbench")
        t0 = time.perf_counter()
        pg.execute(FILL.replace("ROWS", str(args.rows)), dbname=db)
        pg.execute("VACUUM ANALYZE bench", dbname=db)
        fill_s = time.perf_counter() - t0
        props = {**pg.props(**{"database.dbname": db})}
        cols = "id, name, qty, price, created, note"
        with (
            contextlib.closing(pg.connect(dbname=db, options="-c TimeZone=UTC")) as conn,
            conn.cursor() as cur,
        ):
            sink = _Null()
            t0 = time.perf_counter()
            cur.copy_expert(f"COPY (SELECT {cols} FROM bench) TO STDOUT", sink)
            copy_s = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "figure": "copy_to_stdout",
                    "rows": args.rows,
                    "seconds": round(copy_s, 3),
                    "rows_per_s": round(args.rows / copy_s),
                    "bytes": sink.n,
                    "fill_s": round(fill_s, 1),
                }
            )
        )
        runs = [("read", args.fetch[-1], args.rows, 0)] + [("encode", f, args.rows, 0) for f in args.fetch]
        runs.append(("encode", args.fetch[0], args.rows // 4, 0))  # a quarter of the table, same fetch
        runs.append(("encode", args.fetch[0], args.rows, 1))  # reading ahead on a thread
        for mode, fetch, limit, ahead in runs:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--mode",
                mode,
                "--fetch",
                str(fetch),
                "--limit",
                str(limit),
                "--read-ahead",
                str(ahead),
                "--props",
                json.dumps(props),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stderr)
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                json.dumps(
                    {
                        "figure": f"snapshot_{mode}",
                        "fetch_rows": fetch,
                        "read_ahead": ahead,
                        **res,
                        "rows_per_s": round(res["rows"] / res["seconds"]),
                        "vs_copy": round((res["rows"] / res["seconds"]) / (args.rows / copy_s), 3),
                    }
                )
            )
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
