"""Snapshot reads of MySQL/MariaDB: the text-protocol rows of a SELECT → the key/after JSON texts
streaming emits, built column-wise.

Reading (`TextResult`): the SELECT runs on a PyMySQL connection inside the view's consistent
snapshot transaction (no other client can join it), with an unbuffered cursor; its rows are then
taken off that connection's socket in bulk instead of packet by packet through PyMySQL's
per-value parser: one short Python loop per row finds the row packets, and numpy cuts every
column out of the received bytes at once into an Arrow `binary_view` array over those bytes
(`TextBatch`, one array per selected column, SQL NULL as null; cut on first use, so on the
thread that encodes the batch). The connection is left exactly
as PyMySQL's own read would leave it (sequence number, end-of-result state, a drained result on
an early stop), so the view's reader is reused for the next chunk.

Values (`SnapshotRows.encode_text`) are exactly the streaming ones: every column is either
encoded column-wise from its text with Arrow compute / numpy / polars (the common types, see
below), or each value goes the way the old row path took it — PyMySQL's own conversion of that
column's text (`decode` + `conn.decoders`, taken from the result's field descriptors), `adapter`
below, then the streaming converter (`ColumnDef.convert`) — and the column-wise encoders send
every value they do not reproduce exactly (zero dates, years before 1000, decimals of more than
18 digits, JSON '') the same per-value way — and a batch's whole DATE/DATETIME column when Arrow
refuses one of its dates (one the server kept under ALLOW_INVALID_DATES, e.g. 2024-02-30). What PyMySQL hands over differs from what the binlog
decoder passes to the converters in one respect only, adapted per column (`adapter`):

- a zero or invalid DATE / DATETIME / TIMESTAMP (`0000-00-00`) comes as the server's text, where
  the binlog decoder passes `types.ZERO`;
- YEAR `0000` comes as 0 and stays 0: the converter then gives 2000, as Debezium's snapshot does
  (its JDBC read sees year 0, which the converter's two-digit-year rule makes 2000 —
  tests/test_snapshot_conformance_mysql.py), while its streaming gives 1900 (the binlog stores
  YEAR as year - 1900 and the decoder adds 1900). Snapshot and stream differ here as Debezium's do.

Everything else already has the binlog decoder's Python type when the session uses
`time_zone='+00:00'` and `utf8mb4` results (see `SESSION_STATEMENTS`): integers (unsigned too) as
int, BIT as big-endian bytes, FLOAT/DOUBLE as float (the server prints the shortest text that
reads back), DECIMAL as `decimal.Decimal`, character types as str (the server converts from the
column charset), binary types and spatial values (SRID + WKB) as bytes, ENUM/SET/JSON/UUID/INET as
their text (the converters accept text for those), YEAR as int, DATE/TIME/DATETIME/TIMESTAMP as
date/timedelta/naive datetime (TIMESTAMP in UTC).

Column-wise (when the column's converter is the type mapping's own, i.e. no mask / truncate /
hash mapper, and the column is not ZEROFILL): TINYINT..BIGINT and BOOLEAN (= TINYINT(1); BIGINT
UNSIGNED in `long` mode), DOUBLE, DECIMAL in every decimal.handling.mode (precise: up to 18
digits), CHAR/VARCHAR/TEXT, ENUM, SET, JSON, BINARY / VARBINARY / BLOB in every
binary.handling.mode, DATE, DATETIME and TIMESTAMP in every time.precision.mode (years
1000..9999). Per value: BIT, YEAR, TIME, FLOAT, BIGINT UNSIGNED `precise`, spatial types,
UUID/INET4/INET6, VECTOR, columns of a non-UTF-8 result charset, and any column with a column
mapper.
`tests/test_snapshot_mysql.py` checks every type of the streaming conformance workload against
the streamed value, and `tests/test_snapshot_mysql_text.py` the fast paths value by value
against the row path (`encode`, PyMySQL's rows through `TableSchema.row`).
"""

from __future__ import annotations

import codecs
import errno
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pymysql import err as mysql_err
from pymysql.connections import MysqlPacket
from pymysql.constants import CR, FLAG
from pymysql.constants import FIELD_TYPE as FT

