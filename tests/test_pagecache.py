"""Synced output leaves the page cache (`connectors/state/pagecache.py`).

Why: on this project's VMs, appending into fresh page-cache pages cost the jsonl sink most of its
CPU. Measured 2026-11-25 with a scratch loop (400 appends of 14 MB, each fsynced, to a file under
/work): 7.6-10.1 s of system time keeping the pages, 1.6-1.7 s dropping each synced range. The
tests check what the page cache holds with mincore(2), so they fail if the drop stops happening.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from connectors.api import Batch, Record
from connectors.state.pagecache import drop_cached

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="mincore(2) and fadvise are Linux's")

PAGE = mmap.PAGESIZE


def resident_pages(path: Path) -> int:
    """How many of the file's pages the page cache holds (mincore on a mapping that is never
    touched, so the check itself faults nothing in)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            return sum(b & 1 for b in vec.raw)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def test_drop_cached_drops_synced_pages_only_in_range(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with open(path, "wb") as f:
        # two appends, as a sink makes them (the cache may hold a write in large folios, which
        # the kernel drops whole: the ranges below are whole appends)
        for _ in range(2):
            f.write(os.urandom(256 * PAGE))
            f.flush()
            os.fsync(f.fileno())
        assert resident_pages(path) == 512  # written through the cache, still there
        drop_cached(f.fileno(), 0, 256 * PAGE)
        assert resident_pages(path) == 256  # the first append went, the second stays
        drop_cached(f.fileno(), 256 * PAGE + 10)  # (start inside a page: that page goes too)
        assert resident_pages(path) == 0


def _batch(n: int, width: int) -> Batch:
    records = [
        Record(
            "srv.public.t",
            {"id": i},
            {"op": "c", "after": {"id": i, "pad": "x" * width}},
            collection="public.t",
        )
        for i in range(n)
    ]
    return Batch(records, {"lsn": n}, 0, {})


def test_jsonl_sink_keeps_only_the_files_tail_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from connectors.sinks.jsonl import JsonLinesSink

    monkeypatch.setattr(JsonLinesSink, "CACHED_TAIL", 16 * PAGE)
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, key_schemas_enable=False, value_schemas_enable=False)
    try:
        for _ in range(3):
            sink.write(_batch(200, 3000))  # ~150 pages a write
        pages = (path.stat().st_size + PAGE - 1) // PAGE
        assert pages > 400
        # the tail a reader may still be reading stays; the rest goes but for the large folio the
        # tail starts in (the cache's unit, at most a write's pages here)
        assert 16 <= resident_pages(path) <= 16 + pages // 3
    finally:
        sink.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 600 and lines[-1].startswith(b'{"topic":"srv.public.t"')


def test_jsonl_stage_writes_now_and_syncs_in_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stage` puts the batch in the file at once and fsyncs only in the step it returns (the
    engine runs batch k's step while batch k+1 is staged); steps run out of order still drop
    only synced bytes but the tail."""
    from connectors.sinks.jsonl import JsonLinesSink

    monkeypatch.setattr(JsonLinesSink, "CACHED_TAIL", 16 * PAGE)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, key_schemas_enable=False, value_schemas_enable=False)
    try:
        first = sink.stage(_batch(200, 3000))
        assert first is not None and not synced
        assert len(path.read_bytes().splitlines()) == 200
        second = sink.stage(_batch(200, 3000))
        assert second is not None and len(path.read_bytes().splitlines()) == 400
        second()
        first()  # (an older step after a newer one: nothing to undo, nothing dropped twice)
        assert len(synced) == 2
        assert sink.stage(Batch([], {"lsn": 0}, 0, {})) is None
        pages = (path.stat().st_size + PAGE - 1) // PAGE
        assert 16 <= resident_pages(path) <= 16 + pages // 2
    finally:
        sink.close()


def _chunk_rows(n: int) -> pa.Table:
    from connectors.snapshot.incremental_staging import ROWS

    return pa.table(
        {
            "kind": ["row"] * n,
            "ord": pa.array(range(n), pa.int32()),
            "key": [f'{{"id":{i}}}' for i in range(n)],
            # incompressible: the file spans many pages
            "after": [os.urandom(600).hex() for _ in range(n)],
            "dedup": [f'{{"id":{i}}}' for i in range(n)],
            "meta": pa.array([None] * n, pa.string()),
        },
        schema=ROWS,
    )


def test_staged_chunk_file_is_not_kept_cached(tmp_path: Path) -> None:
    from connectors.snapshot.incremental_files import ChunkFiles

    files = ChunkFiles(tmp_path / "chunks", "conn")
    n = 2000
    files.write("snap-1", _chunk_rows(n))
    (staged,) = [p for p in (tmp_path / "chunks" / "conn").iterdir() if p.suffix == ".arrow"]
    assert staged.stat().st_size > 100 * PAGE
    assert resident_pages(staged) == 0
    assert files.load("snap-1", ["ord", "after"]).num_rows == n  # and it reads back whole


def test_unsynced_chunk_files_skip_fsync_and_leave_the_cache_a_few_writes_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread reader's chunk files (`durable=False`) are never fsynced (the engine does not
    wait for them); their pages, dirty at the write, are dropped `DROP_BEHIND` writes later."""
    from connectors.snapshot import incremental_files
    from connectors.snapshot.incremental_files import DROP_BEHIND, ChunkFiles

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(incremental_files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    files = ChunkFiles(tmp_path / "chunks", "conn")
    files.write("snap-0", _chunk_rows(50))
    assert len(synced) == 2  # durable (the default): the file, then its directory
    synced.clear()
    files.write("snap-1", _chunk_rows(2000), durable=False)
    assert synced == []
    first = files.dir / "snap-1.arrow"
    assert first.stat().st_size > 100 * PAGE
    os.sync()  # (what the kernel's writeback does by itself a little later)
    for i in range(2, 2 + DROP_BEHIND):
        files.write(f"snap-{i}", _chunk_rows(50), durable=False)
    assert synced == [] and resident_pages(first) == 0
    assert files.load("snap-1", ["ord"]).num_rows == 2000
