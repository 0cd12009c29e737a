"""`tidemark demo`: the embedded default end to end.

For each source (PostgreSQL and MariaDB by default) it starts a private CDC-ready server in the
work directory, creates a small shop database (customers/orders/products), runs the connector
(Delta + jsonl sinks on the local disk) while a workload changes rows, lets a bounded run catch up
with the server's log position, then shows what landed: counts per table and operation, and a
few events. Each shop has rows before the connector starts: the initial snapshot
(`snapshot.mode=initial`: the snapshot job, on local Spark for PostgreSQL) lands them as `op: r`
events first.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from connectors.api import TerminalError
from connectors.sinks.delta import META_PARTITION

PG_SCHEMA = [
    """CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL,
       tags text[], created_at timestamptz NOT NULL DEFAULT now())""",
    """CREATE TABLE customers (id serial PRIMARY KEY, first_name varchar(64) NOT NULL,
       last_name varchar(64) NOT NULL, email varchar(255) NOT NULL UNIQUE, vip boolean NOT NULL DEFAULT false)""",
    """CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers(id),
       product_id int NOT NULL REFERENCES products(id), quantity int NOT NULL, ordered_on date NOT NULL,
       status text NOT NULL DEFAULT 'new')""",
]
MARIADB_SCHEMA = [
    """CREATE TABLE products (id int AUTO_INCREMENT PRIMARY KEY, name varchar(255) NOT NULL,
       price decimal(10,2) NOT NULL, tags json, created_at timestamp(6) NOT NULL DEFAULT current_timestamp(6))""",
    """CREATE TABLE customers (id int AUTO_INCREMENT PRIMARY KEY, first_name varchar(64) NOT NULL,
       last_name varchar(64) NOT NULL, email varchar(255) NOT NULL UNIQUE, vip boolean NOT NULL DEFAULT false)""",
    """CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, customer_id int NOT NULL,
       product_id int NOT NULL, quantity int NOT NULL, ordered_on date NOT NULL,
       status varchar(16) NOT NULL DEFAULT 'new',
       FOREIGN KEY (customer_id) REFERENCES customers(id), FOREIGN KEY (product_id) REFERENCES products(id))""",
]


@dataclass(frozen=True)
class Dialect:
    """The workload's statements that differ between the two servers (MySQL cannot select from
    the table an UPDATE/DELETE changes; PostgreSQL has no UPDATE ... LIMIT)."""

    tags: Callable[[list[str]], Any]
    ship_oldest: str
    delete_newest: str


PG = Dialect(
    tags=lambda t: t,
    ship_oldest="UPDATE orders SET status = 'shipped' WHERE id = "
    "(SELECT min(id) FROM orders WHERE status = 'new')",
    delete_newest="DELETE FROM orders WHERE id = (SELECT max(id) FROM orders)",
)
MARIADB = Dialect(
    tags=lambda t: "[" + ",".join(f'"{x}"' for x in t) + "]",
    ship_oldest="UPDATE orders SET status = 'shipped' WHERE status = 'new' ORDER BY id LIMIT 1",
    delete_newest="DELETE FROM orders ORDER BY id DESC LIMIT 1",
)


def workload(
    conn: Any,
    n: int,
    rnd: random.Random,
    dialect: Dialect = PG,
    *,
    pace_s: float = 0.0,
    progress: Callable[[int, int], None] = lambda done, records: None,
) -> int:
    """Run the shop workload (autocommit: one transaction per statement), `pace_s` apart, and
    return the number of Kafka records it makes the connector emit: one per inserted or
    updated row, two per deleted row (the delete and its tombstone). `progress(statements,
    records)` is called after each statement."""
    cur = conn.cursor()
    records = 0
    done = 0

    def run(sql: str, params: Any = None, per_row: int = 1) -> None:
        nonlocal records, done
        cur.execute(sql, params)
        records += max(cur.rowcount, 0) * per_row
        done += 1
        progress(done, records)
        if pace_s:
            time.sleep(pace_s)  # pacing the demo's workload so it can be watched, not a wait

    for i in range(max(3, n // 20)):
        run(
            "INSERT INTO products (name, price, tags) VALUES (%s, %s, %s)",
            (f"product-{i}", round(rnd.uniform(1, 500), 2), dialect.tags(["demo", f"cat{i % 3}"])),
        )
    for i in range(max(5, n // 10)):
        run(
            "INSERT INTO customers (first_name, last_name, email) VALUES (%s, %s, %s)",
            (f"First{i}", f"Last{i}", f"user{i}.{rnd.randrange(1 << 30)}@example.com"),
        )
    cur.execute("SELECT id FROM customers")
    customers = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT id FROM products")
    products = [r[0] for r in cur.fetchall()]
    for _ in range(n):
        r = rnd.random()
        if r < 0.6:
            run(
                "INSERT INTO orders (customer_id, product_id, quantity, ordered_on) VALUES (%s, %s, %s, current_date)",
                (rnd.choice(customers), rnd.choice(products), rnd.randint(1, 9)),
            )
        elif r < 0.85:
            run(dialect.ship_oldest)
        elif r < 0.95:
            run("UPDATE customers SET vip = NOT vip WHERE id = %s", (rnd.choice(customers),))
        else:
            run(dialect.delete_newest, per_row=2)
    cur.close()
    return records


SOURCES = ("postgres", "mariadb")


def run_demo(workdir: Path, rows: int, sources: tuple[str, ...] = SOURCES) -> None:
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:  # before anything is started or cleared
        raise TerminalError(
            f"demo: unknown --source {', '.join(unknown)}", f"choose from {', '.join(SOURCES)}"
        )
    console = Console()
    _prepare(workdir)
    console.print(f"[bold]Tidemark demo[/] in {workdir}")
    (workdir / "servers").mkdir(exist_ok=True)
    for name in sources:
        with _server(name, workdir / "servers") as (props, conn_factory, dialect, label):
            console.print(f"\n[bold]{label}[/]")
            jsonl = workdir / f"{name}.jsonl"
            prefix = f"shop_{name}"
            props = {f"debezium.source.{k}": v for k, v in props.items()}
            props.update(
                {
                    "debezium.source.topic.prefix": prefix,
                    "debezium.source.snapshot.mode": "initial",
                    "debezium.sink.type": "delta,jsonl",
                    "debezium.sink.jsonl.path": str(jsonl),
                    "tidemark.warehouse": str(workdir / "warehouse"),
                    "tidemark.spark.conf.spark.ui.enabled": "false",
                }
            )
            _snapshot_existing_rows(
                console, workdir / f"{name}.properties", props, conn_factory, dialect, rows
            )
            _stream_with_workload(console, props, conn_factory, dialect, rows)
            _show(console, workdir / "warehouse" / prefix / "changelog", jsonl)


@contextlib.contextmanager
def _server(name: str, base: Path) -> Iterator[tuple[dict[str, str], Callable[[], Any], Dialect, str]]:
    """A private server with the empty shop schema, its connector properties, a connection
    factory for the workload, the workload dialect and a label; destroyed on exit."""
    if name == "postgres":
        from connectors.app.embedded.postgres import start_pg

        pg = start_pg(base)
        try:
            for stmt in PG_SCHEMA:
                pg.execute(stmt)
            props = dict(
                pg.props(),
                **{
                    "connector.class": "postgres",
                    "slot.name": "tidemark_demo",
                    "publication.name": "tidemark_demo",
                },
            )
            yield props, pg.connect, PG, f"private PostgreSQL (wal_level=logical) on 127.0.0.1:{pg.port}"
        finally:
            pg.destroy()
    else:
        from connectors.app.embedded.mariadb import start_mariadb

        db = start_mariadb(base)
        try:
            db.create_database("shop")
            for stmt in MARIADB_SCHEMA:
                db.execute(stmt, database="shop")
            props = dict(
                db.props(),
                **{
                    "connector.class": "mariadb",
                    "database.server.id": "5701",
                    "database.include.list": "shop",
                },
            )
            yield (
                props,
                lambda: db.connect(database="shop"),
                MARIADB,
                f"private MariaDB (binlog ROW, GTIDs) on 127.0.0.1:{db.port}",
            )
        finally:
            db.destroy()


def _snapshot_existing_rows(
    console: Console,
    config: Path,
    props: dict[str, str],
    connect: Callable[[], Any],
    dialect: Dialect,
    rows: int,
) -> None:
    """The shop already has customers, products and orders; the initial snapshot (the Spark job,
    as `tidemark run` starts it) lands them before streaming begins."""
    from connectors.app.snapshot_job import run_job

    conn = connect()
    try:
        workload(conn, rows, random.Random(7), dialect)
    finally:
        conn.close()
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    console.print("initial snapshot of the rows already there (snapshot.mode=initial) ...")
    t0 = time.monotonic()
    out = run_job(config, "WARNING")
    console.print(
        f"initial snapshot: {out['rows']} rows in {out['chunks']} chunks, {time.monotonic() - t0:.1f}s "
        "(start-up included)"
    )


def _stream_with_workload(
    console: Console, props: dict[str, str], connect: Callable[[], Any], dialect: Dialect, rows: int
) -> None:
    """Stream while a paced workload runs, showing the changes land as they are made; once
    everything landed, stop, and a bounded run (`--until-caught-up`) checks there is nothing
    left up to the server's log position: the same two modes a scheduler uses."""
    from connectors.engine.loop import close_all
    from connectors.engine.wiring import build_engine
    from connectors.settings.config import from_mapping

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
    try:
        # once the source is open (slot created / binlog position taken) every change is captured
        _wait(
            lambda: engine.stats.connections > 0 or errors or not t.is_alive(), 60, "the connector to start"
        )
        if errors:
            raise errors[0]
        made = 0
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:>5.0f}"),
            console=console,
            transient=False,
        ) as bar:
            committed = bar.add_task("changes committed by the workload", total=None)
            landed = bar.add_task("records landed (Delta + jsonl)", total=None)

            def progress(_done: int, records: int) -> None:
                nonlocal made
                made = records
                bar.update(committed, completed=records)
                bar.update(landed, completed=engine.stats.records)

            conn = connect()
            try:
                # ~4 s of work whatever --rows is: enough to watch, short enough to wait for
                made = workload(
                    conn,
                    rows,
                    random.Random(42),
                    dialect,
                    pace_s=min(0.02, 4.0 / max(rows, 1)),
                    progress=progress,
                )
            finally:
                conn.close()
            bar.update(committed, completed=made, total=made)
            bar.update(landed, total=made)
            deadline = time.monotonic() + 60
            while engine.stats.records < made and time.monotonic() < deadline and t.is_alive():
                bar.update(landed, completed=engine.stats.records)
                time.sleep(0.05)
            bar.update(landed, completed=engine.stats.records)
    finally:
        engine.stop()
        t.join(60)
        close_all(engine.sinks)
    if errors:
        raise errors[0]
    streamed = engine.stats.records
    bounded = build_engine(cfg, until_caught_up=True)
    try:
        bounded.run()
    finally:
        close_all(bounded.sinks)
    console.print(
        f"{streamed} records streamed live as the workload ran, {bounded.stats.records} more in the "
        "bounded catch-up run (--until-caught-up)"
    )