from connectors.format.tableschema import TableSchema, column_null
from connectors.sources.mysql import types as mysql_types
from connectors.sources.mysql.model import Column
from connectors.sources.mysql.quoting import quote_ident
from connectors.sources.mysql.types import ZERO, TypeOptions, UnknownColumnType, column_def

# The column-wise JSON building blocks the PostgreSQL snapshot read already checks value by value
# against streaming (orjson's string escapes, base64 / hex, Connect decimals, ISO timestamps).
from connectors.sources.postgres.snapshot_read import (
    _binary_enc,
    _decimal_double_enc,
    _decimal_fixed_enc,
    _decimal_string_enc,
    _doubles_json,
    _iso_timestamps,
    _object,
    _patch,
    _quote,
    _same_converter,
)

__all__ = ["SESSION_STATEMENTS", "SnapshotRows", "TextBatch", "TextResult", "adapter"]

# The session the converters expect (TIMESTAMP in UTC, as the binlog holds it); net_write_timeout
# because an unbuffered read waits on its consumer (a slow sink) while the server writes.
SESSION_STATEMENTS = (
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION net_write_timeout = 3600",
    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
)

_ZERO_TEXT_TYPES = frozenset({"DATE", "DATETIME", "TIMESTAMP"})


def _zero_if_text(v: Any) -> Any:
    # PyMySQL returns the server's text for a date it cannot represent (0000-00-00, ...)
    return ZERO if isinstance(v, str) else v


def adapter(col: Column) -> Callable[[Any], Any] | None:
    """What turns PyMySQL's value of `col` into the binlog decoder's (None: already the same)."""
    if col.base_type in _ZERO_TEXT_TYPES:
        return _zero_if_text
    return None


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class Field:
    """What the encoders need of one result column: its protocol type, charset and flags, and
    how PyMySQL itself would turn its text into a value (`encoding`, then `converter`)."""

    type_code: int
    charsetnr: int
    flags: int
    encoding: str | None
    converter: Callable[[Any], Any] | None


class TextBatch:
    """Rows of a text-protocol result, column-wise: per selected column the values' text as a
    `binary_view` (or, for a buffer past 2 GiB, `large_binary`) array; null is SQL NULL.

    A batch read off the socket (`unsplit`) keeps the rows' bytes and cuts its columns out of them
    on first use of `columns`: the incremental snapshot's chunk reader hands its batches to the
    staging writer uncut, so the cutting runs on the writer's thread, not on the reader's, which
    waits on the server in between (py-spy, MariaDB: the cutting was 13 % of the reader's time and
    the reader the busiest stage)."""

    __slots__ = ("_columns", "_raw", "fields", "num_rows")

    def __init__(self, columns: list[pa.Array], fields: tuple[Field, ...], num_rows: int) -> None:
        self._columns: list[pa.Array] | None = columns
        self._raw: tuple[np.ndarray, np.ndarray] | None = None
        self.fields = fields
        self.num_rows = num_rows

    @classmethod
    def unsplit(cls, b: np.ndarray, rows: np.ndarray, fields: tuple[Field, ...]) -> TextBatch:
        """A batch of the row payloads starting at `rows` in `b` (16 bytes to spare at its end)."""
        batch = cls([], fields, len(rows))
        batch._columns, batch._raw = None, (b, rows)
        return batch

    @property
    def columns(self) -> list[pa.Array]:
        if self._columns is None:
            assert self._raw is not None
            b, rows = self._raw
            self._columns, self._raw = _split_columns(b, rows, len(self.fields)), None
        return self._columns

    def head(self, width: int) -> TextBatch:
        """The batch of its first `width` columns (uncut while this one is)."""
        if self._raw is None:
            return TextBatch(self.columns[:width], self.fields[:width], self.num_rows)
        return TextBatch.unsplit(*self._raw, self.fields[:width])

    def last_row(self) -> list[pa.Array]:
        """The last row's values, a one-value array per column (cuts only that row)."""
        if self._raw is None:
            return [c.slice(self.num_rows - 1) for c in self.columns]
        b, rows = self._raw
        return _split_columns(b, rows[-1:], len(self.fields))

    def __len__(self) -> int:
        return self.num_rows


