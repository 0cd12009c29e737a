"""Incremental snapshot pieces without a database: the progress as it rides in the offsets, the
chunk SQL, and the staging table (real Delta tables in a temporary warehouse). The end-to-end
behaviour is in tests/test_incremental_snapshot_{pg,mariadb}.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from connectors.snapshot.incremental import PREFIX, Progress, strip
from connectors.snapshot.incremental_read import ChunkQuery, ChunkRows, chunk_select, dedup_values
from connectors.snapshot.incremental_staging import ChunkMeta, Staging
from connectors.snapshot.incremental_staging import Staging as _Staging


def test_progress_rides_in_the_offset_under_debeziums_keys() -> None:
    p = Progress(
        "abc123",
        "sig-1",
        [
            {"id": "public.a", "condition": "qty < 10", "surrogate_key": None},
            {"id": "public.b", "condition": None, "surrogate_key": "n"},
        ],
        max_key=["900"],
        last_key=["512"],
        table_rows=512,
        chunk_seq=3,
        window_open=True,
        window_keys=[["public.a", '{"id":7}']],
        paused=True,
    )
    offset = {"lsn": 5, **p.to_offset()}
    assert set(offset) == {
        "lsn",
        f"{PREFIX}collections",
        f"{PREFIX}primary_key",
        f"{PREFIX}maximum_key",
        f"{PREFIX}correlation_id",
        f"{PREFIX}tidemark",
    }
    assert '"incremental_snapshot_collections_id":"public.a"' in offset[f"{PREFIX}collections"]
    assert Progress.from_offset(offset) == p
    assert p.chunk_id == "abc123-3"
    assert strip(offset) == {"lsn": 5}
    assert Progress.from_offset({"lsn": 5}) is None and strip({"lsn": 5}) == {"lsn": 5}


def test_chunk_select_bounds_like_debezium() -> None:
    q = ChunkQuery("t", ["a", "b"], ["1", "x"], ["9", "z"], "qty < 10", 100)
    sql = chunk_select(q, "*", '"s"."t"', ['"a"', '"b"'], lambda i, v: f"'{v}'")
    assert sql == (
        """SELECT * FROM "s"."t" WHERE (("a" > '1') OR ("a" = '1' AND "b" > 'x'))"""
        """ AND NOT (("a" > '9') OR ("a" = '9' AND "b" > 'z')) AND (qty < 10) ORDER BY "a", "b" LIMIT 100"""
    )
    first = chunk_select(ChunkQuery("t", ["a"], None, ["9"], None, 5), "*", "t", ["a"], lambda i, v: v)
    assert first == "SELECT * FROM t WHERE NOT ((a > 9)) ORDER BY a LIMIT 5"


def test_dedup_values_key_or_surrogate() -> None:
    rows = ChunkRows(['{"id": 1}', None], ['{"id":1,"n":5}', '{"id":null,"n":6}'], ["6"])
    assert dedup_values(rows, "n") == ['{"id":1}', "6"]


@pytest.mark.parametrize("area", ["files", "delta"])
def test_staging_round_trip_and_cleanup(tmp_path: Path, area: str) -> None:
    def Staging(warehouse: Path, connector: str) -> _Staging:  # noqa: N802 - stands in for the class
        st = _Staging(warehouse, connector)
        if area == "delta":  # what a remote warehouse uses
            st.files = None
        return st

    st = Staging(tmp_path, "c1")
    assert st.read("s1-0") is None
    meta = ChunkMeta("public.a", ["2"], ["9"], 2, ["public.z"])
    st.write("s1-0", meta, ['{"id":1}', '{"id":2}'], ['{"id":1}', '{"id":2}'], ['{"id":1}', '{"id":2}'])
    st.write("s1-1", ChunkMeta(None, None, None, 0, ["public.a"]), [], [], [])
    Staging(tmp_path, "c2").write("s1-0", meta, [None], ["{}"], ["null"])  # another connector
    got = Staging(tmp_path, "c1").read("s1-0")
    assert got is not None and got.meta == meta
    assert got.keys == ['{"id":1}', '{"id":2}'] and got.afters == ['{"id":1}', '{"id":2}']
    empty = st.read("s1-1")
    assert empty is not None and empty.afters == [] and empty.meta.table is None
    st.write("s2-0", meta, [], [], [])
    st.drop_other_snapshots("s2")
    assert st.read("s1-0") is None and st.read("s2-0") is not None
    assert Staging(tmp_path, "c2").read("s1-0") is not None  # other connectors' rows stay
    st.drop_snapshot("s2")
    assert st.read("s2-0") is None and Staging(tmp_path, "c1").read("s2-0") is None
    assert Staging(tmp_path, "c2").read("s1-0") is not None
    # a local warehouse stages files only; a remote one the Delta table
    assert (tmp_path / "_state" / "incremental_chunks").exists() == (area == "files")
    assert (tmp_path / "_state" / "incremental_staging").exists() == (area == "delta")


def test_staging_files_are_atomic_and_listed(tmp_path: Path) -> None:
    st = _Staging(tmp_path, "c/1")  # (a connector name is quoted into one directory)
    meta = ChunkMeta("public.a", ["2"], ["9"], 2, [])
    st.write("s1-0", meta, ['{"id":1}'], ['{"id":1}'], ["1"], wait=False)
    st.write("s1-1", meta, ['{"id":2}'], ['{"id":2}'], ["2"], wait=False)
    st.drain()  # (`settle` waits for a chunk's encoding only: its file follows)
    assert st.read("s1-0") is not None
    assert _Staging(tmp_path, "c/1").staged_ids("s1") == {"s1-0", "s1-1"}
    assert _Staging(tmp_path, "c").staged_ids("s1") == set()
    assert st.files is not None
    # a write a crash interrupted leaves only a temporary file: not staged, deleted with its snapshot
    leftover = st.files.dir / ".s2-0.parquet.0123abcd.tmp"
    leftover.write_bytes(b"PAR1 half a file")
    assert _Staging(tmp_path, "c/1").staged_ids("s2") == set()
    assert _Staging(tmp_path, "c/1").read("s2-0") is None
    st.drop_other_snapshots("s1")
    assert not leftover.exists() and st.staged_ids("s1") == {"s1-0", "s1-1"}
    st.drop_snapshot("s1")
    assert list(st.files.dir.iterdir()) == [] and _Staging(tmp_path, "c/1").read("s1-0") is None


def test_chunk_files_from_arrays_equal_those_from_lists_and_old_parquet_reads(tmp_path: Path) -> None:
    """A chunk's file is built from the encoder's Arrow arrays (`cut` keeps the slices): the same
    table as from the str lists, keyed and keyless, across pieces; a `.parquet` chunk an earlier
    release staged is still listed, read and dropped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from connectors.snapshot.incremental_read import cut
    from connectors.snapshot.incremental_staging import StagedChunk, _rows_table

    meta = ChunkMeta("public.a", ["3"], ["9"], 3, [])
    pieces = [
        (
            pa.array(['{"id":1}', '{"id":2}']),
            pa.array([b'{"id":1,"s":"\xc3\xa9"}', b'{"id":2,"s":null}'], pa.binary()),
        ),
        (pa.array(['{"id":3}'], pa.large_string()), pa.array(['{"id":3,"s":"\\""}'])),
    ]
    two, one = cut(pieces, [2, 1])
    assert two.keys == ['{"id":1}', '{"id":2}'] and two.afters == ['{"id":1,"s":"é"}', '{"id":2,"s":null}']
    assert one.keys == ['{"id":3}'] and one.arrays is not None and one.arrays[1].to_pylist() == one.afters
    for part, dedup in ((two, None), (one, ['"x"'])):
        from_arrays = _rows_table(StagedChunk(meta, part.keys, part.afters, dedup, part.arrays))
        from_lists = _rows_table(StagedChunk(meta, part.keys, part.afters, dedup))
        assert from_arrays.equals(from_lists)
    (keyless,) = cut([(None, pa.array(['{"n":5}']))], [1])
    assert keyless.keys == [None] and keyless.arrays is not None and keyless.arrays[0] is None
    staged = StagedChunk(meta, keyless.keys, keyless.afters, ["5"], keyless.arrays)
    assert _rows_table(staged).equals(_rows_table(StagedChunk(meta, [None], ['{"n":5}'], ["5"])))

    st = _Staging(tmp_path, "c1")
    st.write("s1-0", meta, two.keys, two.afters, None)
    assert st.files is not None and [p.suffix for p in st.files.dir.iterdir()] == [".arrow"]
    old = StagedChunk(meta, one.keys, one.afters, None)
    pq.write_table(_rows_table(old), st.files.dir / "s1-1.parquet")
    again = _Staging(tmp_path, "c1")
    assert again.staged_ids("s1") == {"s1-0", "s1-1"}
    got = again.read("s1-1")
    assert got is not None and got.afters == one.afters and got.meta == meta
    got0 = again.read("s1-0")
    assert got0 is not None and got0.afters == two.afters and got0.keys == two.keys
    again.drop_snapshot("s1")
    assert list(st.files.dir.iterdir()) == []


