"""Snapshot reads of PostgreSQL: Arrow batches from the server, Debezium JSON built column-wise.

A Spark task reads one primary-key chunk with `read_batches` (ADBC, binary COPY into Arrow,
inside the exported snapshot) and turns each batch into the key/after JSON texts with
`SnapshotColumns.encode`. The values are exactly what streaming emits for the same rows: each
column is either read natively and encoded with Arrow compute / numpy / polars (the common
types and modes), or read as its output-function text — what pgoutput sends — and passed
through the streaming converter (`ColumnDef.convert`) value by value. Native encoders also
send the rare values they do not handle exactly (NaN, huge numerics, years outside
1000..9999, infinities) through the streaming converter, so there is one definition of every
value and the fast path only ever reproduces it.

Fast (column-wise): bool, int2/4/8, oid, float4/8, numeric in every decimal.handling.mode
(precise up to 18 digits; longer values per value), text/varchar/char and every type whose
streaming value is its text (json, jsonb, xml, uuid, enums, citext, ltree, inet, ranges, ...),
bytea in every binary.handling.mode, date / time / timestamp / timestamptz in every
time.precision.mode but isostring TIME (per value). Value by value: money, bit/varbit, interval,
timetz, point, arrays, hstore, PostGIS, unknown types, and any column with a column mapper
(mask, truncate, hash).

Usage (one chunk):

    ts, cols = cache.for_table_with_columns(schema, table)   # tables.TableCache
    sc = SnapshotColumns(ts, cols, cache.registry, cache.modes)
    sql = f"SELECT {sc.select_list()} FROM ... WHERE <chunk bounds>"
    for batch in read_batches(conninfo(settings), sql, snapshot=snap_id, fetch_rows=n):
        key_json, after_json = sc.encode(batch)               # pa.string() arrays, per row
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from connectors.api import TerminalError, TidemarkError, TransientError
from connectors.format import temporal as T
from connectors.format.tableschema import ColumnDef, TableSchema, column_null
from connectors.settings.model import PostgresSettings
from connectors.sources.postgres import oids, types
from connectors.sources.postgres.catalog import ColumnInfo, TypeRegistry
from connectors.sources.postgres.connection import PgConnParams
from connectors.sources.postgres.decimal_columns import fixed_point_ints, quoted_b64_ints

log = logging.getLogger(__name__)

__all__ = ["SnapshotColumns", "conninfo", "read_batches", "SESSION_SETTINGS"]

# The text forms the converters parse (connection.PgConnParams sets the same for streaming).
SESSION_SETTINGS = (
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO"),
    ("IntervalStyle", "postgres"),
    ("extra_float_digits", "3"),
)


# --------------------------------------------------------------------------- connecting


def conninfo(settings: PostgresSettings) -> str:
    """A libpq URI for the snapshot reads: the streaming connection's parameters (host, port,
    user, password, sslmode and ssl files, keepalives, connect_timeout, session settings), all
    as percent-encoded query parameters so no host or password needs URI quoting rules. It
    holds the password: pass it on, never log it."""
    kw = PgConnParams.from_settings(settings).kwargs()
    kw["application_name"] = "tidemark-snapshot"
    query = urllib.parse.urlencode({k: str(v) for k, v in kw.items()}, quote_via=urllib.parse.quote)
    return "postgresql:///?" + query


def _redact(text: str, uri: str) -> str:
    # libpq does not echo passwords, but a driver message might quote its connection string.
    try:
        pw = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query).get("password", [""])[0]
        pw = pw or (urllib.parse.urlsplit(uri).password or "")
    except ValueError:
        pw = ""
    text = text.replace(uri, "<conninfo>")
    return text.replace(pw, "***") if pw else text


_SNAPSHOT_ID = re.compile(r"[0-9A-Fa-f]+-[0-9A-Fa-f]+(-[0-9A-Fa-f]+)?")
_TRANSIENT_STATES = {"57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004", "53300"}
_TRANSIENT_TEXT = (
    "server closed the connection",
    "terminating connection",
    "connection refused",
    "could not connect",
    "connection to server",
    "shutting down",
    "starting up",
    "too many clients",
    "could not receive data",
    "could not send data",
    "connection reset",
    "eof detected",
    "timeout expired",
)


# ADBC's frame around the server's message: "[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR:  ..."
_ADBC_FRAME = re.compile(r"^\[libpq\][^\[]*\[PGRES_\w+\]:\s*(?:ERROR:\s+)?")


def _translate(exc: Exception, uri: str, what: str, snapshot: str | None) -> TidemarkError:
    text = _ADBC_FRAME.sub("", _redact(str(exc).strip(), uri))
    first = text.splitlines()[0] if text else type(exc).__name__
    low = text.lower()
    state = str(getattr(exc, "sqlstate", "") or "")
    if snapshot is not None and (
        "invalid snapshot identifier" in low or "snapshot" in low and state == "22023"
    ):
        return TerminalError(
            f"the exported snapshot {snapshot} is gone: the transaction (or replication connection) "
            f"that exported it has ended ({first})",
            "restart the snapshot: it resumes with the chunks not yet done, in a new exported snapshot",
        )
    if "password authentication failed" in low or "no pg_hba.conf entry" in low:
        return TerminalError(f"{what}: cannot log in ({first})", "check database.user / database.password")
    if state in _TRANSIENT_STATES or any(s in low for s in _TRANSIENT_TEXT):
        return TransientError(f"{what}: {first}", "the chunk is read again")
    if state == "42501" or "permission denied" in low:
        return TerminalError(f"{what}: permission denied ({first})", "grant SELECT on the table to the user")
    if state in ("42P01", "42703"):
        return TerminalError(
            f"{what}: {first} (the table changed since the snapshot was planned?)",
            "an initial snapshot plans a table dropped or altered mid-snapshot again on its next "
            "start; an incremental snapshot reads the chunk again and skips a table that is gone; "
            "a blocking snapshot stops, and streaming resumes (send the signal again)",
        )
    return TerminalError(f"{what}: {first}")


def snapshot_connection(conninfo: str, initial_statements: Sequence[str] = ()) -> Any:
    """An ADBC connection for `read_batches`, with `initial_statements` (database.initial.statements)
    run on it, as on every Debezium JDBC connection. Errors are `TerminalError` /
    `TransientError`; no message holds the password or a statement."""
    import adbc_driver_postgresql.dbapi as adbc  # the `spark` extra: imported only where used

    try:
        conn = adbc.connect(conninfo, autocommit=True)
    except Exception as exc:
        raise _translate(exc, conninfo, "connecting for a snapshot read", None) from None
    try:
        with conn.cursor() as cur:
            for i, stmt in enumerate(initial_statements, 1):
                try:
                    cur.execute(stmt)
                except Exception as exc:
                    # neither the statement nor the server's message (it may quote it) is shown
                    raise TerminalError(
                        f"database.initial.statements: statement {i} of {len(initial_statements)} "
                        f"failed on the snapshot connection "
                        f"(SQLSTATE {getattr(exc, 'sqlstate', None) or 'unknown'})",
                        "run that statement in psql as the connector's user to see the server's message",
                    ) from None
            # once per connection (a kept one serves many reads): the text forms the encoders parse
            try:
                for name, value in SESSION_SETTINGS:
                    cur.execute(f"SET {name} = '{value}'")
            except Exception as exc:
                raise _translate(exc, conninfo, "setting up a snapshot connection", None) from None
    except BaseException:
        conn.close()
        raise
    return conn


def read_batches(
    conninfo: str,
    sql: str,
    *,
    snapshot: str | None,
    fetch_rows: int,
    initial_statements: Sequence[str] = (),
    read_ahead: int = 0,
    connection: Any = None,
    what: str = "snapshot read",
) -> Iterator[pa.RecordBatch]:
    """Run `sql` (in a read-only REPEATABLE READ transaction inside the exported `snapshot` when
    given, else as one autocommit statement: its own consistent view) and yield its rows as record batches of at most `fetch_rows` rows, streamed:
    memory holds one network batch of ADBC's (sized from `fetch_rows`) and the batch yielded.
    The connection is `connection` (one of `snapshot_connection`, kept open: a connect costs an
    ADBC type lookup, measured at a quarter of an incremental chunk's read) or a new one with
    `initial_statements` run first, closed at the end. `read_ahead` > 0: that many batches are
    fetched by a background thread while the caller encodes (off by default: no gain measured
    on a busy 2-core machine, where the server and other tasks take the cores). Errors are
    `TerminalError` / `TransientError`, their message led by `what`; none holds the password."""
    if snapshot is not None and not _SNAPSHOT_ID.fullmatch(snapshot):
        raise TerminalError(f"not an exported snapshot id: {snapshot!r}")
    conn = connection if connection is not None else snapshot_connection(conninfo, initial_statements)
    try:
        cur = conn.cursor()
        # ADBC sizes its batches in bytes: ~256 bytes a row keeps one under fetch_rows for
        # typical rows, and bounds memory by the fetch size whatever the table's size.
        hint = max(1 << 16, min(fetch_rows * 256, 1 << 27))
        cur.adbc_statement.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(hint)})
        # Without an exported snapshot the one statement is its own consistent view: no
        # transaction round trips (an incremental chunk is one statement on a kept connection)
        committed = snapshot is None
        try:
            if snapshot is not None:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cur.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")  # checked against _SNAPSHOT_ID
            cur.execute(sql)
            reader = cur.fetch_record_batch()
            for batch in _read_ahead(reader, read_ahead) if read_ahead > 0 else reader:
                for start in range(0, batch.num_rows, fetch_rows):
                    yield batch.slice(start, fetch_rows)
            if snapshot is not None:
                cur.execute("COMMIT")
                committed = True
        except TidemarkError:
            raise
        except Exception as exc:
            raise _translate(exc, conninfo, what, snapshot) from None
        finally:
            if not committed and connection is not None:
                try:  # a kept connection must not stay inside this transaction
                    cur.execute("ROLLBACK")
                except Exception:  # noqa: BLE001 - the caller drops a broken connection
                    log.debug("rolling back the snapshot read failed", exc_info=True)
            try:
                cur.close()
            except Exception:  # noqa: BLE001 - closing after a failure: the first error is the one to see
                log.debug("closing the snapshot cursor failed", exc_info=True)
    finally:
        if connection is None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - as above
                log.debug("closing the snapshot connection failed", exc_info=True)


_END = object()


def _read_ahead(reader: Iterable[pa.RecordBatch], depth: int) -> Iterator[pa.RecordBatch]:
    """Iterate `reader` on a background thread, at most `depth` batches ahead. Only that
    thread touches the reader until it has finished, so the cursor is never shared."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for batch in reader:
                if not put(batch):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(exc)

    worker = threading.Thread(target=run, name="snapshot-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()  # the consumer stopped early (or failed): the thread ends after its batch
        worker.join()


# --------------------------------------------------------------------------- JSON fragments

Encoder = Callable[[pa.Array], pa.Array]  # Arrow column -> JSON text per row (null where NULL)
# (native column, output text of the rows to convert value by value) -> JSON text
TemporalEncoder = Callable[[pa.Array, pa.Array], pa.Array]


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


# orjson's escapes, taken from orjson itself so the vectorised escaping cannot drift from it.
_ESCAPES = [(c, _dumps(c)[1:-1]) for c in ["\\", '"', *map(chr, range(32))]]
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


def _quote(arr: pa.Array) -> pa.Array:
    """Strings -> JSON string literals, as orjson writes them (only `"`, `\\` and control
    characters are escaped; the rows without any are just wrapped in quotes)."""
    arr = arr.cast(pa.string()) if arr.type != pa.string() else arr
    plain = pc.binary_join_element_wise('"', arr, '"', "")
    if not _may_need_escape(arr):
        return plain
    needs = pc.match_substring_regex(arr, _NEEDS_ESCAPE)
    if not pc.any(needs).as_py():
        return plain
    mask = pc.fill_null(needs, False)
    sub = pc.filter(arr, mask)
    for ch, esc in _ESCAPES:
        if pc.any(pc.match_substring(sub, ch)).as_py():
            sub = pc.replace_substring(sub, ch, esc)
    return pc.replace_with_mask(plain, mask, pc.binary_join_element_wise('"', sub, '"', ""))


def _may_need_escape(arr: pa.Array) -> bool:
    """Whether any byte of the strings' characters is one `_quote` escapes: one numpy pass over
    the array's character buffer, ~3x faster than the regex per row (22 vs 7 ms for 100,000
    132-character strings). A null slot's bytes may count too: then the exact regex decides."""
    if len(arr) == 0 or arr.buffers()[2] is None:
        return False
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)
    chars = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[
        offsets[arr.offset] : offsets[arr.offset + len(arr)]
    ]
    return bool(((chars < 0x20) | (chars == 0x22) | (chars == 0x5C)).any())


def _patch(frag: pa.Array, mask: pa.Array, values: pa.Array, convert: Callable[[Any], Any]) -> pa.Array:
    """Replace the rows of `frag` selected by `mask` with orjson(convert(value)): the exact
    streaming result for values the vectorised path leaves out."""
    mask = pc.and_(pc.fill_null(mask, False), pc.is_valid(values))
    if not pc.any(mask).as_py():
        return frag
    todo = pc.filter(values, mask).to_pylist()
    out = pa.array([_dumps(convert(v)) for v in todo], pa.string())
    return pc.replace_with_mask(frag, mask, out)


def _per_value(convert: Callable[[Any], Any]) -> Encoder:
    def enc(arr: pa.Array) -> pa.Array:
        return pa.array([None if v is None else _dumps(convert(v)) for v in arr.to_pylist()], pa.string())

    return enc


def _split_json_array(text: bytes, n: int) -> pa.Array:
    """b"[a,b,c]" (numbers: no commas inside) -> ["a", "b", "c"]."""
    if n == 0:
        return pa.array([], pa.string())
    body = pa.array([text[1:-1]], pa.binary()).cast(pa.string())
    return pc.split_pattern(body, ",").flatten()


def _ints_json(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.string())


def _doubles_json(values: pa.Array) -> pa.Array:
    """float64 -> orjson's number text; NaN/±Infinity as the strings the JsonConverter writes."""
    np_vals = values.to_numpy(zero_copy_only=False)
    finite = np.isfinite(np_vals)
    safe = np.where(finite, np_vals, 0.0)
    text = _split_json_array(orjson.dumps(safe, option=orjson.OPT_SERIALIZE_NUMPY), len(safe))
    if not finite.all():
        special = np.where(np.isnan(np_vals), '"NaN"', np.where(np_vals > 0, '"Infinity"', '"-Infinity"'))
        text = pc.if_else(pa.array(finite), text, pa.array(special.astype(object), pa.string()))
    return pc.if_else(values.is_null(), pa.scalar(None, pa.string()), text)


def _b64(binary: pa.Array, alphabet: str = "base64") -> pa.Array:
    """Binary -> base64 (standard, padded) / url-safe / hex text, without quotes."""
    s = pl.Series(binary)
    if alphabet == "hex":
        out = s.bin.encode("hex")
    else:
        out = s.bin.encode("base64")
        if alphabet == "base64-url-safe":
            out = out.str.replace_all("+", "-", literal=True).str.replace_all("/", "_", literal=True)
    return out.to_arrow().cast(pa.string())


# --------------------------------------------------------------------------- per-type encoders


def _bool_enc(arr: pa.Array) -> pa.Array:
    return pc.if_else(arr, "true", "false")


def _int_enc(arr: pa.Array) -> pa.Array:
    return _ints_json(arr)


def _float8_enc(arr: pa.Array) -> pa.Array:
    return _doubles_json(arr.cast(pa.float64()))


def _float_text_enc(arr: pa.Array) -> pa.Array:
    # float4 text (shortest form with extra_float_digits=3), parsed as Python's float() does.
    special = pc.is_in(arr, pa.array(["NaN", "Infinity", "-Infinity"]))
    parsed = pc.cast(pc.if_else(special, "0", arr), pa.float64())
    return pc.if_else(special, pc.binary_join_element_wise('"', arr, '"', ""), _doubles_json(parsed))


_DIGITS_ONLY = r"^-?[0-9]+(\.[0-9]+)?$"
_TINY = r"^-?0\.0{6}"  # adjusted exponent < -6: Java's BigDecimal.toString goes scientific


def _unscaled(text: pa.Array, ok: pa.Array) -> np.ndarray:
    digits = pc.replace_substring(pc.if_else(ok, text, "0"), ".", "")
    return np.asarray(pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False), np.int64)