_READ_SIZE = 1 << 20
_LONG_PACKET = 0xFFFFFF  # a payload this long continues in the next packet (rows of 16 MiB+)
_NEED, _END, _ERROR, _LONG = range(4)
_HEADER = struct.Struct("<I")  # a packet header: 3 bytes of length, 1 of sequence number


class TextResult:
    """The rows of an executed unbuffered PyMySQL cursor (`SSCursor`), read off its connection's
    socket in bulk: `batches(n)` yields `TextBatch`es of at most n rows. `close()` reads what is
    left of the result (as `SSCursor.close` would: the server sends it all anyway) so the
    connection can run its next statement; call it before the cursor's own `close`.

    It takes over from PyMySQL's `MySQLResult` after the column descriptors (PyMySQL read
    those) and hands back the state PyMySQL's own end-of-result leaves (`unbuffered_active`
    False, warning count, sequence number)."""

    def __init__(self, cur: Any) -> None:
        res: Any = getattr(cur, "_result", None)
        self._res: Any = res
        self._conn: Any = getattr(res, "connection", None)
        self.active = bool(res is not None and res.unbuffered_active and self._conn is not None)
        self.fields: tuple[Field, ...] = ()
        if self.active:
            self.fields = tuple(
                Field(f.type_code, f.charsetnr, f.flags, enc, conv)
                for f, (enc, conv) in zip(res.fields, res.converters, strict=True)
            )
        self._seq = int(getattr(self._conn, "_next_seq_id", 0))  # the next packet's sequence number
        self._acc = bytearray()
        self._p = 0  # end of the row packets found in _acc so far
        self._pend = np.zeros(0, np.int64)  # where they start
        self._discard = False

    @staticmethod
    def supported(cur: Any) -> bool:
        """Whether this PyMySQL exposes what the bulk read relies on (else read rows with fetchmany)."""
        conn, res = getattr(cur, "connection", None), getattr(cur, "_result", None)
        need_conn = ("_rfile", "_next_seq_id", "_sock", "_force_close", "_current_timeout", "_read_timeout")
        need_res = ("unbuffered_active", "fields", "converters", "_check_packet_is_eof")
        return all(hasattr(conn, a) for a in need_conn) and all(hasattr(res, a) for a in need_res)

    def batches(self, rows: int) -> Iterator[TextBatch]:
        rows = max(1, rows)
        while self.active:
            status = self._walk()
            pending = len(self._pend)
            if pending >= rows or (pending and (status != _NEED or self._discard)):
                batch = self._cut(rows)  # draining: keeps no more than one read's rows
                if batch is not None:
                    yield batch
            elif status == _NEED:
                self._fill()
            elif status == _END:
                self._end()
            elif status == _ERROR:
                self._error()
            else:
                batch = self._long_row()
                if batch is not None:
                    yield batch

    def close(self) -> None:
        """Read the rest of the result, discarding it."""
        self._discard = True
        for _ in self.batches(1 << 30):
            pass

    # -- the socket
    def _fill(self) -> None:
        conn = self._conn
        if conn._current_timeout != conn._read_timeout:  # as PyMySQL's _read_packet does
            conn._sock.settimeout(conn._read_timeout)
            conn._current_timeout = conn._read_timeout
        while True:
            try:
                data = conn._rfile.read1(_READ_SIZE)
                break
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                self._lost(f"Lost connection to MySQL server during query ({e})")
            except BaseException:
                self.active = False
                conn._force_close()
                raise
        if not data:
            self._lost("Lost connection to MySQL server during query")
        self._acc += data

    def _lost(self, message: str) -> None:
        self.active = False
        self._res.unbuffered_active = False
        self._conn._force_close()
        raise mysql_err.OperationalError(CR.CR_SERVER_LOST, message)

    def _bad_sequence(self, got: int) -> None:
        self.active = False
        self._res.unbuffered_active = False
        self._conn._force_close()
        raise mysql_err.InternalError(f"Packet sequence number wrong - got {got} expected {self._seq}")

    # -- packets
    def _walk(self) -> int:
        """Find the whole packets received from `_p` on, add the row packets among them to
        `_pend`, and say what stops the walk: the end of the bytes received (`_NEED`) or, at
        `_p`, a packet that is no ordinary row (the end, an error, a 16 MiB+ row)."""
        acc, p = self._acc, self._p
        end = len(acc)
        found: list[int] = []
        append, header, last = found.append, _HEADER.unpack_from, end - 4
        while p <= last:  # the one per-row Python loop: packet lengths only
            q = p + 4 + (header(acc, p)[0] & 0xFFFFFF)
            if q > end:
                break
            append(p)
            p = q
        status = _NEED
        if found:
            at = np.array(found, np.int64)
            b = np.frombuffer(acc, np.uint8, count=end)
            n = b[at].astype(np.int64) | b[at + 1].astype(np.int64) << 8 | b[at + 2].astype(np.int64) << 16
            first = b[np.minimum(at + 4, end - 1)]
            del b  # (a bytearray cannot be resized while numpy looks at it)
            # a row's first byte is a length (< 0xFB), NULL (0xFB) or a longer length's marker:
            # 0xFE starts a row only with an 8-byte length, so a short 0xFE packet is the end
            odd = (n == _LONG_PACKET) | (n == 0) | ((first == 0xFF) | ((first == 0xFE) & (n < 9)))
            if odd.any():
                k = int(np.argmax(odd))
                status = _LONG if n[k] == _LONG_PACKET else _END if first[k] == 0xFE and n[k] else _ERROR
                at, p = at[:k], found[k]
            self._pend = np.concatenate([self._pend, at]) if len(self._pend) else at
        self._p = p
        return status

    def _cut(self, rows: int) -> TextBatch | None:
        """The first `rows` rows found as one batch; their bytes leave the buffer."""
        pend = self._pend
        take = pend[:rows]
        cut_at = int(pend[rows]) if len(pend) > rows else self._p
        acc = self._acc
        view = np.frombuffer(acc, np.uint8, count=cut_at)
        seqs = (self._seq + np.arange(len(take))) & 0xFF
        got = view[take + 3]
        if not np.array_equal(got, seqs):
            bad = int(np.argmax(got != seqs))
            self._seq, got_bad = int(seqs[bad]), int(got[bad])
            del view
            self._bad_sequence(got_bad)
        self._seq = (self._seq + len(take)) & 0xFF
        b = None
        if not self._discard:
            # a copy, 16 bytes longer: a value's first 12 bytes can always be read (`_views`)
            b = np.zeros(cut_at + 16, np.uint8)
            b[:cut_at] = view
        del view
        del acc[:cut_at]
        self._pend = pend[rows:] - cut_at
        self._p -= cut_at
        if b is None:
            return None
        return TextBatch.unsplit(b, take + 4, self.fields)

    def _packet(self) -> tuple[bytes, bool]:
        """The packet at the buffer's start (waiting for all of it): (payload, continued?)."""
        acc = self._acc
        while len(acc) < 4:
            self._fill()
        n = acc[0] | acc[1] << 8 | acc[2] << 16
        while len(acc) < 4 + n:
            self._fill()
        if acc[3] != self._seq:
            self._bad_sequence(acc[3])
        self._seq = (self._seq + 1) & 0xFF
        payload = bytes(acc[4 : 4 + n])
        del acc[: 4 + n]
        return payload, n == _LONG_PACKET

    def _long_row(self) -> TextBatch | None:
        parts, more = [], True
        while more:
            payload, more = self._packet()
            parts.append(payload)
        if self._discard:
            return None
        payload = b"".join(parts)
        b = np.zeros(len(payload) + 16, np.uint8)
        b[: len(payload)] = np.frombuffer(payload, np.uint8)
        return TextBatch(_split_columns(b, np.array([0]), len(self.fields)), self.fields, 1)

    def _finish(self) -> MysqlPacket:
        payload, _ = self._packet()
        self.active = False
        self._conn._next_seq_id = self._seq
        res = self._res
        res.unbuffered_active = False
        res.rows = None
        return MysqlPacket(payload, self._conn.encoding)

    def _end(self) -> None:
        pkt = self._finish()
        self._res._check_packet_is_eof(pkt)
        self._res.connection = None
        if self._acc:  # one SELECT: nothing follows its result
            self._conn._force_close()
            raise mysql_err.InternalError("unexpected data after the end of a result set")

    def _error(self) -> None:
        pkt = self._finish()
        if not pkt.is_error_packet():
            self._conn._force_close()
            raise mysql_err.InternalError("malformed row packet (empty)")
        pkt.raise_for_error()


