"""Small value types and Protocols shared by the engine, sources and sinks.

No heavy imports here: this module must import without Spark, Airflow or any driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any, Protocol, runtime_checkable


# --------------------------------------------------------------------------- errors
class TidemarkError(Exception):
    """Base error. `hint` says what the user should do; `transient` marks retryable faults."""

    transient: bool = False

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class TerminalError(TidemarkError):
    """Retrying will not help: configuration or server set-up must change first."""


class TransientError(TidemarkError):
    """A passing fault (dropped connection, broker restart): retry with capped backoff."""

    transient = True


class ConfigError(TerminalError):
    """Invalid configuration, refused before anything connects."""


# --------------------------------------------------------------------------- positions
_LSN_RE = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


@total_ordering
@dataclass(frozen=True, slots=True)
class Lsn:
    """A PostgreSQL WAL position (64-bit). Text form is PostgreSQL's `XXXXXXXX/XXXXXXXX`."""

    value: int

    @classmethod
    def parse(cls, text: str | int) -> "Lsn":
        if isinstance(text, int):
            return cls(text)
        m = _LSN_RE.match(text.strip())
        if not m:
            if text.strip().isdigit():
                return cls(int(text))
            raise ValueError(f"not an LSN: {text!r} (expected e.g. 16/B374D848)")
        return cls((int(m.group(1), 16) << 32) | int(m.group(2), 16))

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"

    def __int__(self) -> int:
        return self.value

    def __lt__(self, other: "Lsn") -> bool:
        return self.value < other.value


@total_ordering
@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A MySQL/MariaDB binlog coordinate: file name plus byte offset. Orders by (file index, pos)."""

    file: str
    pos: int

    @classmethod
    def parse(cls, text: str) -> "BinlogPosition":
        name, sep, pos = text.rpartition(":")
        if not sep or not name or not pos.isdigit():
            raise ValueError(f"not a binlog position: {text!r} (expected e.g. mysql-bin.000003:154)")
        return cls(name, int(pos))

    def _key(self) -> tuple[str, int, int]:
        stem, _, idx = self.file.rpartition(".")
        return (stem, int(idx) if idx.isdigit() else -1, self.pos)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"

    def __lt__(self, other: "BinlogPosition") -> bool:
        return self._key() < other._key()


@dataclass(frozen=True, slots=True)
class GtidSet:
    """A GTID set in MySQL form (`uuid:1-5:7,uuid2:1-3`) or MariaDB form (`0-1-100,1-2-7`).

    MySQL sets are interval sets per server UUID; MariaDB sets hold one (domain, server, seq)
    per domain. `contains` is the partial order used to compare positions.
    """

    mysql: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    mariadb: tuple[tuple[int, int, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> "GtidSet":
        text = text.strip().replace("\n", "")
        if not text:
            return cls()
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if all(re.fullmatch(r"\d+-\d+-\d+", p) for p in parts):
            doms: dict[int, tuple[int, int, int]] = {}
            for p in parts:
                d, s, n = (int(x) for x in p.split("-"))
                if d not in doms or n > doms[d][2]:  # a state list (one per server): the newest
                    doms[d] = (d, s, n)
            return cls(mariadb=tuple(sorted(doms.values())))
        sets: dict[str, list[tuple[int, int]]] = {}
        for p in parts:
            uuid, *ivals = p.split(":")
            if not re.fullmatch(r"[0-9a-fA-F-]{36}", uuid) or not ivals:
                raise ValueError(f"not a GTID set: {text!r}")
            for iv in ivals:
                lo, _, hi = iv.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise ValueError(f"not a GTID set: {text!r}")
                sets.setdefault(uuid.lower(), []).append((int(lo), int(hi or lo)))
        return cls(mysql=tuple((u, _merge(iv)) for u, iv in sorted(sets.items())))

    def add(self, gtid: str) -> "GtidSet":
        """Return a set that also contains one transaction's GTID."""
        if _MARIADB_GTID(gtid):
            d, s, n = (int(x) for x in gtid.split("-"))
            doms = {x[0]: x for x in self.mariadb}
            doms[d] = (d, s, n)
            return GtidSet(mariadb=tuple(sorted(doms.values())))
        uuid, _, seq = gtid.rpartition(":")
        sets = {u: list(iv) for u, iv in self.mysql}
        sets.setdefault(uuid.lower(), []).append((int(seq), int(seq)))
        return GtidSet(mysql=tuple((u, _merge(iv)) for u, iv in sorted(sets.items())))

    def contains(self, other: "GtidSet") -> bool:
        if (other.mysql and not self.mysql) or (other.mariadb and not self.mariadb):
            return False  # GTIDs of the other form (another server kind) are never contained
        if other.mariadb or self.mariadb:
            mine = {d: n for d, _, n in self.mariadb}
            return all(mine.get(d, -1) >= n for d, _, n in other.mariadb)
        mine2 = dict(self.mysql)
        for u, ivs in other.mysql:
            have = mine2.get(u, ())
            for lo, hi in ivs:
                if not any(a <= lo and hi <= b for a, b in have):
                    return False
        return True

    def __str__(self) -> str:
        if self.mariadb:
            return ",".join(f"{d}-{s}-{n}" for d, s, n in self.mariadb)
        return ",".join(_uuid_text(u, ivs) for u, ivs in self.mysql)


