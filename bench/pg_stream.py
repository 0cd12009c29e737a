"""PostgreSQL streaming benchmark: Tidemark vs Debezium 3.6 vs a bare psycopg2 read loop.

    .venv/bin/python bench/pg_stream.py [--events N] [--quick] [--profile]

One private PostgreSQL and one tansu broker; for each workload shape (N single-row transactions,
then N rows in 1,000-row transactions) a fresh set of logical slots is created *before* the
workload, one slot per consumer, so every consumer catches up on exactly the same WAL. Consumers
run one at a time. Prints one JSON line per figure on stdout; logs go to stderr. See README.md.
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    TIDEMARK_CONSUMERS,
    add_common_args,
    bench_session,
    emit,
    log,
    pg_debezium_props,
    pg_tidemark_props,
    profile_tidemark,
    run_debezium_counter,
    run_tidemark,
    selection,
    sink_props,
    tidemark_line,
    write_properties,
)

PUBLICATION = "bench_pub"
TARGETS = {"tidemark_delta": 1.25, "tidemark_kafka": 1.0, "tidemark_kafka_python": 1.0}
ALL_CONSUMERS = [*TIDEMARK_CONSUMERS, "debezium", "psycopg2_raw"]
PROFILED = ["tidemark_delta", "tidemark_kafka", "tidemark_kafka_python"]
SHAPES = ["single_row_tx", "tx_1000_rows"]

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS bench (
    id bigint PRIMARY KEY, name text, qty int, price numeric(10,2), created timestamptz, note text);
CREATE OR REPLACE PROCEDURE bench_single_row(first bigint, last bigint) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first..last LOOP
        INSERT INTO bench VALUES (i, 'customer-' || i, (i % 100)::int, ((i % 100000) / 100.0)::numeric(10,2),
                                  clock_timestamp(), repeat(md5(i::text), 4));
        COMMIT;
    END LOOP;
END $$;
CREATE OR REPLACE PROCEDURE bench_batched(first bigint, last bigint, per_tx int) LANGUAGE plpgsql AS $$
DECLARE s bigint := first;
BEGIN
    WHILE s <= last LOOP
        INSERT INTO bench
        SELECT g, 'customer-' || g, (g % 100)::int, ((g % 100000) / 100.0)::numeric(10,2), clock_timestamp(),
               repeat(md5(g::text), 4)
        FROM generate_series(s, least(s + per_tx - 1, last)) g;
        COMMIT;
        s := s + per_tx;
    END LOOP;
END $$;
"""


# --------------------------------------------------------------------------- workload
def setup_database(pg: Any) -> None:
    conn = pg.connect()
    cur = conn.cursor()
    cur.execute(SCHEMA_SQL)
    cur.execute(f"DROP PUBLICATION IF EXISTS {PUBLICATION}")
    cur.execute(f"CREATE PUBLICATION {PUBLICATION} FOR ALL TABLES")
    conn.close()


