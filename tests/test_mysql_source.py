"""DDL parsing, schema history recovery (incl. ALTER while the connector was down), set-up errors
and the MySqlSource end to end against the private MariaDB."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from cfgutil import source as settings_of
from mycdc import drain as _drain
from mycdc import source_config as _cfg
from mycdc import started_source as _started

from connectors.api import TerminalError
from connectors.sources.mysql import setup
from connectors.sources.mysql.ddl import DdlParser, DdlTargets, UnparseableDdl, ddl_targets
from connectors.sources.mysql.history import DeltaSchemaHistory, HistoryRecord
from connectors.sources.mysql.model import Tables
from connectors.sources.mysql.source import MySqlSource


def test_ddl_alter_sequence() -> None:
    t = Tables()
    p = DdlParser(t)
    p.apply("CREATE DATABASE d CHARACTER SET latin1", None)
    p.apply("CREATE TABLE t (id INT, a VARCHAR(5), b INT, PRIMARY KEY (id))", "d")
    p.apply("ALTER TABLE t ADD COLUMN c TEXT FIRST, DROP COLUMN b, CHANGE a a2 VARCHAR(9) NOT NULL", "d")
    tb = t.get("d", "t")
    assert tb is not None
    assert [(c.name, c.position) for c in tb.columns] == [("c", 1), ("id", 2), ("a2", 3)]
    assert tb.column("a2").length == 9 and not tb.column("a2").optional and tb.column("c").charset == "latin1"
    p.apply("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (a2)", "d")
    assert t.get("d", "t").primary_key == ["a2"]
    p.apply("CREATE TABLE t2 LIKE t", "d")
    assert [c.name for c in t.get("d", "t2").columns] == ["c", "id", "a2"]
    p.apply("RENAME TABLE t2 TO t3", "d")
    assert t.get("d", "t2") is None and t.get("d", "t3") is not None
    # quoted names with spaces and doubled backquotes (a name `\S+` cut short before)
    p.apply("RENAME TABLE t3 TO `a ``b`` c`", "d")
    assert t.get("d", "t3") is None and t.get("d", "a `b` c") is not None
    p.apply("RENAME TABLE `d`.`a ``b`` c` TO `d`.`t 4`, `t 4` TO t3", "d")
    assert t.get("d", "a `b` c") is None and t.get("d", "t3") is not None
    assert ddl_targets("RENAME TABLE `a ``b`` c` TO `x y`", "d") == DdlTargets(
        [("d", "a `b` c"), ("d", "x y")], []
    )
    with pytest.raises(UnparseableDdl):
        p.apply("ALTER TABLE t FROBNICATE EVERYTHING", "d")
    assert p.apply("TRUNCATE t3", "d").truncated == [("d", "t3")]


def test_history_recover_upto(tmp_path: Path) -> None:
    h = DeltaSchemaHistory(tmp_path, "c1")
    t = Tables()
    p = DdlParser(t)
    r1 = p.apply("CREATE TABLE d.t (id INT PRIMARY KEY)", None)
    r2 = p.apply("ALTER TABLE d.t ADD COLUMN x INT", None)
    h.record(
        [HistoryRecord("mysql-bin.000001", 100, "", "d", "CREATE TABLE d.t (id INT PRIMARY KEY)", r1.changes)]
    )
    h.record([HistoryRecord("mysql-bin.000002", 50, "", "d", "ALTER TABLE d.t ADD COLUMN x INT", r2.changes)])
    assert [c.name for c in h.recover({"file": "mysql-bin.000001", "pos": 500}).get("d", "t").columns] == [
        "id"
    ]
    assert [c.name for c in h.recover({"file": "mysql-bin.000002", "pos": 60}).get("d", "t").columns] == [
        "id",
        "x",
    ]
    only = DeltaSchemaHistory(
        tmp_path / "o", "c2", table_filter=lambda d, tb: tb == "keep", store_only_captured_tables=True
    )
    assert only.record([HistoryRecord("f.1", 1, "", "d", "x", r1.changes)]) == 0


def test_setup_errors(mariadb: Any, mariadb_factory: Any) -> None:
    bad = setup.connection_settings(
        settings_of("mariadb", dict(mariadb.props(), **{"database.password": "wrong-password"}))
    )
    bad.user = "nobody"
    with pytest.raises(TerminalError, match="access denied"):
        setup.connect(bad)
    stmt = mariadb_factory(binlog_format="STATEMENT")
    with pytest.raises(TerminalError, match="binlog_format is STATEMENT"):
        setup.check_server(setup.connect(setup.connection_settings(settings_of("mariadb", stmt.props()))))
    conn = setup.connect(setup.connection_settings(settings_of("mariadb", mariadb.props())))
    with pytest.raises(TerminalError, match="purged"):
        setup.check_position(conn, {"file": "mysql-bin.000000", "pos": 4}, True)
    with pytest.raises(TerminalError, match="server_id"):
        setup.check_server(conn, int(mariadb.variable("server_id")))
    mariadb.execute("CREATE USER IF NOT EXISTS 'norepl'@'%' IDENTIFIED BY 'pw'")
    mariadb.execute("GRANT SELECT ON *.* TO 'norepl'@'%'")
    weak = setup.connection_settings(
        settings_of(
            "mariadb", dict(mariadb.props(), **{"database.user": "norepl", "database.password": "pw"})
        )
    )
    with pytest.raises(TerminalError, match="REPLICATION"):
        setup.check_server(setup.connect(weak))


def test_source_end_to_end_and_alter_while_down(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10), ts TIMESTAMP(3) NULL)")
    cfg, src = _started(mariadb, tmp_path, unique_name, db)
    mariadb.execute(f"INSERT INTO {db}.t VALUES (1, 'a', '2020-01-02 03:04:05.5'), (2, 'b', NULL)")
    mariadb.execute(f"UPDATE {db}.t SET v = 'c' WHERE id = 1")
    mariadb.execute(f"UPDATE {db}.t SET id = 3 WHERE id = 2")
    mariadb.execute(f"DELETE FROM {db}.t WHERE id = 1")
    recs = _drain(src)
    offset = src._last  # type: ignore[attr-defined]
    src.close()
    ops = [(r.value or {}).get("op") if r.value is not None else "tomb" for r in recs]
    assert ops == ["c", "c", "u", "d", "tomb", "c", "d", "tomb"]
    first = recs[0]
    assert first.topic == f"tm.{db}.t" and first.key == {"id": 1}
    assert first.value["after"] == {"id": 1, "v": "a", "ts": "2020-01-02T03:04:05.500Z"}
    s = first.value["source"]
    assert s["connector"] == "mariadb" and s["db"] == db and s["table"] == "t" and s["row"] == 0
    assert (
        s["gtid"]
        and s["file"].startswith("mysql-bin.")
        and s["server_id"] == 1
        and recs[1].value["source"]["row"] == 1
    )
    # The tombstone after a key change's delete carries the same __debezium.newkey header (as Debezium).
    assert dict(recs[4].headers) == dict(recs[3].headers) and dict(recs[3].headers)["__debezium.newkey"]
    # ALTER while the connector is down, then rows in the new layout
    mariadb.execute(f"INSERT INTO {db}.t VALUES (10, 'old', NULL)")
    mariadb.execute(f"ALTER TABLE {db}.t ADD COLUMN n INT NOT NULL DEFAULT 7 AFTER id")
    mariadb.execute(f"INSERT INTO {db}.t VALUES (11, 8, 'new', NULL)")
    src2 = MySqlSource(cfg, until_caught_up=True)
    src2.open(offset)
    recs2 = _drain(src2)
    src2.close()
    data = [r for r in recs2 if r.value is not None and "op" in r.value]
    assert data[0].value["after"] == {"id": 10, "v": "old", "ts": None}
    sc = [r for r in recs2 if r.topic == "tm"]
    assert len(sc) == 1 and sc[0].key == {"databaseName": db}
    change = sc[0].value["tableChanges"][0]
    assert change["type"] == "ALTER" and change["id"] == f'"{db}"."t"'
    assert [c["name"] for c in change["table"]["columns"]] == ["id", "n", "v", "ts"]
    assert data[-1].value["after"] == {"id": 11, "n": 8, "v": "new", "ts": None}
    schema = data[-1].value_schema.to_json()
    after_fields = {f["field"]: f for f in schema["fields"][1]["fields"]}
    assert after_fields["n"]["default"] == 7
    # restart from the very first offset: history recovery gives the pre-ALTER layout for old rows
    src3 = MySqlSource(cfg, until_caught_up=True)
    src3.open(offset)
    again = [r for r in _drain(src3) if r.value is not None and "op" in r.value]
    src3.close()
    assert [r.value["after"] for r in again] == [r.value["after"] for r in data]


def test_restart_mid_transaction(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.m (id INT PRIMARY KEY)")
    cfg = _cfg(
        mariadb,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db, "max.batch.size": 1},
    )
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    start = dict(src._start)
    with mariadb.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {db}.m VALUES (1), (2), (3)")
        cur.execute(f"INSERT INTO {db}.m VALUES (4)")
        conn.commit()
    all_recs = _drain(src)
    src.close()
    assert [r.key["id"] for r in all_recs] == [1, 2, 3, 4]
    for cut in range(1, 4):  # resume after the cut-th row
        src = MySqlSource(cfg, until_caught_up=True)
        src.open(all_recs[cut - 1].offset)
        rest = [r.key["id"] for r in _drain(src)]
        src.close()
        assert rest == [1, 2, 3, 4][cut:], (cut, all_recs[cut - 1].offset)
    assert start["event"] == 0


def test_resume_by_gtid_set_ignores_a_stale_position(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """With GTIDs on, a restart resumes from the offset's GTID set (MariaDB slave_connect_state),
    including the event/row skip counts inside a transaction; file/pos are only the fallback."""
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.g (id INT PRIMARY KEY)")
    cfg = _cfg(
        mariadb,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db, "max.batch.size": 1},
    )
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    mariadb.execute(f"INSERT INTO {db}.g VALUES (1)")
    with mariadb.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {db}.g VALUES (2), (3)")
        cur.execute(f"INSERT INTO {db}.g VALUES (4)")
        conn.commit()
    recs = _drain(src)
    src.close()
    assert [r.key["id"] for r in recs] == [1, 2, 3, 4]
    for cut in range(1, 4):
        off = dict(recs[cut - 1].offset)
        assert off["gtids"]
        off["pos"] = 4  # a stale position: replaying from it would repeat rows
        src = MySqlSource(cfg, until_caught_up=True)
        src.open(off)
        assert src._stream is not None and src._stream.gtid_set == off["gtids"]
        rest = [r.key["id"] for r in _drain(src)]
        src.close()
        assert rest == [1, 2, 3, 4][cut:], (cut, off)


def test_resume_by_file_pos_without_gtids(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """The file/pos fallback (offsets without a GTID set, e.g. MySQL with gtid_mode=OFF) resumes
    exactly too, with the event/row skip counts."""
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.f (id INT PRIMARY KEY)")
    cfg = _cfg(
        mariadb,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db, "max.batch.size": 1},
    )
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    with mariadb.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {db}.f VALUES (1), (2)")
        cur.execute(f"INSERT INTO {db}.f VALUES (3)")
        conn.commit()
    mariadb.execute(f"INSERT INTO {db}.f VALUES (4)")
    recs = _drain(src)
    src.close()
    assert [r.key["id"] for r in recs] == [1, 2, 3, 4]
    for cut in range(1, 4):
        off = dict(recs[cut - 1].offset, gtids="")
        src = MySqlSource(cfg, until_caught_up=True)
        src.open(off)
        assert src._stream is not None and src._stream.gtid_set is None
        rest = [r.key["id"] for r in _drain(src)]
        src.close()
        assert rest == [1, 2, 3, 4][cut:], (cut, off)


def test_transaction_ids_without_gtids() -> None:
    """Debezium's transaction id without GTIDs: `file=<file>,pos=<position of BEGIN>`."""
    from connectors.sources.mysql.events import Translator, TxEnd
    from connectors.sources.mysql.stream import Event

    tr = Translator(Tables(), {"file": "mysql-bin.000003", "pos": 100})
    items = list(tr.feed(Event("query", 1, 1, "mysql-bin.000003", 100, 180, query="BEGIN", thread=7)))
    items += list(tr.feed(Event("xid", 1, 1, "mysql-bin.000003", 180, 211)))
    ends = [i for i in items if isinstance(i, TxEnd)]
    assert [e.txn_id for e in ends] == ["file=mysql-bin.000003,pos=100"]
    assert ends[0].offset["pos"] == 211 and ends[0].offset["event"] == 0


