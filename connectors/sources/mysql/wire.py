"""The binlog wire format: event and column type codes, packet framing constants, the TABLE_MAP
event, and the bytes of the replication commands (register, dump by position, dump by GTID set).

Bytes only: no socket, no server (`stream.py` reads; `rowdecode.py` decodes row images).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from connectors.api import GtidSet

# event types
QUERY, STOP, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP = 2, 3, 4, 15, 16, 19
WRITE_V1, UPDATE_V1, DELETE_V1 = 23, 24, 25
INCIDENT, HEARTBEAT, ROWS_QUERY = 26, 27, 29
WRITE_V2, UPDATE_V2, DELETE_V2 = 30, 31, 32
GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS, PARTIAL_UPDATE = 33, 34, 35, 39
MARIA_ANNOTATE, MARIA_CHECKPOINT, MARIA_GTID, MARIA_GTID_LIST = 160, 161, 162, 163
MARIA_COMPRESSED = frozenset(range(165, 172))
ROWS_OPS = {WRITE_V1: "c", WRITE_V2: "c", UPDATE_V1: "u", UPDATE_V2: "u", DELETE_V1: "d", DELETE_V2: "d"}

# column types (MySQL field types)
T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_NULL, T_TIMESTAMP = 0, 1, 2, 3, 4, 5, 6, 7
T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR, T_NEWDATE, T_VARCHAR = 8, 9, 10, 11, 12, 13, 14, 15
T_BIT, T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 16, 17, 18, 19
T_VECTOR, T_JSON, T_NEWDECIMAL, T_ENUM, T_SET = 242, 245, 246, 247, 248
T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_BLOB, T_VAR_STRING, T_STRING, T_GEOMETRY = (
    249,
    250,
    251,
    252,
    253,
    254,
    255,
)

# After the OK byte: timestamp, type, server id, event size, next position, flags.
HEADER = struct.Struct("<IBIIIH")
unpack_maria_gtid = struct.Struct("<QIB").unpack_from  # MariaDB GTID_EVENT body: seq, domain, flags2
MAX_PACKET = 0xFFFFFF  # a packet of this length continues in the next one
CHUNK = 1 << 20  # bytes asked of the socket per read
# A packet this large is read straight into a bytearray of its event's size (no list of reads
# joined, the read buffer not grown).
LARGE_PACKET = CHUNK

# COM_BINLOG_DUMP flags
DUMP_NON_BLOCK = 0x01
DUMP_SEND_ANNOTATE_ROWS = 0x02  # MariaDB: ANNOTATE_ROWS events with the SQL text
DUMP_THROUGH_GTID = 0x04  # MySQL COM_BINLOG_DUMP_GTID: start from the GTID set


def lenenc(buf: bytes, p: int) -> tuple[int, int]:
    """A length-encoded integer at `p`: (value, offset after it)."""
    b = buf[p]
    if b < 251:
        return b, p + 1
    if b == 252:
        return buf[p + 1] | buf[p + 2] << 8, p + 3
    if b == 253:
        return int.from_bytes(buf[p + 1 : p + 4], "little"), p + 4
    return int.from_bytes(buf[p + 1 : p + 9], "little"), p + 9


# --------------------------------------------------------------------------- table map
@dataclass(slots=True)
class TableMap:
    table_id: int
    db: str
    table: str
    types: bytes
    metas: tuple[int, ...]
    raw: bytes  # body bytes from the column count on: equality means "same table layout"


def parse_table_map(body: bytes) -> TableMap:
    table_id = int.from_bytes(body[0:6], "little")
    p = 8
    n = body[p]
    db = body[p + 1 : p + 1 + n].decode("utf-8")
    p += n + 2
    n = body[p]
    table = body[p + 1 : p + 1 + n].decode("utf-8")
    p += n + 2
    start = p
    ncols, p = lenenc(body, p)
    types = body[p : p + ncols]
    p += ncols
    _mlen, p = lenenc(body, p)
    metas = []
    for t in types:
        if t in (T_FLOAT, T_DOUBLE, T_BLOB, T_GEOMETRY, T_JSON, T_TIMESTAMP2, T_DATETIME2, T_TIME2, T_VECTOR):
            metas.append(body[p])
            p += 1
        elif t in (T_VARCHAR, T_VAR_STRING):
            metas.append(body[p] | body[p + 1] << 8)
            p += 2
        elif t in (T_BIT, T_NEWDECIMAL, T_STRING, T_ENUM, T_SET):
            metas.append(body[p] << 8 | body[p + 1])  # big-endian pair
            p += 2
        else:
            metas.append(0)
    return TableMap(table_id, db, table, bytes(types), tuple(metas), body[start:])


# --------------------------------------------------------------------------- commands
def encode_gtid_set(gtids: GtidSet) -> bytes:
    """A MySQL GTID set as COM_BINLOG_DUMP_GTID carries it (little endian): the number of server
    UUIDs (u64); per UUID its 16 bytes, the number of intervals (u64) and each interval as
    (first, last + 1) — the end is exclusive on the wire."""
    out = [struct.pack("<Q", len(gtids.mysql))]
    for uuid, intervals in gtids.mysql:
        out.append(bytes.fromhex(uuid.replace("-", "")) + struct.pack("<Q", len(intervals)))
        out.extend(struct.pack("<QQ", lo, hi + 1) for lo, hi in intervals)
    return b"".join(out)


def register_replica(server_id: int, hostname: str) -> bytes:
    """COM_REGISTER_SLAVE: the connector shows in SHOW SLAVE HOSTS (server-id clash checks)."""
    host = hostname.encode()[:60]
    return (
        bytes([0x15])
        + struct.pack("<I", server_id)
        + bytes([len(host)])
        + host
        + b"\x00\x00"
        + struct.pack("<HII", 0, 0, 0)
    )


def dump_from_position(file: str, pos: int, flags: int, server_id: int) -> bytes:
    """COM_BINLOG_DUMP from file/pos (MariaDB with GTIDs: pos 4 of no file, the GTIDs having been
    set as @slave_connect_state)."""
    return bytes([0x12]) + struct.pack("<IHI", pos, flags, server_id) + file.encode()


def dump_from_gtids(gtids: GtidSet, flags: int, server_id: int) -> bytes:
    """COM_BINLOG_DUMP_GTID (MySQL): no file name, position 4, the executed GTID set."""
    enc = encode_gtid_set(gtids)
    return (
        bytes([0x1E])
        + struct.pack("<HI", flags | DUMP_THROUGH_GTID, server_id)
        + struct.pack("<I", 0)
        + struct.pack("<Q", 4)
        + struct.pack("<I", len(enc))
        + enc
    )