def _split_columns(b: np.ndarray, off: np.ndarray, ncols: int) -> list[pa.Array]:
    """Cut `ncols` length-encoded strings out of every row (`off`: where each row's payload
    starts in `b`), column by column over all rows at once."""
    data = pa.py_buffer(b)
    out = []
    for _ in range(ncols):
        lead = b[off].astype(np.int64)
        length = lead
        start = off + 1
        null = lead == 0xFB
        if (lead >= 0xFB).any():
            length = np.where(lead >= 0xFB, 0, lead)
            for marker, size in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
                m = lead == marker
                if m.any():
                    o = off[m]
                    length[m] = sum(b[o + 1 + j].astype(np.int64) << (8 * j) for j in range(size))
                    start[m] += size
        out.append(_views(b, data, start, length, null))
        off = start + length
    return out


_INLINE = np.arange(12, dtype=np.int32)


def _views(
    b: np.ndarray, data: pa.Buffer, start: np.ndarray, length: np.ndarray, null: np.ndarray
) -> pa.Array:
    """A `binary_view` array of the slices [start, start+length) of `b`, without copying them:
    each view holds its length and either the value (up to 12 bytes) or its 4-byte prefix and
    its offset in `b` (Arrow's view layout). `b` has 16 bytes to spare at its end."""
    n = len(start)
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None
    if len(b) >= 1 << 31:  # view offsets are int32: copy the values instead
        values = [
            None if z else b[s : s + ln].tobytes()
            for s, ln, z in zip(start.tolist(), length.tolist(), null.tolist(), strict=True)
        ]
        return pa.array(values, pa.large_binary())
    views = np.empty((n, 4), np.int32)
    start32 = start.astype(np.int32)
    inline = b[start32[:, None] + _INLINE]
    inline *= _INLINE[None, :] < length[:, None]  # zero past each value's end
    views.view(np.uint8)[:, 4:16] = inline
    views[:, 0] = length
    long = length > 12
    if long.any():
        views[long, 2] = 0  # the one data buffer
        views[long, 3] = start32[long]
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), data])


