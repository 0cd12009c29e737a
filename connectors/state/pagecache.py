"""Dropping written file pages from the page cache once they are on disk.

Tidemark's append-only local outputs (the jsonl sink, the snapshot job's jsonl file, staged
incremental-snapshot chunks) are written once and not read back by the process that wrote them
(a staged chunk only after a restart). Kept in the page cache, gigabytes of them crowd out pages
that are read again, and every write copies into freshly allocated cache pages. On the 2-core
VMs this project runs on (the kernel reclaims idle memory proactively), that copy was most of
the jsonl sink's CPU: 5.9 GB appended in 14 MB writes, each fsynced, took 7.6-10.1 s of system
time, and 1.6-1.7 s when each synced range was dropped (`tests/test_pagecache.py` names the
measurement). A reader tailing such a file reads the dropped pages from disk.
"""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def drop_cached(fd: int, start: int = 0, end: int | None = None) -> None:
    """Advise the kernel to drop `fd`'s cached pages of bytes [start, end) (None: to the end of
    the file). Only for bytes already synced: dirty pages are written back, not dropped. The
    page holding `start` is included (the last call's partial page was completed since)."""
    if not hasattr(os, "posix_fadvise"):
        return
    if end is not None and end <= start:
        return  # (nothing written: a length of 0 would mean to the end of the file)
    start -= start % _PAGE
    length = 0 if end is None else end - start
    try:
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
    except OSError:  # advice only: a file system that refuses it keeps its pages cached
        pass