_MARIADB_GTID = re.compile(r"\d+-\d+-\d+").fullmatch


def _uuid_text(uuid: str, ivs: Iterable[tuple[int, int]]) -> str:
    return uuid + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in ivs)


class GtidTracker:
    """A GTID set updated in place one transaction at a time (a binlog reader's executed set).

    `add` is a dict update instead of GtidSet.add's new sorted tuple; the text is rendered only
    when asked for and then cached until the next `add`. After the same additions,
    `str(tracker) == str(GtidSet.parse(start).add(g1).add(g2)...)` — including that adding a
    GTID of the other server kind leaves only that kind, as GtidSet.add does."""

    __slots__ = ("_mariadb", "_mysql", "_text")

    def __init__(self, text: str = "") -> None:
        g = GtidSet.parse(text)
        self._mariadb: dict[int, tuple[int, int, int]] = {x[0]: x for x in g.mariadb}
        self._mysql: dict[str, list[tuple[int, int]]] = {u: list(ivs) for u, ivs in g.mysql}
        self._text: str | None = str(g)

    def add(self, gtid: str) -> None:
        self._text = None
        if _MARIADB_GTID(gtid):
            dom, server, seq = gtid.split("-")
            d = int(dom)
            self._mariadb[d] = (d, int(server), int(seq))
            if self._mysql:
                self._mysql = {}
            return
        uuid, _, seq = gtid.rpartition(":")
        gno = int(seq)
        if self._mariadb:
            self._mariadb = {}
        ivs = self._mysql.setdefault(uuid.lower(), [])
        if ivs and ivs[-1][1] + 1 == gno:  # the next transaction of that server: extend its last interval
            ivs[-1] = (ivs[-1][0], gno)
        else:
            ivs.append((gno, gno))
            ivs[:] = _merge(ivs)

    def freeze(self) -> GtidSet:
        if self._mariadb:
            return GtidSet(mariadb=tuple(sorted(self._mariadb.values())))
        return GtidSet(mysql=tuple((u, tuple(self._mysql[u])) for u in sorted(self._mysql)))

    def __str__(self) -> str:
        text = self._text
        if text is None:
            if len(self._mariadb) == 1:
                for d, s, n in self._mariadb.values():
                    text = f"{d}-{s}-{n}"
            else:
                text = str(self.freeze())
            self._text = text
        assert text is not None
        return text


