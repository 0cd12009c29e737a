"""Source contract: one suite, run against every source (PostgreSQL, MariaDB), in-process as the
engine drives them (connectors/engine/wiring.py builds `<Source>(cfg, until_caught_up=...)`).

What is checked is the contract of `connectors.api.Source` and docs/architecture.md:
  * batches are transaction-aligned: a transaction's records are split across batches only
    where a batch was cut for size inside it (it holds `max.batch.size` records and its offset
    says how far into the transaction it is; PostgreSQL's also says `extra["more"]`, MariaDB's
    only when the next event is already buffered, see `Connector.more_on_size_cut`);
  * every record's `pos` orders by `offset_key`: non-decreasing, after the start offset and
    after every earlier batch's offset; a batch's offset orders at or after its records (at
    exactly its last record when cut inside a transaction); `offset_key(None)` is the minimum;
  * `open(offset)` with any batch's offset continues strictly after it: no repeat, no gap;
  * `stop()` ends `batches()`; bounded mode (`until_caught_up=True`) ends by itself;
  * `acknowledge()` takes the offsets the source produced; `close()` is safe after `stop()`,
    twice, and on a source that was never opened (the engine closes after a failed open).

Each connector reads the same workload on a table `items (id, v)` of a fresh database: single-row
transactions, a multi-statement transaction, one larger than `max.batch.size`, an update and a
delete (with its tombstone).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mycdc
import pgcdc
import pytest
from harness import wait_until

from connectors.api import Batch, Record, Source
from connectors.sources.mysql import source as mysql_source
from connectors.sources.postgres import source as pg_source

MAX_BATCH = 50
TABLE = "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(40))"
DRAIN_TIMEOUT = 90.0  # seconds a bounded source may take to catch up on the workload


# --------------------------------------------------------------------------- the workload
def _insert(*ids: int) -> str:
    return "INSERT INTO items VALUES " + ", ".join(f"({i}, 'v{i}')" for i in ids)


# One list of statements per transaction; the records each produces, as (op, id) with
# op None for a tombstone.
WORKLOAD: list[tuple[list[str], list[tuple[str | None, int]]]] = [
    *[([_insert(i)], [("c", i)]) for i in range(1, 6)],
    # several statements, fewer rows than a batch holds: never split
    (
        [_insert(10, 11, 12), _insert(13), "UPDATE items SET v = 'w' WHERE id = 11", _insert(14, 15)],
        [("c", 10), ("c", 11), ("c", 12), ("c", 13), ("u", 11), ("c", 14), ("c", 15)],
    ),
    # 180 rows in three statements: cut for size inside the transaction
    (
        [_insert(*range(100 + 60 * k, 160 + 60 * k)) for k in range(3)],
        [("c", i) for i in range(100, 280)],
    ),
    (
        ["UPDATE items SET v = 'u' WHERE id = 1", "DELETE FROM items WHERE id = 2"],
        [("u", 1), ("d", 2), (None, 2)],
    ),
    ([_insert(6)], [("c", 6)]),
]
EXPECTED = [rec for _, recs in WORKLOAD for rec in recs]
TX_OF = [tx for tx, (_, recs) in enumerate(WORKLOAD) for _ in recs]  # EXPECTED[i]'s transaction


def _change(r: Record) -> tuple[str | None, int]:
    return (r.value["op"] if r.value is not None else None, r.key["id"])


def _changes(batches: list[Batch]) -> list[tuple[str | None, int]]:
    return [_change(r) for b in batches for r in b.records if r.collection is not None]


# --------------------------------------------------------------------------- the connectors
@dataclass
class Connector:
    name: str
    make: Callable[[bool], Source]  # a new source; True: bounded (until caught up)
    offset_key: Callable[[dict[str, Any] | None], tuple[int, ...]]
    in_transaction: Callable[[dict[str, Any]], bool]  # the offset points inside a transaction
    execute: Callable[[list[str]], None]  # the statements, as one transaction
    confirmed: Callable[[], int | None]  # what the server holds as acknowledged, if it keeps that
    # Whether a batch cut for size inside a transaction always says extra["more"]. The binlog
    # source says `more` only when the next event is already whole in its read buffer (its
    # docstring), so a large transaction arriving more slowly than it is decoded is cut with
    # more=False now and then (31 of 3,600 cuts of three 60,000-row inserts read live); the
    # engine then commits the piece at once instead of merging it: slower, not wrong.
    more_on_size_cut: bool = True

    def start(self) -> dict[str, Any] | None:
        """A first, fresh run until caught up (the slot / binlog position): its last offset."""
        batches = drain(self.make(True), None)
        return batches[-1].offset if batches else None

    def run_workload(self) -> None:
        for statements, _ in WORKLOAD:
            self.execute(statements)


def _transaction(conn: Any, statements: list[str]) -> None:
    """One transaction on an autocommit DB-API connection (psycopg2 or PyMySQL)."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for s in statements:
            cur.execute(s)
        cur.execute("COMMIT")