def create_slots(pg: Any, names: list[str]) -> None:
    for name in names:
        pg.scalar("SELECT lsn FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def drop_slots(pg: Any, names: list[str]) -> None:
    for name in names:
        try:
            pg.drop_slot(name, timeout=30)
        except Exception as e:  # noqa: BLE001 - best effort between rounds
            log(f"could not drop slot {name}: {e!r}")


def generate(pg: Any, shape: str, first: int, n: int) -> float:
    conn = pg.connect()
    cur = conn.cursor()
    t0 = time.monotonic()
    if shape == "single_row_tx":
        cur.execute("CALL bench_single_row(%s, %s)", (first, first + n - 1))
    else:
        cur.execute("CALL bench_batched(%s, %s, 1000)", (first, first + n - 1))
    conn.close()
    return time.monotonic() - t0


# --------------------------------------------------------------------------- Tidemark
def tidemark_config(path: Path, pg: Any, kafka: Any, consumer: str, slot: str, work: Path) -> Path:
    return write_properties(
        path, {**pg_tidemark_props(pg, slot, PUBLICATION), **sink_props(consumer, work, kafka)}
    )


# --------------------------------------------------------------------------- Debezium
def run_debezium(pg: Any, slot: str, work: Path, n: int) -> dict[str, Any]:
    props = pg_debezium_props(pg, slot, PUBLICATION, work)
    st, start, wall, peak, _cpu = run_debezium_counter(props, work, n, max(300.0, n / 500))
    return {
        "steady_s": st["nth"] - st["first"],
        "to_nth_s": st["nth"] - start,
        "wall_s": wall,
        "records": st["n"],
        "json_bytes": st["bytes"],
        "peak_rss_mb": peak,
    }


# --------------------------------------------------------------------------- psycopg2 baseline
def run_raw(pg: Any, slot: str, n: int) -> dict[str, Any]:
    import psycopg2
    import psycopg2.extras

    t0 = time.monotonic()
    conn = psycopg2.connect(pg.dsn(), connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = conn.cursor()
    cur.start_replication(
        slot_name=slot, decode=False, options={"proto_version": "1", "publication_names": PUBLICATION}
    )
    inserts = 0
    begins = 0
    first = None
    last_fb = time.monotonic()
    deadline = t0 + max(300.0, n / 200)
    while inserts < n:
        msg = cur.read_message()
        if msg is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"psycopg2 read {inserts} of {n} inserts before the deadline")
            select.select([cur], [], [], 1.0)
            continue
        if first is None:
            first = time.monotonic()
        kind = msg.payload[:1]
        if kind == b"I":
            inserts += 1
        elif kind == b"B":
            begins += 1
        now = time.monotonic()
        if now - last_fb > 5:
            cur.send_feedback(flush_lsn=msg.data_start)
            last_fb = now
    end = time.monotonic()
    conn.close()
    return {"steady_s": end - (first or t0), "wall_s": end - t0, "records": inserts, "transactions": begins}


# --------------------------------------------------------------------------- main
def bench_round(
    pg: Any, kafka: Any, shape: str, first_id: int, n: int, consumers: list[str], base: Path, profile: bool
) -> None:
    slots = {c: f"{shape}_{c}"[:63] for c in consumers}
    prof_slots = {c: f"{shape}_prof_{c}"[:63] for c in PROFILED if profile and c in consumers}
    create_slots(pg, [*slots.values(), *prof_slots.values()])
    log(f"{shape}: slots created ({', '.join([*slots.values(), *prof_slots.values()])}); generating {n} rows")
    gen_s = generate(pg, shape, first_id, n)
    wal = pg.scalar(
        "SELECT pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)) "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (next(iter(slots.values())),),
    )
    log(
        f"{shape}: workload generated in {gen_s:.1f}s ({n / gen_s:.0f} rows/s), {wal} of WAL behind each slot"
    )
    emit(
        {
            "bench": "pg_stream",
            "shape": shape,
            "consumer": "workload_generation",
            "events": n,
            "seconds": round(gen_s, 3),
            "events_per_s": round(n / gen_s),
        }
    )
    steady: dict[str, float] = {}
    common = {"bench": "pg_stream", "shape": shape, "events": n}
    for c in consumers:
        work = base / shape / c
        work.mkdir(parents=True, exist_ok=True)
        log(f"{shape}: {c} catching up on slot {slots[c]}")
        try:
            if c in TIDEMARK_CONSUMERS:
                cfg = tidemark_config(work / "tidemark.properties", pg, kafka, c, slots[c], work)
                r = run_tidemark(cfg, work, n)
                steady[c] = tidemark_line(common, c, n, r)
            elif c == "debezium":
                r = run_debezium(pg, slots[c], work, n)
                steady[c] = r["steady_s"]
                emit(
                    {
                        **common,
                        "consumer": c,
                        "seconds": round(r["steady_s"], 3),
                        "events_per_s": round(n / r["steady_s"]),
                        "seconds_incl_startup": round(r["to_nth_s"], 3),
                        "events_per_s_incl_startup": round(n / r["to_nth_s"]),
                        "process_wall_s": round(r["wall_s"], 3),
                        "records": r["records"],
                        "peak_rss_mb": round(r["peak_rss_mb"], 1),
                    }
                )
            else:
                r = run_raw(pg, slots[c], n)
                steady[c] = r["steady_s"]
                emit(
                    {
                        **common,
                        "consumer": c,
                        "seconds": round(r["steady_s"], 3),
                        "events_per_s": round(n / r["steady_s"]),
                        "seconds_incl_startup": round(r["wall_s"], 3),
                        "events_per_s_incl_startup": round(n / r["wall_s"]),
                        "records": r["records"],
                        "transactions": r["transactions"],
                    }
                )
        except Exception as e:  # noqa: BLE001 - report and go on with the other consumers
            log(f"{shape}: {c} FAILED: {e}")
            emit({**common, "consumer": c, "error": str(e)[:500]})
        log(f"{shape}: {c} done")
    for c in TIDEMARK_CONSUMERS:
        if c not in steady:
            continue
        for base_c in ("debezium", "psycopg2_raw"):
            if base_c in steady:
                line = {
                    "bench": "pg_stream",
                    "shape": shape,
                    "ratio": f"{c}/{base_c}",
                    "value": round(steady[base_c] / steady[c], 3),
                }
                if base_c == "debezium" and c in TARGETS:
                    line.update(target=TARGETS[c], meets_target=line["value"] >= TARGETS[c])
                emit(line)
    if "debezium" in steady and "psycopg2_raw" in steady:
        emit(
            {
                "bench": "pg_stream",
                "shape": shape,
                "ratio": "debezium/psycopg2_raw",
                "value": round(steady["psycopg2_raw"] / steady["debezium"], 3),
            }
        )
    for c, slot in prof_slots.items():
        work = base / shape / f"profile_{c}"
        work.mkdir(parents=True, exist_ok=True)
        cfg = tidemark_config(work / "tidemark.properties", pg, kafka, c, slot, work)
        profile_tidemark(f"{shape} {c} on slot {slot}", cfg, work, n)
    drop_slots(pg, [*slots.values(), *prof_slots.values()])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, SHAPES, ALL_CONSUMERS, PROFILED)
    a = ap.parse_args(argv)
    n, shapes, consumers = selection(ap, a, SHAPES, ALL_CONSUMERS)

    from connectors.app.embedded.postgres import start_pg

    use_kafka = any("kafka" in c for c in consumers)
    with bench_session("tidemark-bench-", n, a.keep or a.profile, use_kafka) as (base, servers, kafka):
        pg = start_pg(None, max_replication_slots=20, max_wal_senders=20, max_wal_size="4GB")
        servers.callback(pg.destroy)
        setup_database(pg)
        for i, shape in enumerate(shapes):
            bench_round(pg, kafka, shape, 1 + i * n, n, consumers, base, a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
