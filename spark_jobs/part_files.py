"""Where a snapshot task writes its chunk's Delta data file, which the driver then commits
(`Committer` in snapshot.py): the change log's directory on a local or mounted file system, or
its object-store location (`az://`, `s3://`, `gs://`, ...).

An object store is written through delta-rs's own storage handler (`deltalake.fs`), not a second
client: the task then uses the very options the stream's Delta sink and the driver's commit use
(`debezium.sink.delta.storage.*`), with the same URI schemes and credentials. On a cluster this is
what lets executors on other hosts write where the driver commits; a local path works there only
if it is a file system every host mounts at the same place.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from connectors.api import TerminalError
from connectors.state.storage import is_local, local_path, storage_error

# What a cluster needs of the sinks' storage, in the errors that find it missing.
SHARED_STORAGE_HINT = (
    "on a cluster (tidemark.spark.master other than local[...]) the executors write where the driver "
    "commits: put the Delta change log on an object store (debezium.sink.delta.table.path=s3://..., "
    "az://..., gs://... with debezium.sink.delta.storage.*) or on a file system mounted at the same "
    "path on every host, and the jsonl file in such a directory too; the next start resumes the snapshot"
)


def not_shared(what: str, path: str, writer_host: str, hint: str = SHARED_STORAGE_HINT) -> TerminalError:
    """A file an executor wrote that the driver cannot see: its storage is not shared."""
    return TerminalError(
        f"{what} {path}, written on host {writer_host}, is not there on the driver's host {socket.gethostname()}",
        hint,
    )


def probe_write(path: str) -> str:
    """A Spark task: an empty file at `path` (its directory made as needed); this host's name."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass
    return socket.gethostname()


def check_shared_dir(sc: Any, directory: str, what: str, hint: str) -> None:
    """Stop (`not_shared`) unless what the executors write under `directory` is seen here: one
    empty probe file per task slot, each looked for by the driver, then removed (a probe written
    on a host that does not share the directory stays there: it is empty)."""
    width = max(1, int(sc.defaultParallelism))
    probes = [os.path.join(directory, f".shared-probe-{uuid.uuid4().hex}") for _ in range(width)]
    hosts = sc.parallelize(probes, width).map(probe_write).collect()
    try:
        for path, host in zip(probes, hosts, strict=True):
            if not os.path.exists(path):
                raise not_shared(what, path, host, hint)
    finally:
        for path in probes:
            with contextlib.suppress(OSError):
                os.unlink(path)


@dataclass(frozen=True)
class WrittenFile:
    """What the driver's add action needs of a written file."""

    size: int
    modification_time: int  # ms since the epoch


class PartFiles:
    """The change log's root as a pyarrow file system: paths are relative to the table."""

    def __init__(self, table_uri: str, storage: Mapping[str, str] | None = None) -> None:
        self.uri = table_uri
        self.local = is_local(table_uri)
        if self.local:
            self.fs: pafs.FileSystem = pafs.SubTreeFileSystem(
                str(local_path(table_uri)), pafs.LocalFileSystem()
            )
        else:
            from deltalake.fs import DeltaStorageHandler

            self.fs = pafs.PyFileSystem(DeltaStorageHandler(table_uri, dict(storage) if storage else None))

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """A failed write as the stream's Delta sink reports it: terminal for refused credentials,
        a missing bucket or a read-only file system, transient (the chunk is read again) for a
        network fault; pyarrow and delta-rs's handler raise OSError for both."""
        try:
            yield
        except OSError as e:
            raise storage_error(e, self.uri, "the Delta change log") from None

    def prepare(self, rel: str) -> None:
        """Make `rel`'s directory (an object store has none to make)."""
        if self.local:
            self.fs.create_dir(rel.rpartition("/")[0], recursive=True)

    def written(self, rel: str) -> WrittenFile:
        info = self.fs.get_file_info(rel)
        if info.type != pafs.FileType.File or info.size is None:
            # A store that acknowledged the upload yet does not list it: never commit a file
            # the table would then miss (the chunk fails and is read again).
            raise OSError(f"the data file {rel} is not in the change log's storage after it was written")
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
        return WrittenFile(info.size, mtime)

    def remove(self, rel: str) -> None:
        """Delete a file a failed chunk wrote (never committed); best effort: the chunk's own
        error is what gets reported (delta-rs's handler raises its own types too)."""
        with contextlib.suppress(Exception):
            self.fs.delete_file(rel)


_OPEN: dict[tuple[str, tuple[tuple[str, str], ...]], PartFiles] = {}


def part_files(table_uri: str, storage: Mapping[str, str] | None) -> PartFiles:
    """One `PartFiles` per table and options in a process (a worker writes many chunks: the
    object-store client and its connections are kept)."""
    key = (table_uri, tuple(sorted((storage or {}).items())))
    found = _OPEN.get(key)
    if found is None:
        found = _OPEN[key] = PartFiles(table_uri, storage)
    return found


class DeltaPart:
    """One chunk's data file in the change log: opened with the chunk's first rows, then either
    finished (closed, checked, described for the driver's add action) or removed."""

    def __init__(self, files: PartFiles, rel: str, **options: Any) -> None:
        self.files, self.rel, self.options = files, rel, options  # options: pyarrow's writer's
        self._writer: Any = None

    def write(self, table: Any) -> None:
        import pyarrow.parquet as pq

        with self.files.errors():
            if self._writer is None:
                self.files.prepare(self.rel)
                self._writer = pq.ParquetWriter(
                    self.rel, table.schema, filesystem=self.files.fs, **self.options
                )
            self._writer.write_table(table)

    def finish(self) -> WrittenFile:
        with self.files.errors():
            # An object store's upload completes at close; the file must then be listed.
            self._writer.close()
            self._writer = None
            return self.files.written(self.rel)

    def abort(self) -> None:
        """After a failure: never committed, so not left behind (a crash still may: the driver
        never commits a file it was not told of, and vacuum removes such files)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
        self.files.remove(self.rel)
