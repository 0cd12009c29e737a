"""`tidemark demo`: the embedded default end to end.

Starts a private CDC-ready PostgreSQL in the work directory, creates a small shop database
(customers/orders/products), runs the connector (Delta + jsonl sinks on the local disk) while a
workload changes rows, then shows what landed: counts per table and operation, and a few events.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from connectors.api import TerminalError

SCHEMA = """
CREATE TABLE IF NOT EXISTS products (id serial PRIMARY KEY, name text NOT NULL,
    price numeric(10,2) NOT NULL, tags text[], created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS customers (id serial PRIMARY KEY, first_name varchar(64) NOT NULL,
    last_name varchar(64) NOT NULL, email varchar(255) NOT NULL UNIQUE, vip boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers(id),
    product_id int NOT NULL REFERENCES products(id), quantity int NOT NULL, ordered_on date NOT NULL,
    status text NOT NULL DEFAULT 'new');
"""


def workload(conn: Any, n: int, rnd: random.Random) -> None:
    cur = conn.cursor()
    for i in range(max(3, n // 20)):
        cur.execute("INSERT INTO products (name, price, tags) VALUES (%s, %s, %s)",
                    (f"product-{i}", round(rnd.uniform(1, 500), 2), ["demo", f"cat{i % 3}"]))
    for i in range(max(5, n // 10)):
        cur.execute("INSERT INTO customers (first_name, last_name, email) VALUES (%s, %s, %s)",
                    (f"First{i}", f"Last{i}", f"user{i}.{rnd.randrange(1 << 30)}@example.com"))
    cur.execute("SELECT id FROM customers")
    customers = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT id FROM products")
    products = [r[0] for r in cur.fetchall()]
    for _ in range(n):
        r = rnd.random()
        if r < 0.6:
            cur.execute("INSERT INTO orders (customer_id, product_id, quantity, ordered_on) "
                        "VALUES (%s, %s, %s, current_date)", (rnd.choice(customers), rnd.choice(products),
                                                               rnd.randint(1, 9)))
        elif r < 0.85:
            cur.execute("UPDATE orders SET status = 'shipped' WHERE id = (SELECT min(id) FROM orders "
                        "WHERE status = 'new')")
        elif r < 0.95:
            cur.execute("UPDATE customers SET vip = NOT vip WHERE id = %s", (rnd.choice(customers),))
        else:
            cur.execute("DELETE FROM orders WHERE id = (SELECT max(id) FROM orders)")


def run_demo(workdir: Path, rows: int) -> None:
    from connectors.cli import build_engine
    from connectors.config import from_mapping
    from connectors.embedded.postgres import start_pg
    from connectors.engine import close_all

    console = Console()
    _prepare(workdir)
    console.print(f"[bold]Tidemark demo[/] in {workdir}")
    (workdir / "servers").mkdir(exist_ok=True)
    pg = start_pg(workdir / "servers")
    try:
        console.print(f"private PostgreSQL (wal_level=logical) on 127.0.0.1:{pg.port}")
        pg.execute(SCHEMA)
        warehouse = workdir / "warehouse"
        jsonl = workdir / "events.jsonl"
        props = {f"debezium.source.{k}": v for k, v in pg.props().items()}
        props.update({
            "debezium.source.connector.class": "postgres",
            "debezium.source.topic.prefix": "shop",
            "debezium.source.slot.name": "tidemark_demo",
            "debezium.source.publication.name": "tidemark_demo",
            "debezium.source.snapshot.mode": "no_data",
            "debezium.sink.type": "delta,jsonl",
            "debezium.sink.jsonl.path": str(jsonl),
            "tidemark.warehouse": str(warehouse),
        })
        cfg = from_mapping(props)
        engine = build_engine(cfg)
        errors: list[BaseException] = []

        def stream() -> None:
            try:
                engine.run()
            except BaseException as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=stream, name="tidemark-engine", daemon=True)
        t.start()
        _wait(lambda: engine.stats.batches > 0 or errors or _slot_exists(pg, "tidemark_demo"), 60, "slot creation")
        if errors:
            raise errors[0]
        conn = pg.connect()
        console.print(f"running a workload of {rows} changes while the connector streams ...")
        workload(conn, rows, random.Random(42))
        target = int(pg.scalar("SELECT pg_current_wal_lsn() - '0/0'"))
        _wait(lambda: errors or (engine.stats.last_offset or {}).get("lsn_flush", 0) >= target, 120,
              "the connector to catch up")
        engine.stop()
        t.join(60)
        close_all(engine.sinks)
        if errors:
            raise errors[0]
        _show(console, warehouse / "shop" / "changelog", jsonl)
    finally:
        pg.destroy()


MARKER = ".tidemark-demo"


def _prepare(workdir: Path) -> None:
    """Each run starts a new PostgreSQL, so the previous run's offsets and change log would
    point at a server that is gone: clear what an earlier demo left in its own work directory,
    and refuse a directory the demo did not create rather than delete anything in it."""
    warehouse, jsonl = workdir / "warehouse", workdir / "events.jsonl"
    if (warehouse.exists() or jsonl.exists()) and not (workdir / MARKER).exists():
        raise TerminalError(f"demo: {workdir} already holds a warehouse or events.jsonl the demo did not write",
                            "choose another --workdir (the demo clears its own results on every run)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("written by `tidemark demo`: results here are replaced on every run\n")
    shutil.rmtree(warehouse, ignore_errors=True)
    jsonl.unlink(missing_ok=True)


def _slot_exists(pg: Any, slot: str) -> bool:
    return bool(pg.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,)))


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TerminalError(f"demo: timed out waiting for {what}")
        time.sleep(0.1)


def _show(console: Console, changelog: Path, jsonl: Path) -> None:
    import orjson
    from deltalake import DeltaTable

    dt = DeltaTable(str(changelog))
    tbl = dt.to_pyarrow_table(columns=["collection", "op"])
    counts: dict[tuple[str, str], int] = {}
    for coll, op in zip(tbl.column("collection").to_pylist(), tbl.column("op").to_pylist(), strict=True):
        counts[(coll or "-", op or "tombstone")] = counts.get((coll or "-", op or "tombstone"), 0) + 1
    t = Table(title=f"Delta change log {changelog} (version {dt.version()})")
    for c in ("table", "op", "events"):
        t.add_column(c)
    for (coll, op), n in sorted(counts.items()):
        t.add_row(coll, op, str(n))
    console.print(t)
    lines = jsonl.read_bytes().splitlines()
    console.print(f"{len(lines)} Kafka-format records in {jsonl}; the first two:")
    for line in lines[:2]:
        rec = orjson.loads(line)
        console.print_json(data={"topic": rec["topic"], "key": rec["key"], "value": rec["value"]["payload"]
                                 if isinstance(rec["value"], dict) and "payload" in rec["value"] else rec["value"]})