# --------------------------------------------------------------------------- encoding

Encoder = Callable[[pa.Array], pa.Array]  # a column's values -> JSON fragments, null for NULL
_NULL = pa.nulls(1, pa.string())[0]  # (pa.scalar would import pandas)


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _text(arr: pa.Array) -> pa.Array:
    return arr.cast(pa.string())


def _value_of(
    field: Field, adapt: Callable[[Any], Any] | None, convert: Callable[[Any], Any] | None
) -> Callable[[Any], Any]:
    """A value's text (bytes, or str from a string array) -> the payload the row path emits:
    PyMySQL's conversion, the binlog adaptation, the streaming converter."""
    enc, pyconv = field.encoding, field.converter

    def value(v: Any) -> Any:
        if isinstance(v, str):
            v = v.encode()
        if enc is not None:
            v = v.decode(enc)
        if pyconv is not None:
            v = pyconv(v)
        if adapt is not None:
            v = adapt(v)
        return v if convert is None else convert(v)

    return value


def _per_value(value: Callable[[Any], Any]) -> Encoder:
    def enc(arr: pa.Array) -> pa.Array:
        return pa.array([None if v is None else _dumps(value(v)) for v in arr.to_pylist()], pa.string())

    return enc


def _cells(f: Callable[..., Any]) -> dict[str, Any]:
    """The values a converter closure was built with (its mode flags), by name."""
    code = getattr(f, "__code__", None)
    if code is None:
        return {}
    return dict(zip(code.co_freevars, (c.cell_contents for c in f.__closure__ or ()), strict=True))


