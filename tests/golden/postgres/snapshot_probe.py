"""Probe Debezium 3.6's PostgreSQL initial snapshot (the evidence for docs/debezium-snapshots.md).

    .venv/bin/python tests/golden/postgres/snapshot_probe.py OUTDIR

A private PostgreSQL, tables chosen to show the snapshot markers (several rows in non-key physical
order, empty tables -- one of them alphabetically last --, one row, a composite key, no key), then
Debezium runs one at a time (each its own JVM through tests/conformance/debezium.py):

  initial        snapshot.mode=initial; while it runs, after the snapshot records, an INSERT and an
                 UPDATE (what streaming emits first)
  initial-again  the same offsets and slot: no new snapshot, streams what changed meanwhile
  txmeta         fresh slot + offsets, provide.transaction.metadata=true
  rowcount-desc  snapshot.tables.order.by.row.count=descending
  threads2       snapshot.max.threads=2
  always-1/2     snapshot.mode=always, started twice
  when-needed-*  when_needed: first start, restart with offsets, restart with the offsets deleted
  initial-only   snapshot.mode=initial_only

Each run's records go to OUTDIR/<run>.jsonl (with headers), the offsets to <run>.jsonl.offsets.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conformance.debezium import read_jsonl, run_debezium  # noqa: E402

from connectors.app.embedded.postgres import start_pg  # noqa: E402

SCHEMA = [
    "CREATE TABLE a_many (id integer PRIMARY KEY, v text)",
    "CREATE TABLE b_empty (id integer PRIMARY KEY, v text)",
    "CREATE TABLE c_one (id integer PRIMARY KEY, v text)",
    "CREATE TABLE d_comp (a integer, b varchar(10), v text, PRIMARY KEY (b, a))",
    "CREATE TABLE e_nokey (a integer, b text)",
    "CREATE TABLE z_empty (id integer PRIMARY KEY)",
    # physical order differs from key order: inserted 5,3,1,4,2 then 3 updated (moves to the end)
    "INSERT INTO a_many VALUES (5,'five'),(3,'three'),(1,'one'),(4,'four'),(2,'two')",
    "UPDATE a_many SET v = 'three*' WHERE id = 3",
    "INSERT INTO c_one VALUES (1, 'only')",
    "INSERT INTO d_comp VALUES (2,'y','p'),(1,'z','q'),(1,'x','r')",
    "INSERT INTO e_nokey VALUES (1,'k'),(1,'k')",
    "CREATE PUBLICATION probe_pub FOR ALL TABLES",
]
SNAPSHOT_ROWS = 11


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    pg = start_pg(None)
    try:
        with pg.connect() as conn, conn.cursor() as cur:
            for s in SCHEMA:
                cur.execute(s)
        base = {
            **pg.props(),
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "topic.prefix": "dbz",
            "publication.name": "probe_pub",
            "publication.autocreate.mode": "disabled",
            "table.include.list": "public\\..*",
        }
        facts: dict[str, object] = {}

        def run(
            name: str,
            slot: str,
            extra: dict[str, str],
            *,
            out_name: str | None = None,
            during: object = None,
            idle: float = 8.0,
        ) -> list[dict]:
            path = out / f"{out_name or name}.jsonl"
            props = {**base, "name": f"probe-{slot}", "slot.name": slot, **extra}
            facts[f"{name}.xlog_before"] = pg.scalar("SELECT pg_current_wal_lsn()::text")
            t = None
            if during is not None:
                t = threading.Thread(target=during, args=(path,), daemon=True)
                t.start()
            recs = run_debezium(
                props, path, idle=idle, timeout=180, first_record_timeout=90, allow_fewer=True
            )
            if t is not None:
                t.join(5)
            slot_row = pg.query(
                "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )
            facts[f"{name}.slot_after"] = slot_row
            facts[f"{name}.records"] = len(recs)
            shutil.copy(path, out / f"{name}.records.jsonl")
            logf = path.with_suffix(path.suffix + ".log")
            if logf.exists():
                shutil.copy(logf, out / f"{name}.log")
            offs = Path(str(path) + ".offsets")
            if offs.exists():
                shutil.copy(offs, out / f"{name}.offsets.bin")
            print(f"{name}: {len(recs)} records", file=sys.stderr, flush=True)
            return recs

        def change_after_snapshot(path: Path) -> None:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                if path.exists() and len(read_jsonl(path)) >= SNAPSHOT_ROWS:
                    break
                time.sleep(0.2)
            facts["initial.xlog_at_change"] = pg.scalar("SELECT pg_current_wal_lsn()::text")
            with pg.connect() as conn, conn.cursor() as cur:
                cur.execute("INSERT INTO c_one VALUES (2, 'streamed')")
                cur.execute("UPDATE a_many SET v = 'one*' WHERE id = 1")

        run("initial", "probe_initial", {"snapshot.mode": "initial"}, during=change_after_snapshot, idle=10)
        # changes while stopped, then the same offsets and slot again
        with pg.connect() as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO c_one VALUES (3, 'while stopped')")
        run("initial-again", "probe_initial", {"snapshot.mode": "initial"}, out_name="initial")
        run("txmeta", "probe_txmeta", {"snapshot.mode": "initial", "provide.transaction.metadata": "true"})
        run(
            "rowcount-desc",
            "probe_rowcount",
            {"snapshot.mode": "initial", "snapshot.tables.order.by.row.count": "descending"},
        )
        run("threads2", "probe_threads", {"snapshot.mode": "initial", "snapshot.max.threads": "2"})
        run("always-1", "probe_always", {"snapshot.mode": "always"}, out_name="always")
        run("always-2", "probe_always", {"snapshot.mode": "always"}, out_name="always")
        run("when-needed-1", "probe_wn", {"snapshot.mode": "when_needed"}, out_name="wn")
        run("when-needed-2", "probe_wn", {"snapshot.mode": "when_needed"}, out_name="wn")
        Path(out / "wn.jsonl.offsets").unlink()
        run("when-needed-3-no-offsets", "probe_wn", {"snapshot.mode": "when_needed"}, out_name="wn")
        run("initial-only", "probe_io", {"snapshot.mode": "initial_only"})
        facts["slots"] = pg.query(
            "SELECT slot_name, restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots"
        )
        (out / "facts.json").write_text(json.dumps(facts, indent=1, default=str))
    finally:
        pg.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