def _decimal_fixed_enc(scale: int, convert: Callable[[Any], Any]) -> Encoder:
    """numeric(p,s) precise: base64 of the unscaled value; the server prints exactly s digits."""
    if scale > 17:
        return _per_value(convert)  # no room for an int64 fast path

    def enc(arr: pa.Array) -> pa.Array:
        if arr.type != pa.string():  # decimal_columns reads the 32-bit-offset string layout
            arr = arr.cast(pa.string())
        ok, unscaled = fixed_point_ints(arr, scale)
        frag = pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), quoted_b64_ints(unscaled))
        return _patch(frag, pa.array(~ok), arr, convert)

    return enc


def _decimal_variable_enc(convert: Callable[[Any], Any]) -> Encoder:
    """numeric without typmod, precise: {"scale": s, "value": b64} with trailing fraction zeros
    stripped (VariableScaleDecimal); values of more than 18 digits go through `convert`."""

    def enc(arr: pa.Array) -> pa.Array:
        shape = pc.fill_null(pc.match_substring_regex(arr, _DIGITS_ONLY), False)
        # strip the fraction's trailing zeros, then a bare '.'
        stripped = pc.replace_substring_regex(pc.if_else(shape, arr, "0"), r"(\.[0-9]*?)0+$", r"\1")
        stripped = pc.replace_substring_regex(stripped, r"\.$", "")
        n_digits = pc.subtract(
            pc.utf8_length(stripped),
            pc.add(
                pc.cast(pc.starts_with(stripped, "-"), pa.int32()),
                pc.cast(pc.match_substring(stripped, "."), pa.int32()),
            ),
        )
        ok = pc.and_(shape, pc.less_equal(n_digits, 18))
        dot = pc.find_substring(stripped, ".")
        scale = pc.if_else(
            pc.greater_equal(dot, 0), pc.subtract(pc.subtract(pc.utf8_length(stripped), dot), 1), 0
        )
        unscaled = _unscaled(stripped, ok)
        scale_np = np.where(unscaled == 0, 0, np.asarray(scale.to_numpy(zero_copy_only=False)))
        frag = pc.binary_join_element_wise(
            '{"scale":',
            pc.cast(pa.array(scale_np, pa.int32()), pa.string()),
            ',"value":',
            quoted_b64_ints(unscaled),
            "}",
            "",
        )
        frag = pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), frag)
        return _patch(frag, pc.invert(ok), arr, convert)

    return enc