def _postgres(request: pytest.FixtureRequest, tmp_path: Path, unique_name: Any) -> Iterator[Connector]:
    pg, dbname = request.getfixturevalue("pg"), request.getfixturevalue("pg_database")
    slot = unique_name("slot")
    pg.execute(TABLE, dbname=dbname)
    cfg = pgcdc.source_config(
        pg,
        tmp_path / "warehouse",
        slot=slot,
        dbname=dbname,
        **{"max.batch.size": MAX_BATCH, "slot.retry.delay.ms": 200},
    )
    conn = pg.connect(dbname=dbname)
    try:
        yield Connector(
            "postgres",
            lambda bounded: pg_source.PostgresSource(cfg, until_caught_up=bounded),
            pg_source.offset_key,
            lambda offset: offset.get("complete") is False,
            lambda statements: _transaction(conn, statements),
            lambda: pg.scalar(
                "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
                dbname=dbname,
            ),
        )
    finally:
        conn.close()


def _mariadb(request: pytest.FixtureRequest, tmp_path: Path, unique_name: Any) -> Iterator[Connector]:
    server, db = request.getfixturevalue("mariadb"), request.getfixturevalue("mariadb_database")
    server.execute(TABLE, database=db)
    cfg = mycdc.source_config(
        server,
        tmp_path / "warehouse",
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db, "max.batch.size": MAX_BATCH},
    )
    conn = server.connect(database=db)
    try:
        yield Connector(
            "mariadb",
            lambda bounded: mysql_source.MySqlSource(cfg, until_caught_up=bounded),
            mysql_source.offset_key,
            lambda offset: bool(offset.get("event") or offset.get("row")),
            lambda statements: _transaction(conn, statements),
            lambda: None,  # the binlog keeps no consumer position
            more_on_size_cut=False,
        )
    finally:
        conn.close()


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ]
)
def connector(request: pytest.FixtureRequest, tmp_path: Path, unique_name: Any) -> Iterator[Connector]:
    make = {"postgres": _postgres, "mariadb": _mariadb}[request.param]
    yield from make(request, tmp_path, unique_name)


# --------------------------------------------------------------------------- driving a source
def drain(
    src: Source,
    start: dict[str, Any] | None,
    *,
    timeout: float = DRAIN_TIMEOUT,
    on_batch: Callable[[Batch], None] | None = None,
    on_end: Callable[[list[Batch]], None] | None = None,
) -> list[Batch]:
    """Open a bounded source at `start`, collect its batches and close it, all on one thread as
    the engine does (`on_batch` after each batch, `on_end` before the close). It must end by
    itself within `timeout`, else it is stopped and the test fails."""
    batches: list[Batch] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            src.open(start)
            try:
                for b in src.batches():
                    batches.append(b)
                    if on_batch is not None:
                        on_batch(b)
                if on_end is not None:
                    on_end(batches)
            finally:
                src.close()
        except BaseException as e:  # re-raised on the test's thread
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        src.stop()
        worker.join(30)
        pytest.fail(f"bounded batches() did not end within {timeout:.0f}s of catching up")
    if failure:
        raise failure[0]
    return batches


@dataclass
class Capture:
    start: dict[str, Any] | None
    batches: list[Batch]


@pytest.fixture
def capture(connector: Connector) -> Capture:
    """The workload read by one bounded source from the start position taken before it."""
    start = connector.start()
    connector.run_workload()
    batches = drain(connector.make(True), start)
    assert _changes(batches) == EXPECTED
    return Capture(start, batches)


# --------------------------------------------------------------------------- the contract
def test_batches_are_transaction_aligned(connector: Connector, capture: Capture) -> None:
    where: list[int] = []  # the batch of each record of EXPECTED
    for i, b in enumerate(capture.batches):
        where += [i for r in b.records if r.collection is not None]
    spans: dict[int, list[int]] = {}
    for tx, batch in zip(TX_OF, where, strict=True):
        if batch not in spans.setdefault(tx, []):
            spans[tx].append(batch)
    for tx, batches in spans.items():
        for i in batches[:-1]:  # a batch the transaction goes on after
            b = capture.batches[i]
            assert len(b.records) >= MAX_BATCH, (
                f"transaction {tx} split by a batch of {len(b.records)} records"
            )
            assert connector.in_transaction(b.offset), f"transaction {tx} split, offset {b.offset}"
            if connector.more_on_size_cut:
                assert b.extra.get("more") is True, f"transaction {tx} split without extra['more']: {b.extra}"
    multi = next(tx for tx, (stmts, _) in enumerate(WORKLOAD) if len(stmts) == 4)
    large = next(tx for tx, (_, recs) in enumerate(WORKLOAD) if len(recs) > MAX_BATCH)
    assert len(spans[multi]) == 1
    assert len(spans[large]) >= 3  # 180 records, 50 a batch: the size cuts were exercised