def _ints(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _int_text_enc(arr: pa.Array) -> pa.Array:
    return _text(arr)  # the server prints integers as JSON does (ZEROFILL columns never come here)


def _unsigned_long_enc(arr: pa.Array) -> pa.Array:
    # bigint.unsigned.handling.mode=long: Java's long wrap-around past 2^63 - 1
    return pc.cast(pc.cast(_text(arr), pa.uint64()).view(pa.int64()), pa.string())


def _double_enc(arr: pa.Array) -> pa.Array:
    return _doubles_json(pc.cast(_text(arr), pa.float64()))


def _plain_json(text: pa.Array) -> bool:
    """True when no value holds a character JSON escapes (controls, '"', backslash): one numpy
    pass over the values' bytes instead of a regex per value (the usual case for text)."""
    offsets, data = text.buffers()[1:3]
    if data is None or offsets is None:
        return True
    off = np.frombuffer(offsets, np.int32, count=len(text) + 1, offset=text.offset * 4)
    d = np.frombuffer(data, np.uint8)[off[0] : off[-1]]
    return not ((d < 0x20).any() or (d == 0x22).any() or (d == 0x5C).any())


def _string_enc(arr: pa.Array) -> pa.Array:
    text = _text(arr)
    if _plain_json(text):
        return pc.binary_join_element_wise('"', text, '"', "")
    return _quote(text)


def _json_enc(value: Callable[[Any], Any]) -> Encoder:
    def enc(arr: pa.Array) -> pa.Array:
        text = _text(arr)
        return _patch(_quote(text), pc.equal(text, ""), text, value)  # '' is null or {} per column

    return enc


def _on_text(enc: Encoder) -> Encoder:
    return lambda arr: enc(_text(arr))


def _binary_text_enc(mode: str) -> Encoder:
    enc = _binary_enc(mode)
    return lambda arr: enc(arr.cast(pa.binary()))


# Years 1000..9999 (the converters' adjuster only touches years < 100); the rest per value.
_DATE_TEXT = r"^[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}"
_DATETIME_TEXT = _DATE_TEXT + r" [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$"


def _micros(text: pa.Array) -> tuple[np.ndarray, pa.Array] | None:
    """(epoch micros, usable) of DATETIME/TIMESTAMP texts; None when Arrow refuses one (an
    invalid date the server kept, e.g. under ALLOW_INVALID_DATES): then all go per value."""
    ok = pc.fill_null(pc.match_substring_regex(text, _DATETIME_TEXT), False)
    try:
        ts = pc.cast(pc.if_else(ok, text, "1970-01-01 00:00:00"), pa.timestamp("us"))
    except pa.ArrowInvalid:
        return None
    return np.asarray(ts.view(pa.int64()).to_numpy(zero_copy_only=False), np.int64), ok


_INT64_NANOS = (1 << 63) // 1000


def _datetime_enc(cells: dict[str, Any], value: Callable[[Any], Any]) -> Encoder:
    iso, nanos, as_millis = bool(cells["iso"]), bool(cells["nanos"]), bool(cells["as_millis"])
    slow = _per_value(value)

    def enc(arr: pa.Array) -> pa.Array:
        text = _text(arr)
        got = _micros(text)
        if got is None:
            return slow(arr)
        m, ok = got
        if iso:
            out = _iso_timestamps(m, None)
        elif nanos:  # NanoTimestamp: null beyond int64 nanoseconds (the converter's None)
            fits = (m >= -_INT64_NANOS) & (m < _INT64_NANOS)
            out = pc.if_else(pa.array(fits), _ints(np.where(fits, m, 0) * 1000), "null")
        elif as_millis:
            out = _ints(m // 1000)
        else:
            out = _ints(m)
        out = pc.if_else(text.is_null(), _NULL, out)
        return _patch(out, pc.invert(ok), text, value)

    return enc


def _timestamp_enc(width: int, value: Callable[[Any], Any]) -> Encoder:
    """TIMESTAMP(width) -> ZonedTimestamp: the server prints exactly `width` fraction digits (in
    UTC, the session's time zone), which is `zoned_timestamp`'s text with 'T' and 'Z' added;
    years 1000..9999 only (a zero TIMESTAMP goes per value)."""
    digits = max(width, 0)
    pattern = _DATE_TEXT + r" [0-9]{2}:[0-9]{2}:[0-9]{2}" + (rf"\.[0-9]{{{digits}}}$" if digits else "$")

    def enc(arr: pa.Array) -> pa.Array:
        text = _text(arr)
        ok = pc.fill_null(pc.match_substring_regex(text, pattern), False)
        iso = pc.replace_substring(text, " ", "T", max_replacements=1)
        out = pc.binary_join_element_wise('"', iso, 'Z"', "")
        return _patch(out, pc.invert(ok), text, value)

    return enc


def _date_enc(iso: bool, value: Callable[[Any], Any]) -> Encoder:
    slow = _per_value(value)

    def enc(arr: pa.Array) -> pa.Array:
        text = _text(arr)
        ok = pc.fill_null(pc.match_substring_regex(text, _DATE_TEXT + "$"), False)
        safe = pc.if_else(ok, text, "1970-01-01")
        try:
            days = pc.cast(safe, pa.date32())
        except pa.ArrowInvalid:
            return slow(arr)
        if iso:  # the text already is the ISO date for these years
            out = pc.binary_join_element_wise('"', safe, 'Z"', "")
        else:
            out = pc.cast(days.view(pa.int32()), pa.string())
        out = pc.if_else(text.is_null(), _NULL, out)
        return _patch(out, pc.invert(ok), text, value)

    return enc


_INT_TYPES = frozenset({FT.TINY, FT.SHORT, FT.INT24, FT.LONG, FT.LONGLONG})
_DECIMAL_TYPES = frozenset({FT.DECIMAL, FT.NEWDECIMAL})
_STRING_TYPES = frozenset(
    {
        FT.VARCHAR,
        FT.VAR_STRING,
        FT.STRING,
        FT.TINY_BLOB,
        FT.MEDIUM_BLOB,
        FT.LONG_BLOB,
        FT.BLOB,
        FT.ENUM,
        FT.SET,
        FT.JSON,
    }
)
_BINARY_BASES = frozenset({"BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB"})


def _utf8(encoding: str | None) -> bool:
    return encoding is not None and codecs.lookup(encoding).name == "utf-8"


class SnapshotRows:
    """One table version's SELECT list and row encoder. `columns`: the table model's columns, in
    table order (what `ts.row` / `ts.key` index). `opts`: the type options the table schema's
    converters were built with; without them every value goes the per-value way."""

    def __init__(self, ts: TableSchema, columns: Sequence[Column], opts: TypeOptions | None = None) -> None:
        if len(columns) != len(ts.columns):
            raise ValueError(f"{len(columns)} model columns for a table schema of {len(ts.columns)}")
        self.ts = ts
        self.columns = list(columns)
        self.opts = opts
        self._adapt = [(i, f) for i, c in enumerate(self.columns) if (f := adapter(c)) is not None]
        self.needed = sorted(set(ts.value_cols) | set(ts.key_cols))
        slot = {i: k for k, i in enumerate(self.needed)}
        self._value = [(slot[i], _dumps(ts.columns[i].name)) for i in ts.value_cols]
        self._key = [(slot[i], _dumps(ts.columns[i].name)) for i in ts.key_cols]
        self._nulls = [_dumps(column_null(ts.columns[i])) for i in self.needed]
        self._plans: dict[tuple[Field, ...], tuple[list[Encoder], list[bool]]] = {}

    def select_list(self) -> str:
        return ", ".join(quote_ident(c.name) for c in self.columns)

    def raw(self, row: Sequence[Any]) -> Sequence[Any]:
        if not self._adapt:
            return row
        out = list(row)
        for i, f in self._adapt:
            v = out[i]
            if v is not None:
                out[i] = f(v)
        return out

    def encode(self, rows: Sequence[Sequence[Any]]) -> tuple[pa.Array | None, pa.Array]:
        """The row path: PyMySQL rows (`fetchmany`) -> (key JSON texts or None for a keyless
        table, after JSON texts), one per row, through `TableSchema.row` / `key`."""
        dumps, key, value = orjson.dumps, self.ts.key, self.ts.row
        raws = [self.raw(r) for r in rows] if self._adapt else rows
        after = pa.array([dumps(value(r)) for r in raws], pa.binary()).view(pa.string())
        if not self.ts.key_names:
            return None, after
        keys = pa.array([dumps(key(r)) for r in raws], pa.binary()).view(pa.string())
        return keys, after

    def encode_text(self, batch: TextBatch) -> tuple[pa.Array | None, pa.Array]:
        """`encode` for a `TextBatch` (a SELECT of `select_list()`), column-wise."""
        encoders, _ = self.plan(batch.fields)
        frags = [
            pc.fill_null(enc(batch.columns[i]), null)
            for enc, i, null in zip(encoders, self.needed, self._nulls, strict=True)
        ]
        after = _object(frags, self._value, batch.num_rows)
        key = _object(frags, self._key, batch.num_rows) if self._key else None
        return key, after

    def fast_columns(self, fields: tuple[Field, ...]) -> list[str]:
        """The needed columns encoded column-wise for a result of these fields."""
        _, fast = self.plan(fields)
        return [self.columns[i].name for i, f in zip(self.needed, fast, strict=True) if f]

    def plan(self, fields: tuple[Field, ...]) -> tuple[list[Encoder], list[bool]]:
        hit = self._plans.get(fields)
        if hit is None:
            if len(fields) != len(self.columns):
                raise ValueError(f"{len(fields)} result columns for a SELECT of {len(self.columns)}")
            plans = [self._plan(i, fields[i]) for i in self.needed]
            hit = self._plans[fields] = ([p for p, _ in plans], [f for _, f in plans])
        return hit

    def _plan(self, i: int, field: Field) -> tuple[Encoder, bool]:
        """The column's encoder, and whether it is column-wise."""
        col, cdef = self.columns[i], self.ts.columns[i]
        value = _value_of(field, adapter(col), cdef.convert)
        slow = _per_value(value), False
        if self.opts is None or cdef.convert is None or field.flags & FLAG.ZEROFILL:
            return slow
        try:
            fresh = column_def(col, self.opts).convert
        except UnknownColumnType:
            return slow
        if fresh is None or not _same_converter(cdef.convert, fresh):
            return slow  # a column mapper (mask, truncate, hash): its own converter
        base, tc, name = col.base_type, field.type_code, getattr(fresh, "__name__", "")
        opts = self.opts
        if tc in _INT_TYPES:
            if fresh is mysql_types._int:
                return _int_text_enc, True
            if base in ("BIGINT", "INT8", "SERIAL") and col.unsigned and opts.bigint_unsigned_mode == "long":
                return _unsigned_long_enc, True
            return slow
        if tc == FT.DOUBLE and fresh is mysql_types._float:
            return _double_enc, True
        if tc in _DECIMAL_TYPES and base in ("DECIMAL", "DEC", "FIXED", "NUMERIC"):
            scale = col.scale or 0
            if opts.decimal_mode == "precise":
                return _on_text(_decimal_fixed_enc(scale, value)), True
            if opts.decimal_mode == "string":
                return _on_text(_decimal_string_enc(scale, value)), True
            return _on_text(_decimal_double_enc(value)), True
        if tc in _STRING_TYPES:
            if base in _BINARY_BASES and field.encoding is None:
                return _binary_text_enc(opts.binary_mode), True
            if not _utf8(field.encoding):
                return slow
            if name in ("conv_str", "conv_enum", "conv_set"):
                return _string_enc, True
            if name == "conv_json":
                return _json_enc(value), True
            return slow
        if tc == FT.DATETIME and name == "conv_dt":
            return _datetime_enc(_cells(fresh), value), True
        if tc == FT.TIMESTAMP and name == "conv_ts":
            return _timestamp_enc(int(_cells(fresh)["width"]), value), True
        if tc in (FT.DATE, FT.NEWDATE) and name == "conv_date":
            return _date_enc(bool(_cells(fresh)["iso"]), value), True
        return slow