def _decimal_string_enc(scale: int | None, convert: Callable[[Any], Any]) -> Encoder:
    """decimal.handling.mode=string: BigDecimal.toString, i.e. the server's text unless the
    value is below 1e-6 (scientific notation then) or not a plain number (NaN, Infinity)."""
    pattern = (
        rf"^-?[0-9]+\.[0-9]{{{scale}}}$" if scale else (_DIGITS_ONLY if scale is None else r"^-?[0-9]+$")
    )

    def enc(arr: pa.Array) -> pa.Array:
        ok = pc.and_(
            pc.fill_null(pc.match_substring_regex(arr, pattern), False),
            pc.invert(pc.fill_null(pc.match_substring_regex(arr, _TINY), False)),
        )
        frag = pc.binary_join_element_wise('"', arr, '"', "")
        return _patch(frag, pc.invert(ok), arr, convert)

    return enc


def _decimal_double_enc(convert: Callable[[Any], Any]) -> Encoder:
    plain = r"^-?[0-9]{1,300}(\.[0-9]{1,1000})?$"  # parses to a finite double like float(Decimal(s))

    def enc(arr: pa.Array) -> pa.Array:
        ok = pc.fill_null(pc.match_substring_regex(arr, plain), False)
        frag = _doubles_json(pc.cast(pc.if_else(ok, arr, "0"), pa.float64()))
        frag = pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), frag)
        return _patch(frag, pc.invert(ok), arr, convert)

    return enc