def test_positions_follow_offset_key(connector: Connector, capture: Capture) -> None:
    key = connector.offset_key
    floor = key(capture.start)  # everything read orders after where reading started
    last_pos: tuple[int, ...] | None = None
    for b in capture.batches:
        off = key(b.offset)
        assert off >= floor, f"batch offset {b.offset} orders before the previous one"
        for r in b.records:
            if r.collection is None:
                continue
            assert r.pos is not None, f"record without pos: {r.topic}"
            assert r.pos > floor, f"{r.pos} does not order after the previous batch's offset {floor}"
            assert last_pos is None or r.pos >= last_pos, f"{r.pos} orders before {last_pos}"
            assert r.pos <= off, f"{r.pos} orders after its batch's offset {b.offset}"
            last_pos = r.pos
        if connector.in_transaction(b.offset):
            assert off == b.records[-1].pos, "a batch cut inside a transaction: its offset is its last record"
        floor = off


def test_offset_key_of_none_is_the_minimum(connector: Connector, capture: Capture) -> None:
    key = connector.offset_key
    bottom = key(None)
    offsets = [capture.start, *(b.offset for b in capture.batches)]
    assert all(bottom <= key(o) for o in offsets)
    assert all(bottom < r.pos for b in capture.batches for r in b.records if r.pos is not None)
    assert bottom < key(capture.batches[-1].offset)


def test_resume_from_any_batch_offset_continues_strictly_after(
    connector: Connector, capture: Capture
) -> None:
    seen = 0  # records of EXPECTED up to and including batch i
    resumed: set[str] = set()
    for b in capture.batches:
        seen += sum(r.collection is not None for r in b.records)
        if repr(b.offset) in resumed:
            continue
        resumed.add(repr(b.offset))
        rest = _changes(drain(connector.make(True), b.offset))
        assert rest == EXPECTED[seen:], f"resumed from {b.offset}: {rest[:5]}... after {seen} records"
    assert seen == len(EXPECTED) and len(resumed) >= 4


def test_bounded_mode_ends_by_itself(connector: Connector) -> None:
    start = connector.start()
    connector.run_workload()
    caught_up = drain(connector.make(True), start)
    assert _changes(caught_up) == EXPECTED
    # and with nothing new to read: ends at once, nothing repeated
    assert _changes(drain(connector.make(True), caught_up[-1].offset, timeout=60)) == []


def test_acknowledge_accepts_its_offsets(connector: Connector) -> None:
    start = connector.start()
    connector.run_workload()
    src = connector.make(True)

    def ack(b: Batch) -> None:
        # As the engine: on its own thread, or on the offset flusher's for a source that allows it.
        if getattr(src, "acknowledge_thread_safe", False):
            t = threading.Thread(target=src.acknowledge, args=(b.offset,))
            t.start()
            t.join(30)
            assert not t.is_alive()
        else:
            src.acknowledge(b.offset)

    def ack_last(batches: list[Batch]) -> None:
        src.acknowledge(batches[-1].offset)  # the engine's last save, on its own thread

    batches = drain(src, start, on_batch=ack, on_end=ack_last)
    assert _changes(batches) == EXPECTED
    confirmed = connector.confirmed()
    if confirmed is not None:  # PostgreSQL: the slot holds what was acknowledged
        assert confirmed >= int(batches[-1].offset["lsn_flush"])
    assert _changes(drain(connector.make(True), batches[-1].offset)) == []


def test_stop_ends_batches_and_close_is_safe(connector: Connector) -> None:
    never_opened = connector.make(True)
    never_opened.close()  # the engine closes a source whose open() failed

    start = connector.start()
    src = connector.make(False)  # streaming: ends only when stopped
    batches: list[Batch] = []
    failure: list[BaseException] = []

    def run() -> None:  # the engine's thread: open, read, close
        try:
            src.open(start)
            try:
                for b in src.batches():
                    batches.append(b)
            finally:
                src.close()
        except BaseException as e:  # re-raised on the test's thread
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        singles = WORKLOAD[:5]
        for statements, _ in singles:
            connector.execute(statements)
        wait_until(
            lambda: len(_changes(list(batches))) >= len(singles) or failure,
            timeout=60,
            what="the first changes streamed",
        )
        src.stop()  # as the engine on SIGTERM: from another thread
        worker.join(30)
        assert not worker.is_alive(), "batches() did not end after stop()"
        assert not failure, failure
    finally:
        if worker.is_alive():
            src.stop()
            worker.join(30)
    src.close()  # closed once on the reading thread already: a second close is safe

    # What was read up to the stop, then what a new source reads from its last offset: each
    # change once.
    for statements, _ in WORKLOAD[5:]:
        connector.execute(statements)
    rest = drain(connector.make(True), batches[-1].offset)
    assert _changes(batches) + _changes(rest) == EXPECTED