def test_staging_memory_copy_is_the_callers_own(tmp_path: Path) -> None:
    st = Staging(tmp_path, "c1")
    st.write("s1-0", ChunkMeta("public.a", ["2"], ["9"], 2, []), ['{"id":1}'], ['{"id":1}'], ["1"])
    first = st.read("s1-0")
    assert first is not None
    first.meta.completed.append("public.x")
    first.afters.clear()
    again = st.read("s1-0")
    assert again is not None and again.meta.completed == [] and again.afters == ['{"id":1}']


def test_chunks_wait_for_a_lagging_stream_but_never_stop(tmp_path: Path) -> None:
    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.snapshot import incremental
    from connectors.snapshot.incremental import IncrementalSnapshots

    cfg = config("postgres", tidemark__warehouse=str(tmp_path))
    ctl = IncrementalSnapshots(cfg, None, lambda: None, "public.sig")  # type: ignore[arg-type]
    assert ctl.max_lag_ms == 1000
    change = Record("t.public.a", {"id": 1}, {"op": "c"}, collection="public.a")
    lagging = Batch([change], {"lsn": 1}, extra={"source_ts_ms": time.time() * 1000 - 5000})
    ctl.process(lagging)
    old, incremental.HOLD_MAX_S = incremental.HOLD_MAX_S, 0.3
    try:
        began = time.monotonic()
        ctl.stream_first()  # 5 s behind: held, for HOLD_MAX_S at most
        assert 0.3 <= time.monotonic() - began < 2.0
        ctl.process(Batch([change], {"lsn": 2}, extra={"source_ts_ms": time.time() * 1000}))
        began = time.monotonic()
        ctl.stream_first()  # caught up: not held
        assert time.monotonic() - began < 0.25  # a hold would last HOLD_MAX_S (0.3 s)
    finally:
        incremental.HOLD_MAX_S = old