def test_create_or_replace_is_ddl() -> None:
    """MariaDB's CREATE OR REPLACE TABLE/DATABASE change the model; OR REPLACE of views,
    routines and triggers are still no table DDL."""
    from connectors.sources.mysql.events import _NON_DDL

    for sql in (
        "CREATE OR REPLACE TABLE t (a INT)",
        "create or replace  temporary table t (a int)",
        "CREATE OR REPLACE DATABASE d",
        "CREATE OR REPLACE UNIQUE INDEX i ON t (a)",
    ):
        assert not _NON_DDL.match(sql), sql
    for sql in (
        "CREATE OR REPLACE VIEW v AS SELECT 1",
        "CREATE OR REPLACE DEFINER=`a`@`%` VIEW v AS SELECT 1",
        "CREATE OR REPLACE FUNCTION f() RETURNS INT RETURN 1",
        "CREATE OR REPLACE TRIGGER x BEFORE INSERT ON t FOR EACH ROW SET @a = 1",
        "CREATE OR REPLACE PROCEDURE p() SELECT 1",
    ):
        assert _NON_DDL.match(sql), sql
    t = Tables()
    p = DdlParser(t)
    p.apply("CREATE TABLE d.t (id INT PRIMARY KEY, a INT)", None)
    res = p.apply("CREATE OR REPLACE TABLE d.t (id BIGINT PRIMARY KEY, b VARCHAR(5), c INT)", None)
    assert res.kind == "create_table" and [c.type for c in res.changes] == ["CREATE"]
    assert [(c.name, c.type_name) for c in t.get("d", "t").columns] == [
        ("id", "BIGINT"),
        ("b", "VARCHAR"),
        ("c", "INT"),
    ]
    res = p.apply("CREATE OR REPLACE DATABASE d", None)
    assert [(c.type, c.table) for c in res.changes] == [("DROP", "t")] and t.get("d", "t") is None


