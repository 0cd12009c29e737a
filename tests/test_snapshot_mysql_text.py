"""The column-wise MySQL/MariaDB snapshot read (connectors/sources/mysql/snapshot_read.py):
`TextResult` takes a result's rows off the socket in bulk and `SnapshotRows.encode_text` encodes
them column-wise; both are checked value by value against the row path (`fetchmany` of the same
SELECT through `SnapshotRows.encode`, i.e. PyMySQL's values through `TableSchema.row`), for every
fast path and its per-value exceptions, in every handling mode. The packet framing itself (long
rows, sequence numbers, error packets, an early stop) is checked on crafted bytes."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pymysql
import pytest

from connectors.snapshot.mysql import MySqlSnapshotter
from connectors.sources.mysql.snapshot_read import SnapshotRows, TextResult
from connectors.sources.mysql.source import MySqlSource

TABLE = """CREATE TABLE fast_types (
  id BIGINT PRIMARY KEY,
  ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, bu BIGINT UNSIGNED, iz INT(5) ZEROFILL,
  dbl DOUBLE, fl FLOAT,
  d102 DECIMAL(10,2), d300 DECIMAL(30,10), d50 DECIMAL(5,0),
  c CHAR(5), vc VARCHAR(300), tx TEXT, mt MEDIUMTEXT, lat VARCHAR(20) CHARACTER SET latin1,
  e ENUM('a','b','c d'), st SET('x','y','z'), j JSON,
  bn BINARY(4), vb VARBINARY(40), bl BLOB,
  dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
  ts0 TIMESTAMP NULL, ts3 TIMESTAMP(3) NULL, ts6 TIMESTAMP(6) NULL,
  da DATE, da_nn DATE NOT NULL DEFAULT '2000-01-01', dt_nn DATETIME NOT NULL DEFAULT '2000-01-01 00:00:00',
  yr YEAR, tm TIME(3), b1 BIT(1), b9 BIT(9), bo BOOLEAN
)"""

COLS = (
    "id, ti, si, mi, i, bu, iz, dbl, fl, d102, d300, d50, c, vc, tx, mt, lat, e, st, j, bn, vb, bl, "
    "dt0, dt3, dt6, ts0, ts3, ts6, da, da_nn, dt_nn, yr, tm, b1, b9, bo"
)
NASTY = 'q"uo\\te\nnew\tline\x01\x1f é 😀 ' + "x" * 20
ROWS: list[tuple[Any, ...]] = [
    (1, *([None] * 29), "2000-01-01", "2000-01-01 00:00:00", *([None] * 5)),
    (
        2, 1, 2, 3, 4, 5, 6, 1.5, 1.1, "12.34", "1.5", "7", "ab", "hello", "t", "m", "café", "a", "x",
        '{"a": 1}', b"ab", b"\x00\x01", b"blob", "2024-01-02 03:04:05", "2024-01-02 03:04:05.123",
        "2024-01-02 03:04:05.123456", "2024-01-02 03:04:05", "2024-01-02 03:04:05.100",
        "2024-01-02 03:04:05.000001", "2024-01-02", "2024-01-03", "2024-01-02 00:00:00", 2024,
        "12:34:56.789", 1, 257, 1,
    ),
    (
        3, -128, 65535, -8388608, -2147483648, 18446744073709551615, 42, -2.5e-300, -3.4e38,
        "-99999999.99", "12345678901234567890.0123456789", "-99999", "", NASTY * 10, "é" * 300,
        "z" * 70000, "ÿ", "c d", "x,z", '{"b": [1, "é\\n"], "c": null}', b"\x00\xff", bytes(range(40)),
        bytes(range(256)) * 3, "0000-00-00 00:00:00", "0099-01-01 00:00:00.5", "9999-12-31 23:59:59.999999",
        "0000-00-00 00:00:00", "2038-01-19 03:14:07.999", "1970-01-01 00:00:01.000001", "0000-00-00",
        "0000-00-00", "0000-00-00 00:00:00", 0, "-838:59:59", 0, 0, 0,
    ),
    (
        4, 0, 0, 0, 0, 9223372036854775808, 0, 0.0, 0.0, "0.00", "0.0000000001", "0", "abcde", "",
        "", "", "", "", "", "[]", b"", b"", b"", "1000-01-01 00:00:00", "1969-12-31 23:59:59.999",
        "1900-02-28 12:00:00.5", "1970-01-01 00:00:01", "1999-12-31 23:59:59.5", "2000-02-29 00:00:00",
        "1000-01-01", "9999-12-31", "1677-09-21 00:12:43", 1901, "00:00:00", 1, 511, 0,
    ),
    (  # invalid dates the server keeps under ALLOW_INVALID_DATES: those columns go per value
        5, 1, 1, 1, 1, 1, 1, 1e100, 1, "1", "-0.5", "1", "a", "b", "c", "d", "e", "b", "y,z", '"s"',
        b"b", b"v", b"l", "2024-02-30 10:00:00", "2024-02-29 10:00:00.1", "2262-04-11 23:47:16.854776",
        None, None, None, "2024-02-30", "2024-04-31", "2024-02-30 00:00:00", 2155, "838:59:59", 1, 3, 1,
    ),
]  # fmt: skip


def _filler(n: int) -> list[tuple[Any, ...]]:
    """Rows whose texts cross the inline/outline view size (12 bytes) and the NULL pattern."""
    out = []
    for k in range(n):
        s = "é" * (k % 17) if k % 5 else None
        out.append(
            (
                100 + k, k % 100, k, -k, k * 1000, k << 40, k, k / 7, k / 3, f"{k}.{k % 100:02d}",
                f"-{k}.5", str(k % 99999), "c" * (k % 6), s, s, s, s, "a", "y", f'{{"k": {k}}}',
                bytes([k % 256]), bytes(range(k % 30)), b"b" * (k % 300), f"2001-02-03 04:05:{k % 60:02d}",
                f"1999-01-01 00:00:00.{k % 1000:03d}", f"2020-05-06 07:08:09.{k:06d}",
                f"2001-02-03 04:05:{k % 60:02d}", None, f"2020-05-06 07:08:09.{k % 1000000:06d}",
                f"{1000 + k % 9000}-01-01", "2001-01-01", "2001-01-01 01:01:01", 2000, "01:02:03", k % 2,
                k % 512, k % 2,
            )
        )  # fmt: skip
    return out


VARIANTS: list[dict[str, Any]] = [
    {},
    {
        "decimal.handling.mode": "string",
        "bigint.unsigned.handling.mode": "precise",
        "time.precision.mode": "connect",
        "binary.handling.mode": "hex",
    },
    {"time.precision.mode": "isostring", "binary.handling.mode": "base64"},
    {"time.precision.mode": "nanoseconds", "enable.time.adjuster": False},
    {
        "decimal.handling.mode": "double",
        "binary.handling.mode": "base64-url-safe",
        "column.mask.with.4.chars": r".*\.fast_types\.vc",
        "column.truncate.to.3.chars": r".*\.fast_types\.tx",
    },
]

FAST_DEFAULT = set(COLS.replace(" ", "").split(",")) - {"iz", "fl", "yr", "tm", "b1", "b9"}


@pytest.fixture
def loaded(mariadb: Any, mariadb_database: str) -> str:
    conn = mariadb.connect(database=mariadb_database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
            cur.execute(TABLE)
            marks = ", ".join(["%s"] * len(ROWS[0]))
            cur.executemany(f"INSERT INTO fast_types ({COLS}) VALUES ({marks})", ROWS + _filler(600))
    finally:
        conn.close()
    return mariadb_database


def _both_ways(conn: Any, enc: SnapshotRows, sql: str, fetch: int) -> tuple[list[Any], list[Any], Any]:
    """(key+after per row by the row path, the same by the text path, the result's fields)."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql)
        rows = list(cur.fetchall())
    finally:
        cur.close()
    want_k, want_a = enc.encode(rows)
    cur = conn.cursor(pymysql.cursors.SSCursor)
    text = None
    try:
        cur.execute(sql)
        assert TextResult.supported(cur)
        text = TextResult(cur)
        batches = list(text.batches(fetch))
    finally:
        if text is not None:
            text.close()
        cur.close()
    assert all(len(b) <= fetch for b in batches) and sum(len(b) for b in batches) == len(rows)
    got_k: list[Any] = []
    got_a: list[Any] = []
    for b in batches:
        k, a = enc.encode_text(b)
        got_a += a.to_pylist()
        got_k += k.to_pylist() if k is not None else [None] * len(b)
    want = list(
        zip(want_k.to_pylist() if want_k is not None else [None] * len(rows), want_a.to_pylist(), strict=True)
    )
    return want, list(zip(got_k, got_a, strict=True)), text.fields


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_text_path_equals_row_path(
    mariadb: Any, loaded: str, tmp_path: Path, unique_name: Any, variant: int
) -> None:
    from mycdc import source_config

    cfg = source_config(
        mariadb,
        tmp_path / "wh",
        unique_name("snap"),
        unique_name.server_id(),
        **{"database.include.list": loaded},
        **VARIANTS[variant],
    )
    snap = MySqlSnapshotter(cfg)
    view = snap.export(readers=1)
    try:
        t = view.tables.get(loaded, "fast_types")
        assert t is not None
        source = MySqlSource(cfg)
        source.tables = view.tables
        ts = source._table_schema(loaded, "fast_types", t)
        enc = SnapshotRows(ts, t.columns, source.types)
        sql = f"SELECT {enc.select_list()} FROM `{loaded}`.fast_types ORDER BY id"
        with view.reader() as conn:
            for fetch in (10_000, 7):
                want, got, fields = _both_ways(conn, enc, sql, fetch)
                for w, g in zip(want, got, strict=True):
                    assert g == w
            fast = set(enc.fast_columns(fields))
            if variant == 0:
                assert fast == FAST_DEFAULT
            if variant == 1:
                assert fast == FAST_DEFAULT - {"bu"}  # BIGINT UNSIGNED precise: per value
            if variant == 4:
                assert fast == FAST_DEFAULT - {"vc", "tx"}  # a mask, a truncation: per value
            # the reader still works after an early stop (the rest of the result drained)
            cur = conn.cursor(pymysql.cursors.SSCursor)
            cur.execute(sql)
            text = TextResult(cur)
            first = next(text.batches(3))
            assert len(first) == 3
            text.close()
            cur.close()
            with conn.cursor() as c2:
                c2.execute(f"SELECT COUNT(*) FROM `{loaded}`.fast_types")
                assert c2.fetchone() == (605,)
    finally:
        view.close()
        snap.close()


# --------------------------------------------------------------------------- crafted packets


class _Trickle(io.RawIOBase):
    """A socket that delivers at most `chunk` bytes per read: packets split anywhere."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self._data, self._pos, self._chunk = data, 0, chunk

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._chunk, len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class _Conn:
    def __init__(self, data: bytes, chunk: int) -> None:
        self._rfile = io.BufferedReader(_Trickle(data, chunk), 5)
        self._next_seq_id = 2
        self._sock = self
        self._current_timeout = self._read_timeout = None
        self.encoding = "utf8"
        self.closed = False

    def settimeout(self, _t: Any) -> None:
        pass

    def _force_close(self) -> None:
        self.closed = True


class _Result:
    def __init__(self, conn: _Conn, ncols: int) -> None:
        self.connection = conn
        self.unbuffered_active = True
        self.fields = [type("F", (), {"type_code": 253, "charsetnr": 63, "flags": 0})()] * ncols
        self.converters = [(None, None)] * ncols
        self.has_next = None
        self.warning_count = 0

    def _check_packet_is_eof(self, pkt: Any) -> bool:
        self.warning_count = struct.unpack_from("<H", pkt._data, 1)[0]
        return True


class _Cur:
    def __init__(self, data: bytes, ncols: int, chunk: int = 7) -> None:
        self.connection = _Conn(data, chunk)
        self._result = _Result(self.connection, ncols)


def _lenc(v: bytes | None) -> bytes:
    if v is None:
        return b"\xfb"
    n = len(v)
    if n < 251:
        return bytes([n]) + v
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + v
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + v
    return b"\xfe" + n.to_bytes(8, "little") + v


def _packets(payloads: list[bytes], seq: int = 2) -> bytes:
    out = b""
    for p in payloads:
        while True:  # a payload of 2^24 - 1 bytes or more continues in the next packet
            part, p = p[:0xFFFFFF], p[0xFFFFFF:]
            out += len(part).to_bytes(3, "little") + bytes([seq & 0xFF]) + part
            seq += 1
            if len(part) < 0xFFFFFF:
                break
    return out


EOF = b"\xfe\x07\x00\x02\x00"  # 7 warnings, status 2


def test_packets_long_rows_and_end() -> None:
    """Rows of every length encoding, one of 16 MiB+ (several packets), 300 rows so the
    sequence number wraps; the end packet's state is handed back as PyMySQL's own read leaves it."""
    big = bytes(range(256)) * 70_000  # 17.9 MB
    rows = [(b"a", None), (b"x" * 300, b"y" * 70_000), (big, b"z")] + [
        (str(k).encode(), b"") for k in range(300)
    ]
    data = _packets([_lenc(a) + _lenc(b) for a, b in rows] + [EOF])
    cur = _Cur(data, 2, chunk=65536 + 3)
    text = TextResult(cur)
    batches = list(text.batches(50))
    got = [r for b in batches for r in zip(*(c.to_pylist() for c in b.columns), strict=True)]
    assert got == rows
    assert [len(b) for b in batches] == [2, 1, 50, 50, 50, 50, 50, 50]
    assert not text.active and not cur._result.unbuffered_active and cur._result.warning_count == 7
    assert (
        cur.connection._next_seq_id == (2 + len(rows) + 1 + 1) & 0xFF
    )  # the big row takes 2 packets; the end 1


def test_uncut_batches_cut_columns_on_first_use() -> None:
    """The batches come uncut (the incremental reader hands them to the staging writer so): its
    first columns (`head`) and its last row (`last_row`) equal those of the batch cut whole,
    before and after the cut, across every length encoding."""
    rows = [(b"a", None, b"k1"), (b"x" * 300, b"y" * 70_000, b"k2"), (None, b"", b"k3")]
    cur = _Cur(_packets([_lenc(a) + _lenc(b) + _lenc(c) for a, b, c in rows] + [EOF]), 3)
    (batch,) = list(TextResult(cur).batches(10))
    head, last = batch.head(2), batch.last_row()
    assert [c.to_pylist() for c in last] == [[v] for v in rows[-1]]
    assert len(head) == 3 and len(head.fields) == 2
    whole = [c.to_pylist() for c in batch.columns]
    assert whole == [list(col) for col in zip(*rows, strict=True)]
    assert [c.to_pylist() for c in head.columns] == whole[:2]
    assert [c.to_pylist() for c in batch.last_row()] == [[v] for v in rows[-1]]
    assert [c.to_pylist() for c in batch.head(1).columns] == whole[:1]


def test_packets_errors() -> None:
    # an error packet mid-result raises PyMySQL's error for it
    err = b"\xff" + struct.pack("<H", 1317) + b"#70100Query execution was interrupted"
    cur = _Cur(_packets([_lenc(b"1"), err]), 1)
    with pytest.raises(pymysql.err.OperationalError, match="interrupted"):
        list(TextResult(cur).batches(10))
    assert not cur._result.unbuffered_active
    # a wrong sequence number closes the connection
    cur = _Cur(_packets([_lenc(b"1"), _lenc(b"2")], seq=2)[:6] + _packets([_lenc(b"2"), EOF], seq=9), 1)
    with pytest.raises(pymysql.err.InternalError, match="sequence"):
        list(TextResult(cur).batches(10))
    assert cur.connection.closed
    # the connection ends mid-result
    cur = _Cur(_packets([_lenc(b"1"), _lenc(b"2")])[:-1], 1)
    with pytest.raises(pymysql.err.OperationalError, match="Lost connection"):
        list(TextResult(cur).batches(10))
    assert cur.connection.closed


def test_close_drains() -> None:
    cur = _Cur(_packets([_lenc(str(k).encode()) for k in range(100)] + [EOF]), 1)
    text = TextResult(cur)
    assert len(next(text.batches(10))) == 10
    text.close()
    assert not cur._result.unbuffered_active and cur.connection._rfile.read() == b""
    # a wrong sequence number while draining is still noticed
    cur = _Cur(_packets([_lenc(b"1")] * 20) + _packets([_lenc(b"2"), EOF], seq=40), 1)
    text = TextResult(cur)
    next(text.batches(5))
    with pytest.raises(pymysql.err.InternalError, match="sequence"):
        text.close()