def test_a_change_counts_as_stored_even_when_the_newest_offset_stored_came_after_the_snapshot(
    tmp_path: Path,
) -> None:
    """The offsets table stores only the newest offset offered. A snapshot that ended in batch A
    and a batch B after it, both offered before a save: the save of B must still say that the
    signal's change (carried by A) is stored, or the signal's handler waits for nothing."""
    from cfgutil import config

    from connectors.api import Batch
    from connectors.snapshot.incremental import IncrementalSnapshots

    ctl = IncrementalSnapshots(
        config("postgres", tidemark__warehouse=str(tmp_path)), None, lambda: None, "public.sig"
    )  # type: ignore[arg-type]
    ctl.needs_store = True
    saved: list[dict] = []
    stored = ctl.when_stored(saved.append)
    with ctl._cond:
        gen = ctl._changed()  # a signal changed the state (the snapshot is already over: no progress)
    a, b = Batch([], {"lsn": 1}), Batch([], {"lsn": 2})
    for batch in (a, b):  # the engine's gating
        if ctl.active:
            ctl.process(batch)
    stored(b.offset)  # the flusher saved only the newest
    assert ctl._committed_gen >= gen and saved == [b.offset]
    ctl.process(Batch([], {"lsn": 3}))
    assert not ctl.active  # nothing left to follow


def test_a_restart_takes_the_newest_state_and_knows_the_signals_it_applied(tmp_path: Path) -> None:
    """Delta (written last) stored a batch with the snapshot's chunk 3 and its signal; the offsets
    table the other sinks rely on is older. The restart resumes the stream from the older offset
    but takes the snapshot state of the newer one: the replayed records up to it are not scanned
    again (a close watermark among them is not acted on twice), and the signal the journal hands
    over again is known as applied."""
    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.signals.model import ExecuteSnapshot, SignalRecord
    from connectors.snapshot.incremental import IncrementalSnapshots

    ctl = IncrementalSnapshots(
        config("postgres", tidemark__warehouse=str(tmp_path)), None, lambda: None, "public.sig"
    )  # type: ignore[arg-type]
    p = Progress("snap1", None, [{"id": "public.a", "condition": None, "surrogate_key": None}], chunk_seq=3)
    newest = {"lsn": 10, **p.to_offset(), f"{PREFIX}signals": '["delta:k1"]'}
    start = ctl.restore({"lsn": 5}, newest, lambda o: (o["lsn"],))
    assert start == {"lsn": 5}
    assert ctl.progress is not None and ctl.progress.chunk_seq == 3 and ctl.applied == ["delta:k1"]

    def close_mark(lsn: int) -> Record:
        after = {"id": f"{p.chunk_id}-close", "type": "snapshot-window-close", "data": None}
        value = {"op": "c", "after": after, "source": {}}
        return Record("t.sig", {"id": after["id"]}, value, collection="public.sig", pos=(lsn,))

    replay = Batch([close_mark(7)], {"lsn": 8})
    ctl.process(replay)  # a replayed close watermark: not acted on (nothing staged: it would skip)
    assert ctl.progress.chunk_seq == 3 and replay.records[0].pos == (7,)
    assert f"{PREFIX}signals" in replay.offset and f"{PREFIX}tidemark" in replay.offset
    request = ExecuteSnapshot(("public.a",), ("public.a",), "incremental", (), None)
    again = SignalRecord("k1", "execute-snapshot", None, "delta", "delta:k1")
    assert "applied before" in str(ctl.execute(request, again))
    assert ctl.progress.snapshot_id == "snap1"
    # past the newest offset the stream is scanned again: this close watermark is acted on
    # (nothing staged: the range is read again, numbered past the chunks read ahead)
    ctl.process(Batch([close_mark(11)], {"lsn": 11}))
    assert ctl.progress.chunk_seq == 3 + 1 + ctl.reader.ahead and ctl.progress.last_key is None


