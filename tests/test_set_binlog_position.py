"""The set-binlog-position signal on the private MariaDB (connectors/signals/binlog_position.py).

* In process, with the test pulling the source's batches (so where the stream stands when the
  signal arrives is exact): a skip ahead leaves out the changes between the old and the new
  position; the real handler resolves the position on the server and returns once the new
  offset is stored.
* End to end (`tidemark run`, signals through the Delta channel via `tidemark signal`): a rewind
  by file/position and by MariaDB GTID re-emits the changes after it; positions the server does
  not have are refused with an error notification while streaming goes on; after a restart the
  stream continues from the stored new position and no signal is applied twice.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import cdc
import mycdc
import orjson
import pytest
from harness import wait_until

from connectors.api import Batch
from connectors.settings.config import load
from connectors.signals.binlog_position import LiveSource, SetBinlogPositionHandler
from connectors.signals.journal import PROCESSED
from connectors.signals.model import SetBinlogPosition, SignalRecord
from connectors.signals.notify import read_notifications
from connectors.signals.tables import JOURNAL_SCHEMA, StateTable
from connectors.sources.mysql.reposition import MARK
from connectors.sources.mysql.setup import connection_settings
from connectors.sources.mysql.source import MySqlSource

DDL = "CREATE TABLE orders (id int PRIMARY KEY, v varchar(20))"


def _position(server: Any) -> tuple[str, int, str]:
    file, pos = server.query("SHOW MASTER STATUS")[0][:2]
    return str(file), int(pos), str(server.scalar("SELECT @@gtid_binlog_pos"))


def _insert(server: Any, db: str, ids: range | list[int]) -> None:
    for i in ids:
        server.execute(f"INSERT INTO `{db}`.orders VALUES ({i}, 'v{i}')")


# --------------------------------------------------------------------------- in process: skip ahead
@pytest.mark.timeout(180)
def test_skip_ahead_leaves_out_the_changes_in_between(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(DDL, database=db)
    cfg = mycdc.source_config(
        mariadb, tmp_path, unique_name("conn"), unique_name.server_id(), **{"database.include.list": db}
    )
    src = MySqlSource(cfg)
    src.open(None)
    gen = src.batches()
    stored: list[dict[str, Any] | None] = [None]  # the test is the engine: what it "stored"
    seen: list[int] = []
    marks: list[Batch] = []

    def pull_until(last_id: int) -> None:
        while last_id not in seen:
            b = next(gen)
            seen.extend(r.value["after"]["id"] for r in b.records if r.value and r.value.get("after"))
            if b.extra.get("repositioned"):
                marks.append(b)
            stored[0] = b.offset

    try:
        _insert(mariadb, db, range(1, 4))
        pull_until(3)
        _insert(mariadb, db, range(10, 15))  # to be skipped
        file, pos, gtids = _position(mariadb)
        _insert(mariadb, db, range(20, 23))
        live = LiveSource()
        live.set(src)
        handler = SetBinlogPositionHandler(
            connection_settings(cfg.source), live, lambda: stored[0], timeout=60
        )
        signal = SignalRecord("skip-1", "set-binlog-position", None, "delta", "delta:skip-1")
        notes: list[str | None] = []
        t = threading.Thread(
            target=lambda: notes.append(handler.handle(SetBinlogPosition(file, pos), signal))
        )
        t.start()
        wait_until(
            lambda: src._ticket is not None or not t.is_alive(), 30, "the handler asked the source to move"
        )
        assert t.is_alive(), "the handler returned before the stream moved"
        pull_until(22)
        t.join(30)
        assert notes and notes[0] is not None and f"{file}:{pos}" in notes[0]
        assert not set(seen) & set(range(10, 15)), seen  # nothing between the old and the new position
        assert [i for i in seen if i >= 20] == [20, 21, 22]
        assert len(marks) == 1 and marks[0].offset["file"] == file and marks[0].offset["pos"] == pos
        assert marks[0].offset["gtids"] == gtids and marks[0].offset[MARK] == signal.key
        # every later offset carries the signal's key: a restart recognises the signal as applied
        assert stored[0] is not None and stored[0][MARK] == signal.key
        src.stop()
    finally:
        gen.close()
        src.close()

    # The same signal delivered again (a crash before the journal's "processed"): not re-applied.
    again = MySqlSource(cfg)
    again.open(stored[0])
    try:
        assert again.repositioned_by == signal.key
        live.set(again)
        note = handler.handle(SetBinlogPosition(file, pos), signal)
        assert note is not None and "not set again" in note
        assert again._ticket is None
    finally:
        again.close()


# --------------------------------------------------------------------------- end to end
def _processed(warehouse: Path, name: str) -> list[dict[str, Any]]:
    rows = StateTable(warehouse, "signal_log", JOURNAL_SCHEMA).rows(name)
    return [r for r in rows if r["status"] == PROCESSED]


def _ids(jsonl: Path) -> list[int]:
    return [
        cdc.payload(r)["after"]["id"]
        for r in cdc.read_jsonl(jsonl)
        if r.get("value") and r["topic"].endswith(".orders") and cdc.payload(r).get("op") == "c"
    ]


def _delta_ids(changelog: Path) -> list[int]:
    if not changelog.exists():
        return []
    return [
        orjson.loads(r["key"])["id"]
        for r in cdc.delta_rows(changelog, ["op", "key", "topic"])
        if r["op"] == "c" and r["topic"].endswith(".orders")
    ]


@pytest.mark.timeout(600)
def test_rewind_gtid_bad_positions_and_restart(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    mariadb.execute(DDL, database=db)
    jsonl = tmp_path / "out.jsonl"
    cfg = mycdc.write_config(
        tmp_path / "my.properties",
        mariadb,
        server_id=7411,
        db=db,
        sinks="jsonl,delta",
        jsonl=jsonl,
        signal__enabled__channels="delta",
        signal__poll__interval__ms="200",
        notification__enabled__channels="log,delta",
    )
    loaded = load(cfg)
    warehouse, name = Path(loaded.warehouse), loaded.name
    changelog = warehouse / "tm" / "changelog"
    log = tmp_path / "connector.log"

    def signal(*args: str) -> None:
        before = len(_processed(warehouse, name))
        cdc.run_cli("signal", "--config", str(cfg), "set-binlog-position", *args)
        wait_until(lambda: len(_processed(warehouse, name)) > before, 90, f"signal {args} processed")

    def errors() -> list[str]:
        return [
            n["additional_data"]["message"]
            for n in read_notifications(warehouse, name)
            if n["aggregate_type"] == "Signal"
        ]

    def landed(i: int, times: int = 1) -> None:
        wait_until(lambda: _delta_ids(changelog).count(i) >= times, 60, f"row {i} in the change log x{times}")

    proc = cdc.popen_cli("run", "--config", str(cfg), log=log)
    try:
        warm = iter(range(1000, 2000))
        wait_until(
            lambda: (_insert(mariadb, db, [next(warm)]), bool(_ids(jsonl)))[1], 90, "streaming", interval=0.5
        )
        file, pos, gtids = _position(mariadb)
        _insert(mariadb, db, range(100, 105))
        landed(104)

        # 1. rewind by file/position: 100..104 are emitted again
        signal("--file", file, "--position", str(pos))
        landed(104, 2)
        assert [_delta_ids(changelog).count(i) for i in range(100, 105)] == [2] * 5

        # 2. rewind by MariaDB GTID (the position after transaction `gtids`): once more
        signal("--gtid-set", gtids)
        landed(104, 3)
        assert [_delta_ids(changelog).count(i) for i in range(100, 105)] == [3] * 5

        # 3. positions the server does not have: refused, streaming goes on
        end_file, end_pos, end_gtids = _position(mariadb)
        domain, server_id, seq = (int(x) for x in end_gtids.split("-"))
        bad = [
            (("--file", "mysql-bin.999999", "--position", "4"), "is not on the server"),
            (("--file", end_file, "--position", str(end_pos + 100_000)), "beyond the end"),
            (("--file", file, "--position", str(pos + 1)), "not the start of an event"),
            (("--gtid-set", f"{domain}-{server_id}-{seq + 1000}"), "has no GTID"),
            (("--gtid-set", f"{domain + 7}-{server_id}-1"), "has no GTID"),
        ]
        for args, _ in bad:
            signal(*args)
        got = errors()
        assert len(got) == len(bad), got
        for (args, expected), message in zip(bad, got, strict=True):
            assert expected in message and "set-binlog-position" in message, (args, message)
        _insert(mariadb, db, [200])
        landed(200)
        assert [_delta_ids(changelog).count(i) for i in range(100, 105)] == [3] * 5  # nothing moved

        # 4. rewind, then a clean stop right after: the restart continues from the new position
        signal("--file", file, "--position", str(pos))
        landed(104, 4)
        proc.terminate()
        assert proc.wait(90) == 0
        text = log.read_text()
        assert text.count("set-binlog-position: the stream moves") == 3, text[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()

    before = {i: _delta_ids(changelog).count(i) for i in (*range(100, 105), 200)}
    proc = cdc.popen_cli("run", "--config", str(cfg), log=log)
    try:
        _insert(mariadb, db, [300])
        landed(300)
        after = {i: _delta_ids(changelog).count(i) for i in (*range(100, 105), 200)}
        assert after == before  # neither the old position nor the signal again
        assert len(_processed(warehouse, name)) == 8  # 3 applied + 5 refused, each once
        proc.terminate()
        assert proc.wait(90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert log.read_text().count("set-binlog-position: the stream moves") == 3


def test_refused_for_postgres() -> None:
    from connectors.signals.model import SignalError, parse

    rec = SignalRecord("p-1", "set-binlog-position", '{"gtid_set": "0-1-5"}', "delta", "delta:p-1")
    with pytest.raises(SignalError, match="set-binlog-position is a MySQL/MariaDB signal"):
        parse(rec, "postgres")


@pytest.mark.timeout(180)
def test_purged_positions_refused(mariadb_factory: Any, tmp_path: Path, unique_name: Any) -> None:
    """A binlog file or GTIDs the server purged: refused, naming what the server still has."""
    from connectors.signals.binlog_position import resolve
    from connectors.signals.model import SignalError

    server = mariadb_factory()
    server.execute("CREATE DATABASE p")
    server.execute(DDL, database="p")
    _insert(server, "p", [1])
    old_file, old_pos, old_gtids = _position(server)  # rows 2 and 3 after it: purged below
    _insert(server, "p", range(2, 4))
    server.execute("FLUSH BINARY LOGS")
    _insert(server, "p", range(4, 6))
    new_file = str(server.query("SHOW MASTER STATUS")[0][0])

    def purged() -> bool:
        # (MariaDB keeps a file until its binlog checkpoint is written: purge until it is gone)
        server.execute(f"PURGE BINARY LOGS TO '{new_file}'")
        return old_file not in {str(r[0]) for r in server.query("SHOW BINARY LOGS")}

    wait_until(purged, 30, "the first binlog file purged", interval=0.2)
    cfg = mycdc.source_config(server, tmp_path, unique_name("conn"), unique_name.server_id())
    settings = connection_settings(cfg.source)
    with pytest.raises(SignalError, match=f"binlog file {old_file} is not on the server"):
        resolve(settings, SetBinlogPosition(old_file, old_pos))
    with pytest.raises(SignalError, match="the server cannot stream from"):
        resolve(settings, SetBinlogPosition(gtid_set=old_gtids))
    # what the server still has is accepted: the start of the new file, and the newest GTID
    assert resolve(settings, SetBinlogPosition(new_file, 0))["pos"] == 4
    end = resolve(settings, SetBinlogPosition(gtid_set=str(server.scalar("SELECT @@gtid_binlog_pos"))))
    assert (end["file"], end["pos"]) == _position(server)[:2]
