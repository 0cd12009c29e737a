"""Position value types (connectors/api.py): GtidSet in MariaDB and MySQL forms, BinlogPosition,
Lsn — parsing, text round trips, ordering/containment — and the MySQL COM_BINLOG_DUMP_GTID
encoding of a GTID set. No server needed."""

from __future__ import annotations

import struct

import pytest
from pymysqlreplication.gtid import GtidSet as ReplGtidSet

from connectors.api import BinlogPosition, GtidSet, Lsn
from connectors.sources.mysql.wire import encode_gtid_set

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "8f0b8f3c-0b2a-11ee-8c99-0242ac120002"


# --------------------------------------------------------------------------- GtidSet, MariaDB
def test_mariadb_parse_and_round_trip() -> None:
    g = GtidSet.parse(" 1-2-5 , 0-1-100\n")
    assert g.mariadb == ((0, 1, 100), (1, 2, 5)) and not g.mysql
    assert str(g) == "0-1-100,1-2-5"  # sorted by domain
    assert GtidSet.parse(str(g)) == g
    assert str(GtidSet.parse("")) == "" and GtidSet.parse("") == GtidSet()


def test_mariadb_state_form_keeps_the_highest_sequence_per_domain() -> None:
    # @@gtid_binlog_state lists one GTID per (domain, server): the position is the newest per domain.
    g = GtidSet.parse("0-1-100,0-2-50,1-3-7")
    assert str(g) == "0-1-100,1-3-7"
    assert str(GtidSet.parse("0-2-50,0-1-100")) == "0-1-100"


def test_mariadb_add_and_contains() -> None:
    g = GtidSet.parse("0-1-100,1-2-5")
    g2 = g.add("0-1-101")
    assert str(g2) == "0-1-101,1-2-5" and str(g) == "0-1-100,1-2-5"  # immutable
    assert str(GtidSet().add("2-9-1")) == "2-9-1"
    assert str(g.add("3-1-4")) == "0-1-100,1-2-5,3-1-4"
    assert g2.contains(g) and not g.contains(g2)
    assert g.contains(GtidSet.parse("0-1-99")) and g.contains(GtidSet())
    assert not g.contains(GtidSet.parse("2-1-1"))  # a domain it has not seen
    assert g.contains(g)


# --------------------------------------------------------------------------- GtidSet, MySQL
def test_mysql_parse_and_round_trip() -> None:
    text = f"{U2}:1-3,\n{U1.upper()}:7-9:1-5:6"
    g = GtidSet.parse(text)
    assert g.mysql == ((U1, ((1, 9),)), (U2, ((1, 3),)))  # lower case, sorted, merged (1-5, 6, 7-9)
    assert str(g) == f"{U1}:1-9,{U2}:1-3"
    assert GtidSet.parse(str(g)) == g
    assert str(GtidSet.parse(f"{U1}:1-5:7-9")) == f"{U1}:1-5:7-9"
    assert str(GtidSet.parse(f"{U1}:4")) == f"{U1}:4"
    assert str(GtidSet.parse(f"{U1}:3-7:1-4")) == f"{U1}:1-7"  # overlapping intervals
    for bad in (f"{U1}", "nonsense:1-5", f"{U1}:a-5", "0-1", f"{U1}:1-5,0-1-2x"):
        with pytest.raises(ValueError):
            GtidSet.parse(bad)


def test_mysql_add_and_contains() -> None:
    g = GtidSet.parse(f"{U1}:1-5:7-9")
    assert str(g.add(f"{U1}:6")) == f"{U1}:1-9"  # fills the gap
    assert str(g.add(f"{U1.upper()}:11")) == f"{U1}:1-5:7-9:11"
    assert str(g.add(f"{U2}:1")) == f"{U1}:1-5:7-9,{U2}:1"
    assert g.contains(GtidSet.parse(f"{U1}:2-4:8"))
    assert not g.contains(GtidSet.parse(f"{U1}:5-7"))  # 6 is missing
    assert not g.contains(GtidSet.parse(f"{U2}:1"))
    assert g.add(f"{U1}:6").contains(g) and not g.contains(g.add(f"{U1}:6"))
    assert g.contains(GtidSet()) and not GtidSet().contains(g)
    # A MySQL set and a MariaDB set never contain each other (different servers).
    assert not g.contains(GtidSet.parse("0-1-1")) and not GtidSet.parse("0-1-1").contains(g)


def test_mysql_dump_gtid_encoding() -> None:
    """COM_BINLOG_DUMP_GTID data: u64 number of UUIDs; per UUID 16 bytes, u64 number of
    intervals, then (first, last + 1) u64 pairs — and the same bytes mysql-replication sends."""
    g = GtidSet.parse(f"{U1}:1-5:7-9,{U2}:3")
    enc = encode_gtid_set(g)
    expect = (
        struct.pack("<Q", 2)
        + bytes.fromhex(U1.replace("-", ""))
        + struct.pack("<QQQQQ", 2, 1, 6, 7, 10)
        + bytes.fromhex(U2.replace("-", ""))
        + struct.pack("<QQQ", 1, 3, 4)
    )
    assert enc == expect
    repl = ReplGtidSet(str(g))
    assert enc == repl.encoded() and len(enc) == repl.encoded_length
    assert encode_gtid_set(GtidSet()) == struct.pack("<Q", 0)


# --------------------------------------------------------------------------- BinlogPosition
def test_binlog_position_order_and_text() -> None:
    p = BinlogPosition.parse("mysql-bin.000003:154")
    assert (p.file, p.pos) == ("mysql-bin.000003", 154) and str(p) == "mysql-bin.000003:154"
    assert BinlogPosition.parse(str(p)) == p
    ordered = [
        "mysql-bin.000002:900",
        "mysql-bin.000003:4",
        "mysql-bin.000003:154",
        "mysql-bin.000010:4",
        "mysql-bin.999999:4",
        "mysql-bin.1000000:4",
    ]
    positions = [BinlogPosition.parse(t) for t in ordered]
    assert sorted(reversed(positions)) == positions
    assert positions[0] < positions[1] <= positions[2] and positions[-1] > positions[-2]
    assert BinlogPosition.parse("/var/log/my:sql/bin.000001:4").file == "/var/log/my:sql/bin.000001"
    for bad in ("mysql-bin.000003", "mysql-bin.000003:", ":4", "mysql-bin.000003:x"):
        with pytest.raises(ValueError):
            BinlogPosition.parse(bad)


# --------------------------------------------------------------------------- Lsn
def test_lsn_order_and_text() -> None:
    a = Lsn.parse("16/B374D848")
    assert int(a) == (0x16 << 32) | 0xB374D848 and str(a) == "16/B374D848"
    assert Lsn.parse("16/b374d848") == a and Lsn.parse(str(a)) == a
    assert Lsn.parse(int(a)) == a and Lsn.parse(str(int(a))) == a
    assert str(Lsn(0)) == "0/0" and str(Lsn((1 << 64) - 1)) == "FFFFFFFF/FFFFFFFF"
    lsns = [Lsn.parse(t) for t in ("0/0", "0/FFFFFFFF", "1/0", "16/B374D848", "16/B374D849", "FF/0")]
    assert sorted(reversed(lsns)) == lsns
    assert lsns[1] < lsns[2] and lsns[3] <= lsns[3] and lsns[-1] > lsns[0]
    for bad in ("16/", "/1", "G/1", "1/2/3", "123456789/0"):
        with pytest.raises(ValueError):
            Lsn.parse(bad)