def _merge(ivals: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(ivals):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


# --------------------------------------------------------------------------- records
@dataclass(slots=True)
class Record:
    """One Kafka record as every sink receives it.

    `key`/`value` are payloads already in Kafka Connect JSON form (bytes base64, decimals
    as base64 unscaled bytes, ...); `value is None` is a tombstone. A part of a payload may be an
    `orjson.Fragment` (JSON text serialized already: an incremental snapshot row's `after`);
    serialize payloads with orjson. `key_schema`/`value_schema`
    are `connectors.format.schema.Schema` objects, shared per table version so serializers can cache
    their JSON by identity. `collection` is the captured table (`schema.table` / `db.table`) or
    None for transaction/heartbeat/message records. `offset` is the source offset of the record.
    """

    topic: str
    key: Any
    value: Any
    key_schema: Any = None
    value_schema: Any = None
    headers: tuple[tuple[str, bytes], ...] = ()
    collection: str | None = None
    offset: Mapping[str, Any] | None = None
    # Total-order position of the source change this record came from (source-defined tuple).
    # The engine uses it to skip records a sink already holds after a crash.
    pos: tuple[int, ...] | None = None
    # A schema change record (MySQL `<topic.prefix>` topic): carries the context headers as
    # data-change records do, though it has no collection.
    schema_change: bool = False
    # The JsonConverter bytes of key and value built ahead, for (key schemas, value schemas)
    # enabled as the first item says: the key's bytes, and the value's as pieces that concatenate
    # to them (an incremental snapshot row: the table's shared head and tail around its `after`).
    # They equal what serializing `key`/`value` gives; whoever changes those must drop this.
    wire: tuple[tuple[bool, bool], bytes | None, tuple[bytes, ...] | None] | None = None

    @property
    def has_context(self) -> bool:
        """Gets the `__debezium.context.*` headers (Debezium 3.6 puts them on data-change and
        schema-change records; not on transaction, message or heartbeat records)."""
        return self.collection is not None or self.schema_change


@dataclass(slots=True)
class Batch:
    """Records cut at transaction boundaries, plus the source offset that follows them.

    After every sink has made the batch durable, the engine stores `offset` and calls
    `Source.acknowledge(offset)`. `seq` is the engine's monotonically increasing batch number.
    `extra` carries counts for the metrics (`transactions`, `filtered`, `source_ts_ms`) and
    `more`: the source already has the next batch waiting, so the engine may merge this one
    with it into one sink commit; without it the engine commits at once (an idle stream never
    holds a batch). A batch cut inside a large transaction need not say `more` (its offset
    then points inside the transaction).
    """

    records: list[Record]
    offset: dict[str, Any]
    seq: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- capabilities
@runtime_checkable
class Source(Protocol):
    """A change source. `batches()` yields transaction-aligned batches until `stop()` is called
    or (bounded mode) the source has caught up; it must resume strictly after `start_offset`.
    `acknowledge(offset)` tells the server the offset is durable downstream (PG: flush LSN).
    A source whose class sets `acknowledge_thread_safe = True` may be acknowledged from the
    engine's offset-flusher thread while `batches()` runs (it must only record the offset; its
    reading thread tells the server); otherwise the engine acknowledges on its own thread."""

    def open(self, start_offset: dict[str, Any] | None) -> None: ...

    def batches(self) -> Iterator[Batch]: ...

    def acknowledge(self, offset: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """A destination. `write(batch)` returns only when the batch is durable (Kafka: acked with
    acks=all; Delta: committed). A sink that keeps its own offsets (Delta) answers
    `last_offset()` so the engine can resume from it after a crash."""

    name: str

    def write(self, batch: Batch) -> None: ...

    def last_offset(self) -> tuple[int, dict[str, Any]] | None: ...

    def close(self) -> None: ...


@runtime_checkable
class StagedSink(Protocol):
    """A sink whose write has two steps (jsonl: the write, then the fsync). `stage(batch)` hands
    the batch over (to the page cache) and returns the step that makes it durable, or None when
    it already is; `write(batch)` is both. The engine runs batch k's step on a thread of its own
    while it stages batch k+1, and treats batch k as written only once that step has returned."""

    def stage(self, batch: Batch) -> Callable[[], None] | None: ...


@runtime_checkable
class OffsetStore(Protocol):
    """Durable source offsets per connector. `save` is atomic; `load` returns the newest."""

    def load(self) -> tuple[int, dict[str, Any]] | None: ...

    def save(self, seq: int, offset: dict[str, Any]) -> None: ...

    def reset(self) -> None: ...