MARKER = ".tidemark-demo"


def _prepare(workdir: Path) -> None:
    """Each run starts new servers, so the previous run's offsets and change logs would point
    at servers that are gone: clear what an earlier demo left in its own work directory, and
    refuse a directory the demo did not create rather than delete anything in it."""
    warehouse = workdir / "warehouse"
    outputs = [workdir / f"{name}.jsonl" for name in SOURCES]
    if (warehouse.exists() or any(p.exists() for p in outputs)) and not (workdir / MARKER).exists():
        raise TerminalError(
            f"demo: {workdir} already holds a warehouse or jsonl output the demo did not write",
            "choose another --workdir (the demo clears its own results on every run)",
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("written by `tidemark demo`: results here are replaced on every run\n")
    shutil.rmtree(warehouse, ignore_errors=True)
    for p in outputs:
        p.unlink(missing_ok=True)


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TerminalError(f"demo: timed out waiting for {what}")
        time.sleep(0.1)


def _row_label(
    topic: str, coll: str | None, op: str | None, tombstone: bool | None, payload: str | None
) -> tuple[str, str]:
    """(table, kind) of one change-log row for the demo's summary. Records of no table (MySQL's
    schema changes, transaction metadata) sit in the `__meta` partition with no `op`: they are
    named by their topic and what their payload is, not counted as tombstones."""
    if coll and coll != META_PARTITION:
        return coll, op or ("tombstone" if tombstone else "other")
    if tombstone:
        return f"topic {topic}", "tombstone"
    fields = orjson.loads(payload) if payload else {}
    kind = "schema change" if "ddl" in fields else "transaction" if "status" in fields else "other"
    return f"topic {topic}", kind


def _show(console: Console, changelog: Path, jsonl: Path) -> None:
    from deltalake import DeltaTable

    dt = DeltaTable(str(changelog))
    cols = ["topic", "collection", "op", "is_tombstone", "payload"]
    tbl = dt.to_pyarrow_table(columns=cols)
    counts: dict[tuple[str, str], int] = {}
    for topic, coll, op, tombstone, payload in zip(*(tbl.column(c).to_pylist() for c in cols), strict=True):
        key = _row_label(topic, coll, op, tombstone, payload)
        counts[key] = counts.get(key, 0) + 1
    console.print(f"Delta change log {changelog} (table version {dt.version()}):", soft_wrap=True)
    t = Table()
    for c in ("table", "op", "events"):
        t.add_column(c)
    for (coll, op), n in sorted(counts.items()):
        t.add_row(coll, op, str(n))
    console.print(t)
    lines = jsonl.read_bytes().splitlines()
    console.print(f"{len(lines)} Kafka-format records in {jsonl}; the first two:", soft_wrap=True)
    for line in lines[:2]:
        rec = orjson.loads(line)
        console.print_json(
            data={
                "topic": rec["topic"],
                "key": rec["key"],
                "value": rec["value"]["payload"]
                if isinstance(rec["value"], dict) and "payload" in rec["value"]
                else rec["value"],
            }
        )
