"""The binlog dump stream: connection and dump command on PyMySQL, our own packet framing and
event dispatch, row decoding by `rowdecode`.

Why not a plain `BinLogStreamReader` loop: it builds a wrapper object per packet, re-parses the
TABLE_MAP event (including optional metadata) before every rows event and decodes every column
through a long if-chain — about 3k single-row events/s. Here the connection and the dump
command come from PyMySQL (the same handshake mysql-replication uses), and:
  * packets are framed from our own read buffer, the event header unpacked with one `struct` call;
  * a TABLE_MAP whose bytes equal the previous one for that table id reuses the reader compiled
    for (table id, map bytes, model version) — no re-parsing;
  * rows events of tables the filters do not capture are skipped before any column is decoded;
  * rows are decoded by readers generated per table layout (`rowdecode.compile_rows`).

Around it: `wire` (type codes, TABLE_MAP, command bytes), `rowdecode` (values and row images),
`connection` (ConnectionSettings, current position), `errors` (what a failure means).

MySQL 8.x vs MariaDB (handled here, in `connection` and in `setup`):
  * current position: `SHOW BINARY LOG STATUS` (MySQL 8.4+) else `SHOW MASTER STATUS`;
  * GTIDs: MySQL `uuid:1-5` sets sent with COM_BINLOG_DUMP_GTID; MariaDB `domain-server-seq`
    lists sent as `@slave_connect_state` before COM_BINLOG_DUMP;
  * MySQL GTID_LOG_EVENT vs MariaDB GTID_EVENT (standalone flag marks DDL without BEGIN);
  * query text: MySQL ROWS_QUERY_LOG_EVENT vs MariaDB ANNOTATE_ROWS_EVENT (requested with the
    BINLOG_SEND_ANNOTATE_ROWS_EVENT dump flag);
  * `binlog_row_value_options=PARTIAL_JSON` (MySQL): PARTIAL_UPDATE_ROWS_EVENTs are refused
    (TerminalError) — set it to '' on the server; MariaDB compressed events likewise.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql

from connectors.api import GtidSet, TerminalError, TransientError
from connectors.sources.mysql.connection import ConnectionSettings, current_position
from connectors.sources.mysql.errors import connection_error, stream_error
from connectors.sources.mysql.model import Table
from connectors.sources.mysql.rowdecode import RowReader, Rows, as_bytes, compile_rows, decode_rows
from connectors.sources.mysql.wire import (
    CHUNK,
    DUMP_NON_BLOCK,
    DUMP_SEND_ANNOTATE_ROWS,
    FORMAT_DESCRIPTION,
    GTID,
    HEADER,
    HEARTBEAT,
    INCIDENT,
    LARGE_PACKET,
    MARIA_ANNOTATE,
    MARIA_COMPRESSED,
    MARIA_GTID,
    MAX_PACKET,
    PARTIAL_UPDATE,
    QUERY,
    ROTATE,
    ROWS_OPS,
    ROWS_QUERY,
    TABLE_MAP,
    XID,
    TableMap,
    dump_from_gtids,
    dump_from_position,
    parse_table_map,
    register_replica,
    unpack_maria_gtid,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Event:
    """One binlog event, decoded as far as the connector needs. `pos` is where the event starts,
    `next_pos` where the next one starts; `rows` holds (before, after) value lists."""

    kind: str  # rotate, gtid, query, xid, rows, annotate, heartbeat, format
    ts: int
    server_id: int
    file: str
    pos: int
    next_pos: int
    db: str = ""
    table: str = ""
    op: str = ""
    rows: Rows = field(default_factory=list)
    query: str = ""
    thread: int = 0
    gtid: str = ""
    standalone: bool = False
    skipped: bool = False  # a rows event of a table the filters do not capture
    table_model: Table | None = None


# Resolver: (db, table) → (model table, model version) when captured, None to skip its rows.
Resolver = Callable[[str, str], "tuple[Table, int] | None"]


class BinlogStream:
    """Streams binlog events from a start point. Start with `gtid_set` (MariaDB `d-s-n,...` or
    MySQL `uuid:1-5,...`) or with `file`/`pos`. `events()` blocks for new events; `stop()` (any
    thread) ends it."""

    def __init__(
        self,
        settings: ConnectionSettings,
        server_id: int,
        resolver: Resolver,
        *,
        file: str | None = None,
        pos: int | None = None,
        gtid_set: str | None = None,
        heartbeat_s: float = 10.0,
        annotate: bool = True,
        blocking: bool = True,
        config_path: str | None = None,
    ) -> None:
        self.settings, self.server_id, self.resolver = settings, server_id, resolver
        self.config_path = config_path  # named in recovery hints
        self.file, self.pos, self.gtid_set = file, pos, gtid_set
        self.heartbeat_s, self.annotate, self.blocking = heartbeat_s, annotate, blocking
        self.conn: pymysql.connections.Connection | None = None
        self.is_mariadb = False
        self.checksum = False
        self._maps: dict[int, tuple[bytes, int, TableMap, RowReader | None, Table | None]] = {}
        self._stopped = False
        self._buf, self._p = b"", 0  # read buffer of the dump stream and the next packet's offset in it
        self.tables_version = 0  # bump to force decoders to be recompiled (after DDL)

    # ------------------------------------------------------------------ connection
    def connect(self) -> None:
        kw = self.settings.pymysql_kwargs()
        if self.heartbeat_s and not kw.get("read_timeout"):
            kw["read_timeout"] = max(30.0, self.heartbeat_s * 3)  # a silent dead server is noticed
        try:
            self.conn = pymysql.connect(**kw)
        except pymysql.err.OperationalError as e:
            raise connection_error(e, self.settings) from None
        self._buf, self._p = b"", 0
        cur = self.conn.cursor()
        cur.execute("SELECT VERSION(), @@global.binlog_checksum")
        version, checksum = cur.fetchone()
        self.is_mariadb = "mariadb" in str(version).lower()
        self.checksum = str(checksum).upper() != "NONE"
        if self.checksum:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
        cur.execute("SET @mariadb_slave_capability = 4")  # receive MariaDB GTID events
        if self.heartbeat_s:
            cur.execute("SET @master_heartbeat_period = %s", (int(self.heartbeat_s * 1e9),))
        if self.file is None and not self.gtid_set:
            self.file, self.pos = current_position(cur)[:2]
        self._register(cur)
        if self.gtid_set and self.is_mariadb:
            cur.execute("SET @slave_connect_state = %s", (self.gtid_set,))
            cur.execute("SET @slave_gtid_strict_mode = 0")
            cur.execute("SET @slave_gtid_ignore_duplicates = 0")
        cur.close()
        flags = 0 if self.blocking else DUMP_NON_BLOCK
        if self.is_mariadb and self.annotate:
            flags |= DUMP_SEND_ANNOTATE_ROWS
        if self.gtid_set and not self.is_mariadb:
            body = dump_from_gtids(GtidSet.parse(self.gtid_set), flags, self.server_id)
        elif self.gtid_set:  # MariaDB: the GTIDs went as @slave_connect_state
            body = dump_from_position("", 4, flags, self.server_id)
        else:
            body = dump_from_position(self.file or "", self.pos or 4, flags, self.server_id)
        self._send(body)

    def _send(self, body: bytes) -> None:
        assert self.conn is not None
        self.conn._next_seq_id = 0
        self.conn._write_bytes(struct.pack("<I", len(body))[:3] + b"\x00" + body)
        self.conn._next_seq_id = 1

    def _register(self, cur: Any) -> None:
        """COM_REGISTER_SLAVE so the connector shows in SHOW SLAVE HOSTS (server-id clash checks)."""
        assert self.conn is not None
        self._send(register_replica(self.server_id, socket.gethostname()))
        try:
            self.conn._read_packet()
        except pymysql.err.MySQLError as e:
            log.warning("COM_REGISTER_SLAVE refused (%s); continuing", e)

    def stop(self) -> None:
        self._stopped = True
        conn = self.conn
        if conn is not None and conn._sock is not None:
            try:
                conn._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken replication socket
                pass

    # ------------------------------------------------------------------ reading
    # The dump stream is read through our own buffer: one `read1` of up to CHUNK bytes holds
    # hundreds of packets, framed here with their 4-byte headers. PyMySQL's `_read_packet` (two
    # buffered reads, a packet object and a sequence check per packet) was the largest single
    # cost of a catch-up. PyMySQL still does the handshake, TLS and the commands before the dump.
    def buffered(self) -> bool:
        """Whether the next packet is already whole in the buffer (reading it will not wait)."""
        buf, p = self._buf, self._p
        avail = len(buf) - p
        return avail >= 4 and avail - 4 >= (buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16)

    def _fill(self, need: int) -> bool:
        """Read until `need` unread bytes are buffered; False when the stream was stopped."""
        assert self.conn is not None and self.conn._rfile is not None
        read1 = self.conn._rfile.read1
        parts = [self._buf[self._p :]]
        have = len(parts[0])
        while have < need:
            try:
                chunk = read1(max(need - have, CHUNK))
            except (OSError, ValueError) as e:  # ValueError: the socket file was closed by stop()
                return self._lost(e)
            if not chunk:
                return self._lost(None)
            parts.append(chunk)
            have += len(chunk)
        self._buf = b"".join(parts)
        self._p = 0
        return True

    def _lost(self, e: Exception | None) -> bool:
        """A read failed with `e` or met EOF (None): False when stop() caused it (the caller then
        returns False), otherwise the connection is lost."""
        if self._stopped:
            return False
        if e is None:
            raise TransientError("binlog connection lost: the server closed the connection", "reconnecting")
        raise TransientError(f"binlog connection lost: {e}", "reconnecting") from None

    def _read_into(self, mv: memoryview) -> bool:
        """Fill `mv` from the read buffer, then straight from the socket (no intermediate
        copies); False when the stream was stopped."""
        assert self.conn is not None and self.conn._rfile is not None
        buf, p = self._buf, self._p
        got = min(len(buf) - p, len(mv))
        if got:
            mv[:got] = buf[p : p + got]
            self._p = p + got
        readinto = self.conn._rfile.readinto
        while got < len(mv):
            try:
                n = readinto(mv[got:])
            except (OSError, ValueError) as e:
                return self._lost(e)
            if not n:
                return self._lost(None)
            got += n
        return True

    def _large_packet(self, plen: int) -> tuple[bytearray, int, int] | None:
        """An event of `plen` >= LARGE_PACKET bytes (with its continuation packets when it is
        longer than one packet) read into one bytearray of its size: a 10 MB row costs its size
        once here, not a list of reads plus their join. The caller's packet header is consumed."""
        self._p += 4
        total = plen
        if plen == MAX_PACKET:  # the event's own header says how long all its packets are
            if not self._fill(14):
                return None
            buf, p = self._buf, self._p
            if buf[p] == 0:
                total = 1 + int.from_bytes(buf[p + 10 : p + 14], "little")
        data = bytearray(max(total, plen))
        got = 0
        with memoryview(data) as mv:
            while True:
                if got + plen > len(mv):
                    raise TransientError(
                        f"binlog packet framing: {got + plen} bytes for an event of {total}", "reconnecting"
                    )
                if not self._read_into(mv[got : got + plen]):
                    return None
                got += plen
                if plen < MAX_PACKET:
                    break
                if not self._fill(4):
                    return None
                buf, p = self._buf, self._p
                plen = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
                self._p = p + 4
        return data, 0, got

    def _packet(self) -> tuple[bytes | bytearray, int, int] | None:
        """The next packet's payload as (bytes, start, end), reading as needed; an event longer
        than one packet (16 MiB - 1) is joined from its continuation packets. None: stopped."""
        pieces: list[bytes] = []
        while True:
            if not self._fill(4):
                return None
            buf, p = self._buf, self._p
            plen = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            if plen >= LARGE_PACKET and not pieces:
                return self._large_packet(plen)
            if not self._fill(4 + plen):
                return None
            buf, p = self._buf, self._p
            self._p = p + 4 + plen
            if plen < MAX_PACKET and not pieces:
                return buf, p + 4, p + 4 + plen
            pieces.append(buf[p + 4 : p + 4 + plen])
            if plen < MAX_PACKET:
                data = b"".join(pieces)
                return data, 0, len(data)

    def _end_packet(self, data: bytes, s: int, e: int) -> bool:
        """An EOF or error packet in place of an event: True when a non-blocking dump is done,
        otherwise raises what it means."""
        if data[s] == 0xFE and e - s < 9:
            if self.blocking and not self._stopped:
                # A blocking dump never ends by itself: the server is shutting down.
                raise TransientError(
                    "the server ended the binlog stream (shutdown or restart?)", "reconnecting"
                )
            return True
        try:
            pymysql.err.raise_mysql_exception(data[s:e])
        except pymysql.err.OperationalError as err:
            raise stream_error(err, self.config_path) from None
        except pymysql.err.MySQLError as err:
            raise TransientError(f"binlog read failed: {err}", "reconnecting") from None
        return False  # not reached: raise_mysql_exception always raises

    def events(self) -> Iterator[Event]:
        if self.conn is None:
            self.connect()
        header = HEADER.unpack_from
        frm = int.from_bytes
        maps = self._maps
        file = self.file or ""
        trailer = 4 if self.checksum else 0
        rows_ops = ROWS_OPS
        buf, p = self._buf, self._p
        while not self._stopped:
            # Frame the next packet from the buffer (the common case), else read.
            avail = len(buf) - p
            if (
                avail >= 4
                and avail - 4 >= (plen := buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16)
                and plen < MAX_PACKET
            ):
                data, s = buf, p + 4
                e = p = s + plen
                self._p = p
            else:
                self._p = p
                got = self._packet()
                if got is None:
                    return
                data, s, e = got
                buf, p = self._buf, self._p
            if data[s]:  # not an OK packet: EOF (end of a non-blocking dump) or an error
                if self._end_packet(data, s, e):
                    return
                continue
            ts, etype, server_id, size, next_pos, _flags = header(data, s + 1)
            pos = next_pos - size if next_pos else 0
            b = s + 20  # the event body
            be = e - trailer
            if etype in rows_ops:
                entry = maps.get(frm(data[b : b + 6], "little"))
                if entry is None:
                    continue  # its TABLE_MAP was not seen (started mid-transaction)
                tm = entry[2]
                reader = entry[3]
                if reader is None:
                    yield Event(
                        "rows",
                        ts,
                        server_id,
                        file,
                        pos,
                        next_pos,
                        tm.db,
                        tm.table,
                        rows_ops[etype],
                        skipped=True,
                    )
                    continue
                rows = decode_rows(etype, data, b, be, reader)
                if type(data) is bytearray:
                    rows = as_bytes(rows)
                yield Event(
                    "rows",
                    ts,
                    server_id,
                    file,
                    pos,
                    next_pos,
                    tm.db,
                    tm.table,
                    rows_ops[etype],
                    rows,
                    "",
                    0,
                    "",
                    False,
                    False,
                    entry[4],
                )
            elif etype == TABLE_MAP:
                table_id = frm(data[b : b + 6], "little")
                entry = maps.get(table_id)
                tail = data[b + 6 : be]
                if entry is not None and entry[0] == tail and entry[1] == self.tables_version:
                    continue
                tm = parse_table_map(data[b:be])
                resolved = self.resolver(tm.db, tm.table)
                if resolved is None:
                    maps[table_id] = (tail, self.tables_version, tm, None, None)
                else:
                    model_table = resolved[0]
                    maps[table_id] = (
                        tail,
                        self.tables_version,
                        tm,
                        compile_rows(tm, model_table, self.config_path),
                        model_table,
                    )
            elif etype == XID:
                yield Event("xid", ts, server_id, file, pos, next_pos)
            elif etype == MARIA_GTID:
                seq, domain, flags2 = unpack_maria_gtid(data, b)
                yield Event(
                    "gtid",
                    ts,
                    server_id,
                    file,
                    pos,
                    next_pos,
                    "",
                    "",
                    "",
                    [],
                    "",
                    0,
                    f"{domain}-{server_id}-{seq}",
                    bool(flags2 & 1),
                )
            else:
                body = data[b:be]
                if etype == ROTATE:
                    rpos = struct.unpack_from("<Q", body, 0)[0]
                    file = body[8:].decode("utf-8")
                    self.file = file
                    maps.clear()  # table ids are per server run; a rotate may follow a restart
                    yield Event("rotate", ts, server_id, file, rpos, rpos)
                else:
                    ev = self._other(etype, body, ts, server_id, file, pos, next_pos)
                    if ev is not None:
                        yield ev

    def _other(
        self, etype: int, body: bytes, ts: int, server_id: int, file: str, pos: int, next_pos: int
    ) -> Event | None:
        """The less frequent event types (one per DDL statement, heartbeat, session start)."""
        if etype == QUERY:
            thread, _exec, dblen, _err, svlen = struct.unpack_from("<IIBHH", body, 0)
            p = 13 + svlen
            db = body[p : p + dblen].decode("utf-8", "replace")
            query = body[p + dblen + 1 :].decode("utf-8", "replace")
            return Event("query", ts, server_id, file, pos, next_pos, db=db, query=query, thread=thread)
        if etype == GTID:
            sid = body[1:17].hex()
            gno = struct.unpack_from("<q", body, 17)[0]
            uuid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}"
            return Event("gtid", ts, server_id, file, pos, next_pos, gtid=f"{uuid}:{gno}")
        if etype == MARIA_ANNOTATE:
            return Event(
                "annotate", ts, server_id, file, pos, next_pos, query=body.decode("utf-8", "replace")
            )
        if etype == ROWS_QUERY:
            return Event(
                "annotate", ts, server_id, file, pos, next_pos, query=body[1:].decode("utf-8", "replace")
            )
        if etype == HEARTBEAT:
            return Event("heartbeat", ts, server_id, file, next_pos, next_pos)
        if etype == FORMAT_DESCRIPTION:
            return Event("format", ts, server_id, file, pos, next_pos)
        if etype == PARTIAL_UPDATE:
            raise TerminalError(
                "the server writes partial JSON updates (binlog_row_value_options=PARTIAL_JSON); "
                "their UPDATE events cannot be decoded",
                "run SET GLOBAL binlog_row_value_options='' (and in the server config) on the server",
            )
        if etype in MARIA_COMPRESSED:
            raise TerminalError(
                "the server writes compressed binlog events (log_bin_compress=ON)",
                "set log_bin_compress=OFF on the MariaDB server",
            )
        if etype == INCIDENT:
            log.warning("binlog INCIDENT event at %s:%s: the server reports lost changes", file, pos)
        return None