def test_allow_schema_changes_reads_the_chunk_again_after_ddl(tmp_path: Path) -> None:
    """incremental.snapshot.allow.schema.changes (MySQL): DDL of the snapshotted table that the
    stream passed before a chunk's close makes that chunk be read again (its rows may be of the
    old schema); the chunks read ahead are skipped with it. Without the property only the reader's
    schema of the table is refreshed."""
    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.snapshot.incremental import IncrementalSnapshots

    def controller(allow: str) -> IncrementalSnapshots:
        cfg = config(
            "mysql", tidemark__warehouse=str(tmp_path), incremental__snapshot__allow__schema__changes=allow
        )
        ctl = IncrementalSnapshots(cfg, None, lambda: None, "db.sig")  # type: ignore[arg-type]
        ctl.restore(None)
        ctl.progress = Progress("snap1", None, [{"id": "db.a", "condition": None, "surrogate_key": None}])
        return ctl

    def mark(name: str, pos: int) -> Record:
        kind = "snapshot-window-open" if name.endswith("-open") else "snapshot-window-close"
        value = {"op": "c", "after": {"id": name, "type": kind, "data": None}, "source": {}}
        return Record("t.sig", {"id": name}, value, collection="db.sig", pos=(pos,))

    ctl = controller("true")
    assert ctl.allow_schema_changes
    ctl.staging.write(
        "snap1-0", ChunkMeta("db.a", ["10"], ["100"], 10, []), ['{"id":1}'], ['{"id":1}'], ["1"]
    )
    ctl.process(Batch([mark("snap1-0-open", 5)], {"pos": 5}))
    ctl.schema_changed(["db.a"], (6,))  # the MySQL source, decoding ALTER TABLE db.a
    closing = Batch([mark("snap1-0-close", 7)], {"pos": 7})
    ctl.process(closing)
    p = ctl.progress
    assert p is not None and len(closing.records) == 1  # the watermark only: no chunk rows
    # past the chunks the reader may have read ahead
    assert p.chunk_seq == 1 + ctl.reader.ahead and p.last_key is None and p.tables == ["db.a"]

    off = controller("false")
    assert not off.allow_schema_changes
    off.schema_changed(["db.a"], (6,))
    assert off._ddl == []  # no chunk read again, but the reader reloads the table's schema:
    assert off.take_stale() == {"db.a"} and off.take_stale() == set()


def test_an_ended_snapshots_staged_chunks_go_once_every_sink_holds_its_end(tmp_path: Path) -> None:
    """The last close watermark ends the snapshot; once the batch carrying that end is held by
    every sink (no restart can replay one of its close watermarks), its staged chunks are deleted."""
    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.snapshot.incremental import IncrementalSnapshots

    ctl = IncrementalSnapshots(
        config("postgres", tidemark__warehouse=str(tmp_path)), None, lambda: None, "public.sig"
    )  # type: ignore[arg-type]
    ctl.restore(None)
    ctl.progress = Progress("snap1", None, [{"id": "public.a", "condition": None, "surrogate_key": None}])
    ctl.staging.write("snap1-0", ChunkMeta(None, None, None, 0, ["public.a"]), [], [], [])
    after = {"id": "snap1-0-close", "type": "snapshot-window-close", "data": None}
    close = Record(
        "t.sig", {"id": after["id"]}, {"op": "c", "after": after}, collection="public.sig", pos=(3,)
    )
    end = Batch([close], {"lsn": 3})
    ctl.process(end)
    assert ctl.progress is None and ctl.staging.read("snap1-0") is not None
    ctl.settled(end)  # every sink holds it (no offsets table: Delta alone)
    deadline = time.monotonic() + 30
    while ctl.staging.read("snap1-0") is not None:
        assert time.monotonic() < deadline, "the ended snapshot's staged chunks were not deleted"
        time.sleep(0.05)


