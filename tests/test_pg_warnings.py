"""Start-up and schema warnings of the PostgreSQL source, read in-process with caplog: columns
Debezium has no mapping for (issue 8 #12), include lists that match nothing and FOR ALL TABLES
publications over tables without a replica identity (#8)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from pgcdc import source_config

from connectors.api import Record
from connectors.settings.config import ConnectorConfig
from connectors.sources.memory import RunMemory
from connectors.sources.postgres.source import PostgresSource


def _run(cfg: ConnectorConfig, history: RunMemory) -> list[Record]:
    """One connector attempt until caught up (the slot's position is the start)."""
    src = PostgresSource(cfg, until_caught_up=True, max_seconds=60, memory=history)
    src.open(None)
    records: list[Record] = []
    try:
        for b in src.batches():
            records += b.records
            src.acknowledge(b.offset)  # as the engine does once the sinks hold the batch
    finally:
        src.close()
    return records


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def test_unmapped_column_types_warn_once_per_column(
    pg: Any, pg_database: str, tmp_path: Path, unique_name: Any, caplog: pytest.LogCaptureFixture
) -> None:
    conn = pg.connect(dbname=pg_database)
    cur = conn.cursor()
    cur.execute("CREATE TYPE pair AS (a integer, b text)")
    cur.execute(
        "CREATE TABLE odd (id int PRIMARY KEY, c_pair pair, c_pairs pair[], c_mr int4multirange, v text)"
    )
    cfg = source_config(pg, tmp_path, slot=unique_name("slot"), dbname=pg_database)
    history = RunMemory()
    with caplog.at_level(logging.WARNING, logger="connectors.sources.postgres"):
        _run(cfg, history)  # creates slot and publication
        cur.execute("INSERT INTO odd VALUES (1, ROW(1, 'x'), ARRAY[ROW(2, 'y')::pair], '{[1,3)}', 'a')")
        first = _run(cfg, history)
        # A new Relation message (ALTER) and a new attempt rebuild the table's schema: no new warning.
        cur.execute("ALTER TABLE odd ADD COLUMN w int")
        cur.execute("INSERT INTO odd VALUES (2, ROW(3, 'z'), NULL, NULL, 'b', 7)")
        second = _run(cfg, history)
    conn.close()
    assert [r.value["after"] for r in first + second if r.value is not None and r.topic.endswith(".odd")] == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b", "w": 7},
    ]
    left_out = _warnings(caplog, "has no Debezium mapping")
    assert len(left_out) == 3, left_out
    assert any("odd.c_pair (type pair, a composite type)" in m for m in left_out), left_out
    assert any("odd.c_pairs (type pair[], an array of pair)" in m for m in left_out), left_out
    assert any("odd.c_mr (type int4multirange, a multirange)" in m for m in left_out), left_out
    assert all("include.unknown.datatypes=true" in m for m in left_out)


def test_include_lists_matching_nothing_warn_with_the_tables(
    pg: Any, pg_database: str, tmp_path: Path, unique_name: Any, caplog: pytest.LogCaptureFixture
) -> None:
    conn = pg.connect(dbname=pg_database)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA shop")
    cur.execute("CREATE TABLE shop.orders (id int PRIMARY KEY)")
    cur.execute("CREATE TABLE public.customers (id int PRIMARY KEY)")
    conn.close()
    # Typical slips: the table without its schema, a schema name with a typo.
    cfg = source_config(
        pg,
        tmp_path,
        slot=unique_name("slot"),
        dbname=pg_database,
        **{"table.include.list": "orders", "schema.include.list": "shopp"},
    )
    history = RunMemory()
    with caplog.at_level(logging.WARNING, logger="connectors.sources.postgres"):
        _run(cfg, history)
        _run(cfg, history)  # a reconnect does not repeat it
    found = _warnings(caplog, "matches")
    assert len(found) == 1, found
    msg = found[0]
    assert f"no table in database {pg_database} matches" in msg
    assert "schema.include.list=shopp; table.include.list=orders" in msg
    assert "public.customers, shop.orders" in msg


def test_all_tables_publication_over_keyless_tables_warns(
    pg: Any, pg_database: str, tmp_path: Path, unique_name: Any, caplog: pytest.LogCaptureFixture
) -> None:
    conn = pg.connect(dbname=pg_database)
    cur = conn.cursor()
    cur.execute("CREATE TABLE keyed (id int PRIMARY KEY)")
    cur.execute("CREATE TABLE full_ident (v int)")
    cur.execute("ALTER TABLE full_ident REPLICA IDENTITY FULL")
    cur.execute("CREATE TABLE bare (v int)")
    cur.execute("INSERT INTO bare VALUES (1)")
    slot = unique_name("slot")
    cfg = source_config(
        pg, tmp_path, slot=slot, dbname=pg_database, **{"publication.autocreate.mode": "all_tables"}
    )
    history = RunMemory()
    with caplog.at_level(logging.WARNING, logger="connectors.sources.postgres"):
        _run(cfg, history)
        _run(cfg, history)  # the publication exists now: nothing new to say
    found = _warnings(caplog, "replica identity")
    assert len(found) == 1, found
    assert f"publication {slot} was created FOR ALL TABLES" in found[0] and "public.bare." in found[0]
    assert "keyed" not in found[0] and "full_ident" not in found[0]
    # What the warning says the application now meets:
    with pytest.raises(psycopg2.Error, match="does not have a replica identity"):
        cur.execute("DELETE FROM bare")
    conn.close()