def test_create_or_replace_table_streams_the_new_layout(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(f"CREATE TABLE {db}.r (id INT PRIMARY KEY, a VARCHAR(10))")
    cfg, src = _started(mariadb, tmp_path, unique_name, db)
    mariadb.execute(f"INSERT INTO {db}.r VALUES (1, 'old')")
    mariadb.execute(
        f"CREATE OR REPLACE TABLE {db}.r (id BIGINT PRIMARY KEY, n INT NOT NULL, a VARCHAR(10), d DATE)"
    )
    mariadb.execute(f"INSERT INTO {db}.r VALUES (2, 5, 'new', '2024-02-29')")
    recs = _drain(src)
    src.close()
    rows = [r.value["after"] for r in recs if r.topic == f"tm.{db}.r"]
    assert rows == [{"id": 1, "a": "old"}, {"id": 2, "n": 5, "a": "new", "d": 19782}]
    sc = [r.value for r in recs if r.topic == "tm"]
    assert len(sc) == 1 and sc[0]["ddl"].startswith("CREATE OR REPLACE TABLE")
    change = sc[0]["tableChanges"][0]
    assert change["type"] == "CREATE" and [c["name"] for c in change["table"]["columns"]] == [
        "id",
        "n",
        "a",
        "d",
    ]
    # The history has it too: a restart from the first offset decodes both layouts again.
    src2 = MySqlSource(cfg, until_caught_up=True)
    src2.open(recs[0].offset)
    again = [r.value["after"] for r in _drain(src2) if r.topic == f"tm.{db}.r"]
    src2.close()
    assert again == rows[1:]


def test_alter_forms_sqlglot_does_not_parse() -> None:
    """CONVERT TO CHARACTER SET, ADD COLUMN (a, b), MariaDB's IF [NOT] EXISTS / ONLINE / WAIT,
    table options and no-op maintenance actions update the model; anything that could change
    the row layout and is not understood is reported with the action's text."""
    t = Tables()
    p = DdlParser(t)
    p.apply("CREATE DATABASE d CHARACTER SET latin1", None)
    p.apply("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5), b TEXT, e ENUM('x'), n INT)", "d")

    def cols() -> list[tuple[str, str, str | None]]:
        return [(c.name, c.type_name, c.charset) for c in t.get("d", "t").columns]

    p.apply("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "d")
    assert cols() == [
        ("id", "INT", None),
        ("a", "VARCHAR", "utf8mb4"),
        ("b", "TEXT", "utf8mb4"),
        ("e", "ENUM", "utf8mb4"),
        ("n", "INT", None),
    ]
    assert t.get("d", "t").default_charset == "utf8mb4"
    p.apply("ALTER TABLE t ADD COLUMN (c1 INT NOT NULL, c2 VARCHAR(4) COMMENT 'x, y'), ADD (c3 BIGINT)", "d")
    assert cols()[-3:] == [("c1", "INT", None), ("c2", "VARCHAR", "utf8mb4"), ("c3", "BIGINT", None)]
    assert not t.get("d", "t").column("c1").optional
    p.apply("ALTER TABLE t DEFAULT CHARSET=latin1, ADD COLUMN c4 TEXT", "d")
    assert cols()[-1] == ("c4", "TEXT", "latin1") and cols()[1] == ("a", "VARCHAR", "utf8mb4")
    p.apply(
        "ALTER ONLINE TABLE t WAIT 5 ADD COLUMN IF NOT EXISTS n INT, DROP COLUMN IF EXISTS zz, "
        "MODIFY COLUMN IF EXISTS zz INT, CHANGE IF EXISTS c3 c3b INT UNSIGNED",
        "d",
    )
    assert [c[0] for c in cols()].count("n") == 1 and cols()[-2] == ("c3b", "INT UNSIGNED", None)
    before = cols()
    for noop in (
        "ALTER TABLE t ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
        "ALTER TABLE t FORCE",
        "ALTER TABLE t DISABLE KEYS",
        "ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4",
        "ALTER TABLE t REMOVE PARTITIONING",
        "ALTER TABLE t ADD CONSTRAINT ck CHECK (n > 0)",
        "ALTER TABLE t ADD INDEX IF NOT EXISTS i (a)",
        "ALTER TABLE t DROP INDEX i, DROP FOREIGN KEY fk",
        "ALTER TABLE t RENAME KEY i TO j",
        "ALTER TABLE t AUTO_INCREMENT=5, ALGORITHM=INPLACE, LOCK=NONE",
        "ALTER TABLE t ORDER BY n",
    ):
        assert p.apply(noop, "d").kind == "alter_table", noop
        assert cols() == before, noop
    p.apply("ALTER TABLE t COMMENT 'hello'", "d")
    assert t.get("d", "t").comment == "hello"
    for bad, action in (
        ("ALTER TABLE t ADD SYSTEM VERSIONING", "ADD SYSTEM VERSIONING"),
        ("ALTER TABLE t ADD COLUMN q INT, FROBNICATE x", "FROBNICATE x"),
    ):
        with pytest.raises(UnparseableDdl, match=f"ALTER TABLE action not understood: {action}"):
            p.apply(bad, "d")
    assert cols() == before  # a refused statement changes nothing


def test_unique_key_is_the_message_key_without_a_primary_key() -> None:
    """Debezium (MySqlAntlrDdlParser.parseUniqueIndexColumnNames): a table without a primary key
    takes its first UNIQUE key whose columns are all NOT NULL as the key; a column's own UNIQUE
    takes that column; a later PRIMARY KEY replaces it."""
    t = Tables()
    p = DdlParser(t)

    def key(table: str) -> list[str]:
        return t.get("d", table).primary_key

    p.apply(
        "CREATE TABLE u1 (a INT NOT NULL, b INT, c INT NOT NULL, UNIQUE KEY ub (b), KEY kc (c), "
        "UNIQUE KEY uac (a, c(4)))",
        "d",
    )
    assert key("u1") == ["a", "c"]
    p.apply("CREATE TABLE u2 (a INT NOT NULL, id INT NOT NULL, UNIQUE KEY ua (a), PRIMARY KEY (id))", "d")
    assert key("u2") == ["id"]
    p.apply("CREATE TABLE u3 (a INT UNIQUE, b INT NOT NULL, CONSTRAINT ub UNIQUE (b))", "d")
    assert key("u3") == ["a"]
    p.apply("CREATE TABLE u4 (a INT NULL, UNIQUE KEY ua (a))", "d")
    assert key("u4") == []
    p.apply("CREATE TABLE u5 (a INT NOT NULL, b INT NOT NULL)", "d")
    res = p.apply("CREATE UNIQUE INDEX ub ON u5 (b)", "d")
    assert key("u5") == ["b"] and [(c.type, c.table) for c in res.changes] == [("ALTER", "u5")]
    assert p.apply("CREATE UNIQUE INDEX ua ON u5 (a)", "d").kind == "ignored" and key("u5") == ["b"]
    p.apply("ALTER TABLE u4 MODIFY a INT NOT NULL, ADD COLUMN z INT", "d")
    p.apply("ALTER TABLE u4 ADD CONSTRAINT uz UNIQUE (z), ADD UNIQUE KEY IF NOT EXISTS ua2 (a)", "d")
    assert key("u4") == ["a"]
    p.apply("ALTER TABLE u4 ADD PRIMARY KEY (z)", "d")
    assert key("u4") == ["z"]
    p.apply("CREATE TABLE u6 (s SERIAL, v INT)", "d")
    assert key("u6") == ["s"]
    # SHOW CREATE TABLE form (snapshot)
    p.apply(
        "CREATE TABLE `u7` (\n  `code` varchar(8) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n"
        "  UNIQUE KEY `code` (`code`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        "d",
    )
    assert key("u7") == ["code"]


def test_unique_key_convert_and_column_list_end_to_end(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute(
        f"CREATE TABLE {db}.k (code VARCHAR(8) NOT NULL, note VARCHAR(20), UNIQUE KEY (code)) "
        f"DEFAULT CHARSET=latin1"
    )
    cfg, src = _started(mariadb, tmp_path, unique_name, db)
    mariadb.execute(f"INSERT INTO {db}.k VALUES ('a1', 'caf\u00e9')")
    mariadb.execute(f"ALTER TABLE {db}.k CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    mariadb.execute(f"ALTER TABLE {db}.k ADD COLUMN (n INT NOT NULL DEFAULT 3, m BIGINT)")
    mariadb.execute(f"INSERT INTO {db}.k VALUES ('b2', '\u4e2d\U0001f600', 4, 5)")
    recs = _drain(src)
    src.close()
    data = [r for r in recs if r.topic == f"tm.{db}.k"]
    assert [r.key for r in data] == [{"code": "a1"}, {"code": "b2"}]
    assert data[0].key_schema.to_json()["fields"] == [{"field": "code", "type": "string", "optional": False}]
    assert [r.value["after"] for r in data] == [
        {"code": "a1", "note": "caf\u00e9"},
        {"code": "b2", "note": "\u4e2d\U0001f600", "n": 4, "m": 5},
    ]
    changes = [r.value["tableChanges"][0]["table"] for r in recs if r.topic == "tm"]
    assert [c["defaultCharsetName"] for c in changes] == ["utf8mb4", "utf8mb4"]
    assert changes[-1]["primaryKeyColumnNames"] == ["code"]
    assert [c["name"] for c in changes[-1]["columns"]] == ["code", "note", "n", "m"]


def test_lost_history_names_the_recovery(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Offsets without a schema history: the hint names snapshot.mode=recovery and the offsets
    reset, with the config file named, and says what is not captured."""
    cfg, src = _started(mariadb, tmp_path, unique_name, mariadb_database)
    offset = dict(src._start)
    src.close()
    cfg = dataclasses.replace(cfg, origin=dataclasses.replace(cfg.origin, path=tmp_path / "my.properties"))
    src.history.reset()
    src2 = MySqlSource(cfg, until_caught_up=True)
    with pytest.raises(TerminalError) as err:
        src2.open(offset)
    src2.close()
    assert "schema history" in err.value.message
    assert f"tidemark offsets reset --config {cfg.origin.path} --yes" in (err.value.hint or "")
    assert "NOT captured" in (err.value.hint or "") and "start once with snapshot.mode=recovery" in str(
        err.value
    )