def test_overlapping_windows_go_out_in_chunk_order_with_their_windows_extended(tmp_path: Path) -> None:
    """reader=spark: chunks 0-2 are read at once, each in its own window. A later chunk's close
    is noted and the chunk goes out after the ones before it; a key changed after its close but
    before it goes out is dropped too (its window lasts until then). The open windows ride in the
    offset, so a restart between two batches keeps them."""
    from types import SimpleNamespace

    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.signals.notify import Notifier
    from connectors.snapshot.incremental import IncrementalSnapshots

    sent: list[tuple[str, dict[str, str]]] = []

    class Recorder:
        name = "test"

        def send(self, n: object) -> None:
            sent.append((n.type, n.additional_data))  # type: ignore[attr-defined]

        def close(self) -> None:
            pass

    cfg = config(
        "postgres", tidemark__warehouse=str(tmp_path), tidemark__incremental__snapshot__reader="spark"
    )

    def controller() -> IncrementalSnapshots:
        ctl = IncrementalSnapshots(cfg, Notifier("tm", [Recorder()]), lambda: None, "public.sig")  # type: ignore[arg-type]
        ctl.publish("public.a", SimpleNamespace(topic="tm.public.a", key_schema=None, envelope_schema=None))  # type: ignore[arg-type]
        return ctl

    ctl = controller()
    assert ctl.spark
    ctl.restore(None)
    ctl.progress = Progress("s1", "sig", [{"id": "public.a", "condition": None, "surrogate_key": None}])
    for n, ids in enumerate([(1, 2), (3, 4), (5, 6)]):
        keys = [f'{{"id":{i}}}' for i in ids]
        meta = ChunkMeta("public.a", [str(ids[-1])], ["6"], 0, [], rows=2, ends=n == 2)
        ctl.staging.write(f"s1-{n}", meta, keys, keys, keys)

    def mark(name: str) -> Record:
        kind = "snapshot-window-open" if name.endswith("-open") else "snapshot-window-close"
        value = {"op": "c", "after": {"id": name, "type": kind, "data": None}, "source": {}}
        return Record("tm.public.sig", {"id": name}, value, collection="public.sig")

    def change(i: int) -> Record:
        value = {"op": "u", "after": {"id": i}, "source": {}}
        return Record("tm.public.a", {"id": i}, value, collection="public.a")

    first = Batch(
        [
            mark("s1-0-open"),
            mark("s1-1-open"),
            mark("s1-2-open"),
            change(3),
            mark("s1-1-close"),
            mark("s1-2-close"),
        ],
        {"lsn": 1},
    )
    ctl.process(first)
    assert len(first.records) == 6  # no chunk goes out before chunk 0
    assert ctl.progress is not None and ctl.progress.chunk_seq == 0
    again = controller()  # a restart after the first batch was stored
    again.restore(first.offset)
    second = Batch([change(5), mark("s1-0-close")], {"lsn": 2})
    again.process(second)
    snap = [r for r in second.records if r.value and r.value["op"] == "r"]
    assert [orjson.loads(orjson.dumps(r.key))["id"] for r in snap] == [
        1,
        2,
        4,
        6,
    ]  # in chunk order; 3 and 5 changed in their windows
    assert again.progress is None  # the last chunk ended the table and the snapshot
    again.close()
    kinds = [k for k, _ in sent]
    assert kinds == ["IN_PROGRESS", "IN_PROGRESS", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert sent[3][1]["total_rows_scanned"] == "6" and sent[1][1]["last_processed_key"] == "4"


def test_chunks_planned_ahead_continue_where_the_stored_plans_end() -> None:
    """The planner: chunk bounds every `chunk_size` rows from the server's key numbering, the last
    chunk of a table up to its maximum key, empty tables listed in the next chunk, and plans
    stored before reused as they are (a restarted job reads the same ranges)."""

    from connectors.snapshot.incremental_plan import plan_ahead

    table_keys = {"public.a": list(range(1, 11)), "public.e": [], "public.b": [100, 200]}
    refreshed: list[str] = []  # the planner asks before planning a table's chunks

    class Source:
        def table(self, table: str) -> Any:
            return (type("TS", (), {"key_names": ["id"]})(), None) if table in table_keys else None

        def refresh(self, table: str) -> None:
            refreshed.append(table)  # (`table` reads `table_keys` each time)

        def max_key(self, table: str, key: Any, condition: Any) -> Any:
            keys = table_keys[table]
            return [str(keys[-1])] if keys else None

        def boundaries(self, q: ChunkQuery, every: int) -> list[list[Any]]:
            after = int(q.after[0]) if q.after else -1
            rows = [k for k in table_keys[q.table] if after < k <= int(q.upto[0])][: q.limit]
            return [[str(k)] for k in rows[every - 1 :: every]]

    tables = [
        {"id": t, "condition": None, "surrogate_key": None}
        for t in ("public.a", "public.gone", "public.e", "public.b")
    ]
    p = Progress("s1", None, tables)
    plans, new = plan_ahead(p, {}, Source(), 3, 2)  # type: ignore[arg-type]
    assert [(n, pl["lower"], pl["upper"]) for n, pl in new] == [(0, None, ["3"]), (1, ["3"], ["6"])]
    p.chunk_seq = 1  # chunk 0 went out
    p.last_key, p.max_key = ["3"], ["10"]
    plans, new = plan_ahead(p, plans, Source(), 3, 4)  # type: ignore[arg-type]
    assert [(n, pl["table"], pl["lower"], pl["upper"], pl["ends"]) for n, pl in sorted(plans.items())] == [
        (1, "public.a", ["3"], ["6"], False),
        (2, "public.a", ["6"], ["9"], False),
        (3, "public.a", ["9"], ["10"], True),
        (4, "public.b", None, ["200"], True),
    ]
    assert [n for n, _ in new] == [2, 3, 4]
    assert plans[4]["completed"] == ["public.gone", "public.e"]
    assert plans[4]["statuses"] == {"public.gone": "UNKNOWN_SCHEMA", "public.e": "EMPTY"}
    # public.a dropped after its first chunks went out: the next plan lists it UNKNOWN_SCHEMA
    del table_keys["public.a"]
    refreshed.clear()
    plans, new = plan_ahead(p, {}, Source(), 3, 1)  # type: ignore[arg-type]
    assert [(n, pl["table"], pl["lower"], pl["upper"]) for n, pl in new] == [(1, "public.b", None, ["200"])]
    assert new[0][1]["statuses"] == {
        "public.a": "UNKNOWN_SCHEMA",
        "public.gone": "UNKNOWN_SCHEMA",
        "public.e": "EMPTY",
    }
    assert refreshed[0] == "public.a"


def test_the_chunk_job_holds_new_chunks_while_the_stream_lags() -> None:
    """reader=spark, as the thread reader: no new chunk while the stream's last stored lag is over
    max.stream.lag.ms; then one chunk every HOLD_MAX_S."""
    from connectors.snapshot import incremental
    from spark_jobs.incremental_chunks import _budget, _lagging

    def offset(lag_ms: float, ago_s: float) -> dict[str, str]:
        # (`ago_s`: how long ago the batch was stored; the stored lag holds however long)
        return {f"{PREFIX}stream": f'{{"lag_ms":{lag_ms}}}'}

    assert not _lagging(offset(200, 0), 1000)  # keeping up
    assert not _lagging(None, 1000)  # nothing stored yet
    assert _lagging(offset(5000, 10), 1000)  # (a long batch since, or none with changes)
    assert not _lagging(offset(5000, 0), 0)  # 0: never held
    assert _lagging(offset(5000, 0), 1000)
    assert _budget(False, 4, None) == (4, None)
    budget, since = _budget(True, 4, None)
    assert budget == 0 and since is not None
    assert _budget(True, 4, since) == (0, since)  # held
    budget, again = _budget(True, 4, since - incremental.HOLD_MAX_S - 0.1)
    assert budget == 1 and again is not None and again > since - 0.1  # one chunk, then held anew
    assert _budget(False, 4, since) == (4, None)


class _ListCodec:
    """Rows given as lists of ids; records how many chunks each call encodes."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode_many(self, parts: Any) -> list[tuple[list[str | None], list[str]]]:
        self.calls.append(len(parts))
        if any("bad" in p for p in parts):
            raise ValueError("a value the encoder refuses")
        return [([f'{{"id": {v}}}' for v in p], [f'{{"id":{v},"n":0}}' for v in p]) for p in parts]


def test_staging_encodes_waiting_chunks_together(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from connectors.snapshot.incremental_staging import ReadRows, _encode, _Unencoded

    one, other = _ListCodec(), _ListCodec()
    meta = ChunkMeta("public.a", ["2"], ["9"], 2, [])

    def item(cid: str, codec: _ListCodec, ids: list[Any]) -> Any:
        return (cid, meta, _Unencoded(ReadRows(len(ids), ids[-1:], codec, ids), None), Future())

    got = _encode(
        [item("s-0", one, [1, 2]), item("s-1", one, [3]), item("s-2", other, ["bad"]), item("s-3", one, [4])]
    )
    assert one.calls == [2, 1] and other.calls == [1]  # consecutive chunks of a codec: one call
    assert isinstance(got[2], ValueError)  # only the failing call's chunk is not staged
    first, second, last = (g for g in got if not isinstance(g, Exception))
    assert first.afters == ['{"id":1,"n":0}', '{"id":2,"n":0}'] and first.keys == ['{"id": 1}', '{"id": 2}']
    # a keyed table's rows are recognised by their keys, canonicalized only when a window needs them
    assert second.keys == ['{"id": 3}'] and first.dedup is None and last.dedup is None
    # through the writer thread: encoded there, read back once encoded, stored after
    st = Staging(tmp_path, "c1")
    st.write_read("s-0", meta, ReadRows(2, [6], one, [5, 6]), None, wait=False)
    st.write_read("s-1", meta, ReadRows(1, ["bad"], other, ["bad"]), None, wait=False)
    staged = st.read("s-0")
    assert staged is not None and staged.afters == ['{"id":5,"n":0}', '{"id":6,"n":0}']
    assert st.read("s-1") is None
    st.drain()
    assert Staging(tmp_path, "c1").read("s-0") is not None


def test_a_local_chunk_is_read_once_encoded_before_its_file_is_written(tmp_path: Path) -> None:
    """The engine takes a chunk from memory as soon as the writer encoded it: the chunk's file
    write is off the stream's path. A file write that fails leaves the chunk read from memory
    here; another process (after a crash) finds no file and reads the chunk again."""
    import threading

    from connectors.snapshot.incremental_staging import ReadRows

    st = Staging(tmp_path, "c1")
    assert st.files is not None
    release = threading.Event()
    real_write = st.files.write
    calls: list[str] = []

    def slow_write(chunk: str, data: Any, *, durable: bool = True) -> None:
        calls.append(chunk)
        assert not durable  # (the engine never waits for the file: not fsynced)
        assert release.wait(30)
        if chunk == "s-1":
            raise OSError(28, "No space left on device")
        real_write(chunk, data, durable=durable)

    st.files.write = slow_write  # type: ignore[method-assign]
    meta = ChunkMeta("public.a", ["2"], ["9"], 2, [])
    st.write_read("s-0", meta, ReadRows(2, [2], _ListCodec(), [1, 2]), None, wait=False)
    st.write_read("s-1", meta, ReadRows(1, [3], _ListCodec(), [3]), None, wait=False)
    st.settle("s-0")
    first = st.read("s-0")  # while its file write is held
    assert first is not None and first.afters == ['{"id":1,"n":0}', '{"id":2,"n":0}']
    assert not release.is_set() and Staging(tmp_path, "c1").staged_ids("s") == set()
    release.set()
    second = st.read("s-1")  # encoded: read from memory, whatever its store does
    assert second is not None and second.afters == ['{"id":3,"n":0}']
    st.drain()
    assert calls == ["s-0", "s-1"]
    other = Staging(tmp_path, "c1")
    assert other.staged_ids("s") == {"s-0"}
    assert other.read("s-0") is not None and other.read("s-1") is None


@pytest.mark.parametrize("tear", ["empty", "cut short", "zeros"])
def test_a_torn_chunk_file_reads_as_not_staged(
    tmp_path: Path, tear: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk file written without fsync may be torn by an operating-system crash: the next
    process reads that chunk as not staged (the engine and the reader read it again), with a
    warning naming the file, and staging it again replaces the file."""
    from connectors.snapshot.incremental_staging import ReadRows

    st = Staging(tmp_path, "c1")
    meta = ChunkMeta("public.a", ["2"], ["9"], 2, [])
    st.write_read("s-0", meta, ReadRows(2, [2], _ListCodec(), [1, 2]), None, wait=False)
    st.drain()
    assert st.files is not None
    path = st.files.dir / "s-0.arrow"
    whole = path.read_bytes()
    torn = {"empty": b"", "cut short": whole[: len(whole) // 2], "zeros": bytes(len(whole))}[tear]
    path.write_bytes(torn)
    after = Staging(tmp_path, "c1")
    assert after.staged_ids("s") == {"s-0"}
    with caplog.at_level("WARNING"):
        assert after.read("s-0") is None
    assert "s-0.arrow is unreadable" in caplog.text and "reading the chunk again" in caplog.text
    after.write("s-0", meta, ['{"id":1}'], ['{"id":1,"n":0}'], None)
    again = Staging(tmp_path, "c1").read("s-0")
    assert again is not None and again.afters == ['{"id":1,"n":0}']


class _BadAfterCodec:
    """Encodes one row whose `after` is not text: the chunk cannot be stored."""

    def encode_many(self, parts: Any) -> list[tuple[list[str | None], list[Any]]]:
        return [(['{"id":1}'], [12345]) for _ in parts]


def test_staging_writer_survives_a_chunk_it_cannot_store(tmp_path: Path) -> None:
    from connectors.snapshot.incremental_staging import ReadRows

    st = Staging(tmp_path, "c1")
    meta = ChunkMeta("public.a", ["1"], ["9"], 1, [])
    st.write_read("s-0", meta, ReadRows(1, [1], _BadAfterCodec(), None), None, wait=False)
    st.write_read("s-1", meta, ReadRows(1, [2], _ListCodec(), [2]), None, wait=False)
    assert st.read("s-0") is None  # not staged: the engine reads that chunk again
    staged = st.read("s-1")  # the writer thread went on
    assert staged is not None and staged.afters == ['{"id":2,"n":0}']


@pytest.mark.parametrize("sinks", ["jsonl", "kafka,delta", "delta"])
@pytest.mark.parametrize("flags", [(True, True), (False, True), (True, False), (False, False)])
def test_chunk_rows_carry_the_bytes_serializing_them_gives(
    tmp_path: Path, sinks: str, flags: tuple[bool, bool]
) -> None:
    """A chunk's rows carry their Kafka/jsonl bytes, built once per chunk around each staged
    `after` (`Record.wire`): byte for byte what serializing the record gives, for every schema
    setting; none when no sink writes those bytes. A row whose key changed in its window is
    dropped (its key canonicalized only then: staged keys need not be)."""
    from cfgutil import config

    from connectors.api import Batch, Record
    from connectors.format.schema import Field, Schema
    from connectors.format.serde import to_json_bytes
    from connectors.sinks.common import joined, serialized_batch
    from connectors.snapshot.incremental import IncrementalSnapshots

    cfg = config(
        "postgres",
        tidemark__warehouse=str(tmp_path),
        debezium__sink__type=sinks,
        debezium__sink__kafka__producer__bootstrap__servers="localhost:1",
        debezium__sink__delta__table__path=str(tmp_path / "delta"),
        debezium__format__key__schemas__enable=str(flags[0]).lower(),
        debezium__format__value__schemas__enable=str(flags[1]).lower(),
    )
    ctl = IncrementalSnapshots(cfg, None, lambda: None, "public.sig")  # type: ignore[arg-type]
    key_schema = Schema("struct", name="tm.public.a.Key", fields=(Field("id", Schema("int64")),))
    row = Schema(
        "struct",
        True,
        "tm.public.a.Value",
        fields=(Field("id", Schema("int64")), Field("s", Schema("string", True))),
    )
    envelope = Schema("struct", name="tm.public.a.Envelope", fields=(Field("after", row),))
    from types import SimpleNamespace

    ctl.publish(
        "public.a", SimpleNamespace(topic="tm.public.a", key_schema=key_schema, envelope_schema=envelope)
    )  # type: ignore[arg-type]
    ctl.restore(None)
    ctl.progress = Progress("s1", None, [{"id": "public.a", "condition": None, "surrogate_key": None}])
    keys = ['{"id": 1}', '{"id":2}', '{"id":3}']  # (the first not as orjson writes it)
    afters = ['{"id":1,"s":"\\u00e9\\"x"}', '{"id":2,"s":null}', '{"id":3,"s":"z"}']
    ctl.staging.write("s1-0", ChunkMeta("public.a", ["3"], ["3"], 3, []), keys, afters, None, wait=True)

    def mark(name: str, pos: int) -> Record:
        kind = "snapshot-window-open" if name.endswith("-open") else "snapshot-window-close"
        value = {
            "op": "c",
            "after": {"id": name, "type": kind, "data": None},
            "source": {"schema": "x", "lsn": 9},
        }
        return Record("tm.public.sig", {"id": name}, value, collection="public.sig", pos=(pos,))

    change = Record(
        "tm.public.a",
        {"id": 1},
        {"op": "u", "after": {"id": 1}, "source": {}},
        collection="public.a",
        pos=(2,),
    )
    batch = Batch([mark("s1-0-open", 1), change, mark("s1-0-close", 3)], {"lsn": 3})
    ctl.process(batch)
    snap = [r for r in batch.records if r.value and r.value["op"] == "r"]
    # 1 changed in the window; a key is its staged JSON (a Fragment), as the encoders wrote it
    assert [orjson.dumps(r.key) for r in snap] == [b'{"id":2}', b'{"id":3}']
    if sinks == "delta":
        assert all(r.wire is None for r in snap)
        return
    got = serialized_batch(batch, *flags)
    for r, (k, v) in zip(batch.records, got, strict=True):
        assert k == to_json_bytes(r.key_schema, r.key, flags[0])
        assert joined(v) == to_json_bytes(r.value_schema, r.value, flags[1])
    assert all(r.wire is not None and r.wire[0] == flags for r in snap)
    other = (not flags[0], flags[1])  # bytes for other settings than built: serialized anew
    assert [joined(v) for _, v in serialized_batch(batch, *other)] == [
        to_json_bytes(r.value_schema, r.value, other[1]) for r in batch.records
    ]
