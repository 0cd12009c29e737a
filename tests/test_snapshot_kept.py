"""Clients a snapshot task thread keeps from chunk to chunk (`connectors.snapshot.kept`): one per
thread and key, replaced when the key changes, closed when a chunk using it fails."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

from connectors.snapshot.chunks import Chunk
from connectors.snapshot.kept import Kept
from connectors.snapshot.rows import ChunkContext, changelog_rows
from spark_jobs import snapshot_tasks
from spark_jobs.snapshot_tasks import ChunkSpec, write_chunk


class Client:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False


def close(c: Client) -> None:
    c.closed = True


def test_one_client_per_thread_and_key() -> None:
    kept: Kept[Client] = Kept(close)
    a = kept.get("k1", lambda: Client("a"))
    assert kept.get("k1", lambda: Client("unused")) is a
    other: list[Client] = []
    t = threading.Thread(target=lambda: other.append(kept.get("k1", lambda: Client("b"))))
    t.start()
    t.join()
    assert other[0].name == "b" and other[0] is not a  # another thread never shares it
    b = kept.get("k2", lambda: Client("c"))  # another key (snapshot, configuration)
    assert a.closed and not b.closed and b.name == "c"
    kept.drop()
    assert b.closed
    assert kept.get("k2", lambda: Client("d")).name == "d"  # a dropped client is made again


def test_drop_all_closes_every_client_of_the_calling_thread_only() -> None:
    """What the driver thread that read chunks while Spark started runs after its last one."""
    readers: Kept[Client] = Kept(close)
    producers: Kept[Client] = Kept(close)
    mine = [readers.get("snap", lambda: Client("reader")), producers.get("conf", lambda: Client("producer"))]
    theirs: list[Client] = []

    def lead_thread() -> None:
        theirs.extend(
            [readers.get("snap", lambda: Client("r2")), producers.get("conf", lambda: Client("p2"))]
        )
        Kept.drop_all()

    t = threading.Thread(target=lead_thread)
    t.start()
    t.join()
    assert all(c.closed for c in theirs) and not any(c.closed for c in mine)
    assert readers.get("snap", lambda: Client("unused")) is mine[0]
    Kept.drop_all()
    assert all(c.closed for c in mine)


def test_a_client_that_fails_to_close_is_still_forgotten() -> None:
    def bad_close(c: Client) -> None:
        raise OSError("connection already broken")

    kept: Kept[Client] = Kept(bad_close)
    kept.get("k", lambda: Client("a"))
    kept.drop()  # no error: the failure that made us drop it was the one to report
    assert kept.get("k", lambda: Client("b")).name == "b"


def _pieces(topic: str, chunk: Chunk, ids: range, fail: bool = False) -> Any:
    ctx = ChunkContext(
        topic, "public.t", b'{"type":"struct"}', b'{"type":"struct"}', lambda m: {"snapshot": m}, ()
    )
    after = pa.array([f'{{"id":{i}}}' for i in ids])
    key = pa.array([f'{{"id":{i}}}' for i in ids])
    yield changelog_rows(chunk, ctx, key, after)
    if fail:
        raise RuntimeError("the chunk's read failed")


def test_a_task_thread_keeps_its_producer_and_drops_it_when_a_chunk_fails(
    kafka: Any, unique_name: Any
) -> None:
    topic = unique_name("kept")
    raw = {
        "connector.class": "postgres",
        "topic.prefix": "kept",
        "database.hostname": "localhost",
        "database.user": "u",
        "database.dbname": "postgres",
        "debezium.sink.type": "kafka",
        "debezium.sink.kafka.producer.bootstrap.servers": kafka.bootstrap,
    }

    def spec(i: int) -> ChunkSpec:
        return ChunkSpec(raw, Chunk("public.t", i, None, None), "s" * 32, "snap", {}, (), ("kafka",))

    def held() -> Any:
        return snapshot_tasks._PRODUCER._local.held[1]

    res = write_chunk(spec(0), _pieces(topic, spec(0).chunk, range(0, 3)))
    first = held()
    res2 = write_chunk(spec(1), _pieces(topic, spec(1).chunk, range(3, 6)))
    assert (res.rows, res2.rows) == (3, 3)
    assert held() is first  # the second chunk reused the producer
    with pytest.raises(RuntimeError, match="read failed"):
        write_chunk(spec(2), _pieces(topic, spec(2).chunk, range(6, 9), fail=True))
    assert snapshot_tasks._PRODUCER._local.held is None  # closed with the failed chunk
    write_chunk(spec(3), _pieces(topic, spec(3).chunk, range(9, 12)))
    assert held() is not first
    snapshot_tasks._PRODUCER.drop()
    keys = {k for k, _, _ in kafka.read_all(topic, min_count=9)}
    # every record of a completed chunk is there; the failed chunk is read again by its retry
    assert {
        b'{"schema":{"type":"struct"},"payload":{"id":%d}}' % i for i in [*range(6), *range(9, 12)]
    } <= keys