# Temporal values are read natively, plus their output text only when outside 1000..9999
# (BC dates, ±infinity, years past 9999): those few go through the streaming converter, so
# calendar edge cases (ADBC shifts epochs in wrapping int64 arithmetic, PostgreSQL's BC
# calendar) are decided by the one streaming definition.
_MICROS_1000 = T.days_from_civil(1000, 1, 1) * T.MICROS_PER_DAY
_MICROS_10000 = T.days_from_civil(10000, 1, 1) * T.MICROS_PER_DAY
_WINDOW = {
    oids.DATE: ("date '1000-01-01'", "date '10000-01-01'"),
    oids.TIMESTAMP: ("timestamp '1000-01-01'", "timestamp '10000-01-01'"),
    oids.TIMESTAMPTZ: ("timestamptz '1000-01-01 00:00:00+00'", "timestamptz '10000-01-01 00:00:00+00'"),
}


def _outside_text_expr(col: str, oid: int) -> str:
    lo, hi = _WINDOW[oid]
    return f"CASE WHEN {col} < {lo} OR {col} >= {hi} THEN format('%s', {col}) END"


def _civil(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """temporal.civil_from_days on a numpy array (same integer steps, floor division)."""
    z = days + 719468
    era = np.where(z >= 0, z, z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (m <= 2), m, d


def _put_digits(buf: np.ndarray, col: int, value: np.ndarray, width: int) -> None:
    for j in range(width):
        buf[:, col + width - 1 - j] = 48 + (value // 10**j) % 10


_ISO_TEMPLATE = np.frombuffer(b'"0000-00-00T00:00:00.000000Z"', np.uint8)


def _iso_timestamps(micros: np.ndarray, width: int | None) -> pa.Array:
    """epoch micros (years 1000..9999) -> '"YYYY-MM-DDTHH:MM:SS[.f]Z"' (quoted) with exactly
    `width` fraction digits (1..6), else the minimal ISO fraction (format_zoned_timestamp's
    rules), built as one byte matrix: no per-row formatting."""
    n = len(micros)
    days = micros // T.MICROS_PER_DAY
    tod = micros - days * T.MICROS_PER_DAY
    y, mo, d = _civil(days)
    secs, frac = tod // 1_000_000, tod % 1_000_000
    buf = np.empty((n, len(_ISO_TEMPLATE)), np.uint8)
    buf[:] = _ISO_TEMPLATE
    for col, value, w in (
        (1, y, 4),
        (6, mo, 2),
        (9, d, 2),
        (12, secs // 3600, 2),
        (15, secs // 60 % 60, 2),
        (18, secs % 60, 2),
        (21, frac, 6),
    ):
        _put_digits(buf, col, value, w)
    if width is not None and 0 < width <= 6:
        digits = np.full(n, width)
    else:  # minimal: no trailing zeros, no '.' for a whole second
        digits = np.full(n, 6)
        for j in range(1, 7):
            digits -= frac % 10**j == 0
    length = 20 + np.where(digits > 0, digits + 1, 0)  # '"' + 19 + ['.' + digits]
    cols = np.arange(buf.shape[1])[None, :]
    keep = (cols < length[:, None]) | (cols >= buf.shape[1] - 2)  # and always 'Z"'
    data = np.ascontiguousarray(buf[keep])
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(length + 2, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _int64s(arr: pa.Array, odd: pa.Array | None = None, type_: pa.DataType | None = None) -> np.ndarray:
    """The integers behind a temporal array; NULL and `odd` rows as 0 (the caller masks them)."""
    ints = pc.fill_null(arr.view(type_ or pa.int64()), 0)
    if odd is not None:
        ints = pc.if_else(pc.is_valid(odd), 0, ints)
    return np.asarray(ints.to_numpy(), np.int64)


def _quote_plain(arr: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', arr, '"', "")


def _no_nulls(out: pa.Array, like: pa.Array) -> pa.Array:
    return pc.if_else(like.is_valid(), out, pa.scalar(None, pa.string()))


def _timestamptz_enc(width: int) -> TemporalEncoder:
    """timestamptz -> ZonedTimestamp text in UTC with the column's fraction digits."""

    def enc(arr: pa.Array, odd: pa.Array) -> pa.Array:
        return _no_nulls(_iso_timestamps(_int64s(arr, odd), width), arr)

    return enc


def _timestamp_enc(schema_name: str | None) -> TemporalEncoder:
    """timestamp (no zone) -> epoch ms/µs/ns or IsoTimestamp, as the streaming mapping picks."""

    def enc(arr: pa.Array, odd: pa.Array) -> pa.Array:
        m = _int64s(arr, odd)
        if schema_name == T.MICRO_TIMESTAMP_SCHEMA.name:
            out = _ints_json(pa.array(m))
        elif schema_name in (T.TIMESTAMP_SCHEMA.name, T.CONNECT_TIMESTAMP_SCHEMA.name):
            out = _ints_json(pa.array(m // 1000))  # floor, as the streaming `// 1000`
        elif schema_name == T.NANO_TIMESTAMP_SCHEMA.name:
            out = _ints_json(pa.array(m * 1000))  # years 1000..9999: outside int64 only past 2262
            fits = (m >= -_NANO_LIMIT) & (m <= _NANO_LIMIT)
            out = pc.if_else(pa.array(fits), out, "null")
        else:  # IsoTimestamp
            out = _iso_timestamps(m, None)
        return _no_nulls(out, arr)

    return enc


_NANO_LIMIT = (1 << 63) // 1000  # |micros| up to this fits int64 as nanos (Debezium sends null beyond)


def _date_enc(schema_name: str | None) -> TemporalEncoder:
    def enc(arr: pa.Array, odd: pa.Array) -> pa.Array:
        d = _int64s(arr, odd, pa.int32())
        if schema_name == T.ISO_DATE_SCHEMA.name:
            dates = pa.array(d.astype(np.int32), pa.int32()).view(pa.date32())
            out = pc.binary_join_element_wise('"', pc.strftime(dates, "%Y-%m-%d"), 'Z"', "")
        else:
            out = _ints_json(pa.array(d))
        return _no_nulls(out, arr)

    return enc


def _time_enc(schema_name: str | None) -> Encoder:
    def enc(arr: pa.Array) -> pa.Array:
        m = _int64s(arr)
        if schema_name == T.MICRO_TIME_SCHEMA.name:
            out = _ints_json(pa.array(m))
        elif schema_name == T.NANO_TIME_SCHEMA.name:
            out = _ints_json(pa.array(m * 1000))
        elif schema_name == T.ISO_TIME_SCHEMA.name:
            out = pa.array([_dumps(T.format_zoned_time(int(v))) for v in m], pa.string())
        else:  # Time (ms) / Connect Time: millis of day, truncated
            out = _ints_json(pa.array(m // 1000))
        return _no_nulls(out, arr)

    return enc


def _binary_enc(mode: str) -> Encoder:
    def enc(arr: pa.Array) -> pa.Array:
        return pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), _quote_plain(_b64(arr, mode)))

    return enc


def _string_enc(arr: pa.Array) -> pa.Array:
    return _quote(arr)


# --------------------------------------------------------------------------- the column plan


@dataclass(frozen=True, slots=True)
class _Plan:
    select: str  # the SQL select expression
    encode: Encoder | TemporalEncoder
    null_json: str  # what a NULL becomes (column_null)
    fast: bool  # False: the value's text through the streaming converter, one by one
    # temporal columns: a second expression, the output text of the values outside the
    # years 1000..9999, which go through `convert`
    outside: str | None = None
    convert: Callable[[Any], Any] | None = None


def _text_expr(col: str) -> str:
    # The type's output function text — what pgoutput sends — not `::text`, whose casts differ
    # for some types (bool -> 'true', bpchar trims, inet adds /32). format('%s') calls the
    # output function, and turns NULL into '', hence the CASE.
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE format('%s', {col}) END"


_NATIVE_CASTS = {
    oids.BOOL: "boolean",
    oids.INT2: "int2",
    oids.INT4: "int4",
    oids.INT8: "int8",
    oids.FLOAT8: "float8",
    oids.DATE: "date",
    oids.TIME: "time",
    oids.TIMESTAMP: "timestamp",
    oids.TIMESTAMPTZ: "timestamptz",
    oids.BYTEA: "bytea",
    oids.TEXT: "text",
    oids.VARCHAR: "varchar",
    oids.BPCHAR: "bpchar",
}


def _same_converter(a: Any, b: Any) -> bool:
    """True when `a` is the converter the type mapping makes (no column mapper wrapped it):
    the same function, or a closure of the same code over the same values."""
    if a is b:
        return True
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if ca is None or ca is not cb:
        return False
    cells_a = [c.cell_contents for c in (a.__closure__ or ())]
    cells_b = [c.cell_contents for c in (b.__closure__ or ())]
    if len(cells_a) != len(cells_b):
        return False
    for x, y in zip(cells_a, cells_b, strict=True):
        if callable(x) and callable(y):
            if not _same_converter(x, y):
                return False
        elif x != y:
            return False
    return True


class SnapshotColumns:
    """How one table version's columns are read and turned into key/after JSON.

    `columns` are the catalog ColumnInfos of `ts.columns`, position for position (what
    `TableCache.for_table` built `ts` from). `select_list()` is the SELECT list, one
    expression per column the key or value needs, in that order; `encode(batch)` takes a
    batch whose first columns are those expressions."""

    def __init__(
        self,
        ts: TableSchema,
        columns: Sequence[ColumnInfo],
        registry: TypeRegistry,
        modes: types.TypeModes,
    ) -> None:
        if len(columns) != len(ts.columns):
            raise ValueError(f"{len(columns)} catalog columns for a table schema of {len(ts.columns)}")
        self.ts = ts
        self.needed = sorted(set(ts.value_cols) | set(ts.key_cols))
        self.plans = [self._plan(ts.columns[i], columns[i], registry, modes) for i in self.needed]
        slot = {i: k for k, i in enumerate(self.needed)}
        self._value = [(slot[i], _dumps(ts.columns[i].name)) for i in ts.value_cols]
        self._key = [(slot[i], _dumps(ts.columns[i].name)) for i in ts.key_cols]

    def select_list(self) -> str:
        exprs = []
        for k, p in enumerate(self.plans):
            exprs.append(f"{p.select} AS {_ident(f'c{k}')}")
            if p.outside is not None:
                exprs.append(f"{p.outside} AS {_ident(f'c{k}_text')}")
        return ", ".join(exprs)

    @property
    def fallback_columns(self) -> list[str]:
        """Columns converted value by value (their text through the streaming converter)."""
        return [self.ts.columns[i].name for i, p in zip(self.needed, self.plans, strict=True) if not p.fast]

    def encode(self, batch: pa.RecordBatch) -> tuple[pa.Array | None, pa.Array]:
        frags = []
        pos = 0
        for plan in self.plans:
            arr = batch.column(pos)
            if plan.outside is None:
                frag = cast(Encoder, plan.encode)(arr)
                pos += 1
            else:
                text = batch.column(pos + 1)
                frag = cast(TemporalEncoder, plan.encode)(arr, text)
                frag = _patch(frag, text.is_valid(), text, cast(Callable[[Any], Any], plan.convert))
                pos += 2
            frags.append(pc.fill_null(frag, plan.null_json))
        after = _object(frags, self._value, batch.num_rows)
        key = _object(frags, self._key, batch.num_rows) if self._key else None
        return key, after

    # -- planning
    def _plan(self, col: ColumnDef, ci: ColumnInfo, registry: TypeRegistry, modes: types.TypeModes) -> _Plan:
        name = _ident(ci.name)
        null_json = _dumps(column_null(col))
        convert = col.convert or (lambda v: v)
        fallback = _Plan(_text_expr(name), _per_value(convert), null_json, False)
        info = registry.get(ci.type_oid)
        fresh = types.column_mapping(ci, registry, modes)
        if info is None or fresh is None or not _same_converter(col.convert, fresh.convert):
            return fallback  # a column mapper (mask, truncate, hash) or an unusual type: its own converter
        root, _ = registry.root(info)
        oid = root.oid
        sel = name if root is info else f"{name}::pg_catalog.{_NATIVE_CASTS.get(oid, 'text')}"
        length, scale = types.debezium_length_scale(info, ci.typmod, registry)
        sname = fresh.schema.name
        if oid == oids.BOOL:
            return _Plan(sel, _bool_enc, null_json, True)
        if oid in (oids.INT2, oids.INT4, oids.INT8):
            return _Plan(sel, _int_enc, null_json, True)
        if oid == oids.OID:  # unsigned 32 bits: ADBC reads it as int32
            return _Plan(f"{name}::pg_catalog.int8", _int_enc, null_json, True)
        if oid == oids.FLOAT8:
            return _Plan(sel, _float8_enc, null_json, True)
        if oid == oids.FLOAT4:
            return _Plan(_text_expr(name), _float_text_enc, null_json, True)
        if oid == oids.NUMERIC:
            variable = length in (0, types.VARIABLE_SCALE_DECIMAL_LENGTH) and scale == 0
            text = _text_expr(name)
            if modes.decimal == "precise":
                enc = _decimal_variable_enc(convert) if variable else _decimal_fixed_enc(scale, convert)
                return _Plan(text, enc, null_json, True)
            if modes.decimal == "string":
                return _Plan(text, _decimal_string_enc(None if variable else scale, convert), null_json, True)
            return _Plan(text, _decimal_double_enc(convert), null_json, True)
        if oid in _WINDOW:
            outside = _outside_text_expr(sel, oid)
            if oid == oids.TIMESTAMPTZ:
                return _Plan(sel, _timestamptz_enc(scale), null_json, True, outside, convert)
            if oid == oids.TIMESTAMP:
                return _Plan(sel, _timestamp_enc(sname), null_json, True, outside, convert)
            return _Plan(sel, _date_enc(sname), null_json, True, outside, convert)
        if oid == oids.TIME:
            return _Plan(sel, _time_enc(sname), null_json, True)
        if oid == oids.BYTEA:
            return _Plan(sel, _binary_enc(modes.binary), null_json, True)
        if fresh.convert is str:
            # Every type whose streaming value is its text: text types natively, the rest
            # (json, uuid, enums, inet, ranges, ...) as their output text.
            expr = sel if oid in (oids.TEXT, oids.VARCHAR, oids.BPCHAR) else _text_expr(name)
            return _Plan(expr, _string_enc, null_json, True)
        return fallback


def _object(frags: list[pa.Array], fields: list[tuple[int, str]], n: int) -> pa.Array:
    """'{"a":<frag>,"b":<frag>}' per row, joined column-wise."""
    if not fields:
        return pa.array(["{}"] * n, pa.string())
    parts: list[Any] = []
    lead = "{"
    for slot, key in fields:
        parts.append(lead + key + ":")
        parts.append(frags[slot])
        lead = ","
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "")
