"""Signal channels (`signal.enabled.channels`).

- `source`: inserts into the table named by `signal.data.collection`, as the stream reads them
  from the log. The engine hands every batch to `SourceChannel.signals(batch)` before the batch
  is written (so the signal is journaled before the batch is acknowledged): an insert (`op: c`)
  whose row has exactly three columns is a signal (id, type, data by position, as Debezium
  reads it). The signal table's changes still go to the sinks like any captured table's.
- `delta`: rows of `<warehouse>/_state/signals` whose `connector` is this connector.
- `file`: `signal.file`, one JSON object `{"id", "type", "data"}` per line; the file is emptied
  once its lines are journaled (Debezium's FileSignalChannel).
- `kafka`: `signal.kafka.topic`, partition 0 ASSIGNED (no consumer-group subscription, as
  Debezium's KafkaSignalChannel); records whose key is not the connector's logical name
  (`topic.prefix`) are skipped; values `{"id", "type", "data": {...}}`. Where reading resumes is
  the journal's last Kafka offset + 1 (earliest when there is none).

Polled channels (`delta`, `file`, `kafka`) implement `poll()`. A delivery that is not a readable
signal (a line that is not JSON) comes back as a record with `problem` set: it is journaled and
reported like any refused signal, once.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Protocol

import orjson

from connectors.api import Batch
from connectors.signals.journal import Journal
from connectors.signals.model import WATERMARK_TYPES, SignalRecord
from connectors.signals.settings import SignalSettings
from connectors.signals.tables import signals_table

log = logging.getLogger(__name__)


class PolledChannel(Protocol):
    name: str

    def poll(self) -> list[SignalRecord]: ...

    def taken(self) -> None:
        """The signals of the last poll are journaled: the channel may forget them."""

    def close(self) -> None: ...


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return orjson.dumps(v).decode()


# --------------------------------------------------------------------------- source
class SourceChannel:
    name = "source"

    def __init__(self, data_collection: str) -> None:
        self.collection = data_collection

    def signals(self, batch: Batch) -> list[SignalRecord]:
        coll = self.collection
        out: list[SignalRecord] = []
        for r in batch.records:
            if r.collection != coll:
                continue
            v = r.value
            if not isinstance(v, dict) or v.get("op") != "c":
                continue  # updates and deletes of signal rows are not signals (insert_delete's
                # close-window delete belongs to the incremental snapshot)
            after = v.get("after") or {}
            pos = (
                r.pos
                if r.pos is not None
                else orjson.dumps(dict(r.offset or {}), option=orjson.OPT_SORT_KEYS)
            )
            key = f"source:{coll}:{','.join(map(str, pos)) if isinstance(pos, tuple) else pos.decode()}"
            values = list(after.values())
            if len(values) != 3:
                problem = (
                    f"a row of the signal table {coll} must have 3 columns (id, type, data), "
                    f"this one has {len(values)}"
                )
                out.append(
                    SignalRecord(str(values[0]) if values else "", "", None, self.name, key, problem=problem)
                )
                continue
            sid, kind, data = values
            if kind in WATERMARK_TYPES:
                continue
            out.append(
                SignalRecord(
                    "" if sid is None else str(sid),
                    "" if kind is None else str(kind),
                    _text(data),
                    self.name,
                    key,
                    offset=dict(r.offset) if r.offset else None,
                )
            )
        return out


# --------------------------------------------------------------------------- delta
class DeltaSignalChannel:
    name = "delta"

    def __init__(self, warehouse: Any, connector: str, journal: Journal) -> None:
        self.table = signals_table(warehouse)
        self.connector = connector
        self.journal = journal
        self._version: int | None = -1

    def poll(self) -> list[SignalRecord]:
        version = self.table.version()
        if version is None or version == self._version:
            return []
        rows = self.table.rows(self.connector, ["id", "type", "data", "created_at"])
        self._version = version
        out = []
        for r in sorted(rows, key=lambda r: r["created_at"]):
            key = f"delta:{r['id']}"
            if not self.journal.seen(key):
                out.append(SignalRecord(r["id"], r["type"], r["data"], self.name, key))
        return out

    def taken(self) -> None:
        pass

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- file
class FileSignalChannel:
    name = "file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._consumed: int | None = None
        log.info("reading signals from %s", self.path.absolute())

    def poll(self) -> list[SignalRecord]:
        self._consumed = None
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return []
        if not raw:
            return []
        self._consumed = len(raw)
        out: list[SignalRecord] = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            digest = hashlib.sha1(line).hexdigest()[:16]
            try:
                doc = orjson.loads(line)
                if not isinstance(doc, dict):
                    raise ValueError("not a JSON object")
                sid, kind = doc.get("id"), doc.get("type")
                if not isinstance(sid, str | int) or not isinstance(kind, str):
                    raise ValueError('a signal line needs "id" and "type"')
            except (orjson.JSONDecodeError, ValueError) as e:
                shown = line[:200].decode("utf-8", "replace")
                problem = f"skipped signal line {shown!r}: {e}"
                out.append(SignalRecord("", "", None, self.name, f"file:bad:{digest}", problem=problem))
                continue
            out.append(
                SignalRecord(str(sid), kind, _text(doc.get("data")), self.name, f"file:{sid}:{digest}")
            )
        return out

    def taken(self) -> None:
        """Empty the file, unless a writer appended since it was read (the new lines are read
        on the next poll; the lines read now are journaled and skipped then)."""
        if self._consumed is None:
            return
        try:
            with self.path.open("r+b") as f:
                f.seek(0, 2)
                if f.tell() == self._consumed:
                    f.truncate(0)
        except FileNotFoundError:
            pass
        self._consumed = None

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- kafka
class KafkaSignalChannel:
    name = "kafka"

    def __init__(self, settings: SignalSettings, connector_name: str, journal: Journal) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.topic = settings.kafka_topic
        self.connector_name = connector_name
        self.timeout = settings.kafka_poll_timeout_s
        conf: dict[str, Any] = {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": settings.kafka_group_id,
            "enable.auto.commit": False,  # the journal keeps the position
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
        conf.update(settings.kafka_consumer)
        self._consumer = Consumer(conf)
        self._prefix = f"kafka:{self.topic}:0:"
        last = journal.last_channel_offset(self.name, self._prefix)
        start = OFFSET_BEGINNING if last is None else last + 1
        log.info("reading signals from Kafka topic %s partition 0 from offset %s", self.topic, start)
        self._consumer.assign([TopicPartition(self.topic, 0, start)])

    def poll(self) -> list[SignalRecord]:
        msgs = self._consumer.consume(num_messages=100, timeout=self.timeout)
        out: list[SignalRecord] = []
        for m in msgs:
            if m.error():
                log.warning("signal topic %s: %s", self.topic, m.error())
                continue
            key = (m.key() or b"").decode("utf-8", "replace")
            if key != self.connector_name:
                log.info("signal key '%s' doesn't match the connector's name '%s'", key, self.connector_name)
                continue
            value = m.value()
            if not value:
                continue
            offset = int(m.offset() or 0)
            try:
                doc = orjson.loads(value)
                if not isinstance(doc, dict):
                    raise ValueError("not a JSON object")
            except (orjson.JSONDecodeError, ValueError) as e:
                shown = value[:200].decode("utf-8", "replace")
                problem = f"skipped signal record at offset {offset} {shown!r}: {e}"
                key = f"{self._prefix}{offset}"
                out.append(SignalRecord("", "", None, self.name, key, channel_offset=offset, problem=problem))
                continue
            data = doc.get("data")
            out.append(
                SignalRecord(
                    str(doc.get("id") or ""),
                    str(doc.get("type") or ""),
                    _text(data),
                    self.name,
                    f"{self._prefix}{offset}",
                    channel_offset=offset,
                )
            )
        return out

    def taken(self) -> None:
        pass

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception as e:  # noqa: BLE001 - closing must not mask a stop
            log.warning("closing the signal topic consumer: %s", e)
