"""Storage faults: an unwritable warehouse, Delta table or jsonl path is a terminal error named
with its path (refused before the source connects where it can be known), and a jsonl file cut
mid-line by a killed process is repaired at the next start."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from cdc import popen_cli, run_cli
from harness import wait_until
from pgcdc import write_config

from connectors.api import Batch, Record, TerminalError, TransientError
from connectors.sinks.jsonl import JsonLinesSink
from connectors.state.storage import check_file_writable, check_writable, storage_error


@contextlib.contextmanager
def tmpfs(path: Path, *, read_only: bool) -> Iterator[Path]:
    """A private tmpfs mounted at `path` (the suite runs as root, as CI does)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = "ro,size=64m" if read_only else "size=64m"
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tidemark-test", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, f"mount failed (the suite needs root): {proc.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True)


# --------------------------------------------------------------------------- classification
def test_delta_rs_errors_of_an_unwritable_location_are_terminal(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    table = pa.table({"a": [1]})
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        for uri in (ro / "wh" / "t", ro):
            with pytest.raises(Exception) as info:
                write_deltalake(str(uri), table, mode="append")
            err = storage_error(info.value, uri, "the Delta change log")
            assert isinstance(err, TerminalError), info.value
            assert str(uri) in err.message and "Read-only file system" in err.message
            assert "writable" in (err.hint or "")
    with pytest.raises(Exception) as info:
        write_deltalake("/etc/hostname/wh", table, mode="append")
    assert isinstance(storage_error(info.value, "/etc/hostname/wh", "x"), TerminalError)
    # Faults that can pass are retried.
    assert isinstance(
        storage_error(OSError(104, "Connection reset by peer"), "s3://b/t", "x"), TransientError
    )
    assert isinstance(
        storage_error(Exception("Client error with status 503: Slow Down"), "s3://b/t", "x"), TransientError
    )
    assert isinstance(
        storage_error(Exception("Client error with status 403 Forbidden: AccessDenied"), "s3://b/t", "x"),
        TerminalError,
    )


def test_preflight_checks_name_the_path(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        with pytest.raises(
            TerminalError, match=rf"the warehouse {ro}/wh is not writable: Read-only file system"
        ):
            check_writable(ro / "wh", "the warehouse")
        with pytest.raises(TerminalError, match="Read-only file system"):
            check_file_writable(ro / "events.jsonl", "the jsonl output")
    with pytest.raises(TerminalError, match="Not a directory"):
        check_file_writable("/etc/hostname/events.jsonl", "the jsonl output")
    with pytest.raises(TerminalError, match="Is a directory"):
        check_file_writable(tmp_path, "the jsonl output")
    check_writable(tmp_path / "new" / "wh", "the warehouse")  # created when missing
    assert (tmp_path / "new" / "wh").is_dir() and not list((tmp_path / "new" / "wh").iterdir())


# --------------------------------------------------------------------------- jsonl repair
def _batch(ids: list[int]) -> Batch:
    return Batch([Record("t", {"id": i}, {"id": i}) for i in ids], {"n": ids[-1]})


def test_jsonl_sink_cuts_an_unfinished_last_line_at_start(tmp_path: Path, caplog: Any) -> None:
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, key_schemas_enable=False, value_schemas_enable=False)
    sink.write(_batch([1, 2]))
    sink.close()
    whole = path.read_bytes()
    # What a SIGKILL in the middle of a write leaves: a record cut mid-way, no newline.
    path.write_bytes(whole + b'{"topic":"t","key":{"id":3},"val')
    with caplog.at_level("WARNING"):
        sink = JsonLinesSink(path, key_schemas_enable=False, value_schemas_enable=False)
    assert "removing 32 bytes of an unfinished last line" in caplog.text
    sink.write(_batch([3]))
    sink.close()
    assert [orjson.loads(line)["key"]["id"] for line in path.read_bytes().splitlines()] == [1, 2, 3]
    # A whole file is left as it is; a file holding only a partial line is emptied.
    JsonLinesSink(path).close()
    assert path.read_bytes().count(b"\n") == 3
    path.write_bytes(b'{"topic":"t"' * 10_000)  # longer than one read-back chunk
    JsonLinesSink(path).close()
    assert path.read_bytes() == b""


# --------------------------------------------------------------------------- end to end
def _slots(pg: Any) -> list[str]:
    return [r[0] for r in pg.query("SELECT slot_name FROM pg_replication_slots")]


def test_unwritable_warehouse_is_refused_before_the_slot_is_created(
    pg: Any, unique_name: Any, tmp_path: Path
) -> None:
    slot = unique_name("slot")
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        for sinks, extra in (("jsonl", {}), ("delta", {})):
            cfg = write_config(
                tmp_path / f"{sinks}.properties",
                pg,
                slot=slot,
                sinks=sinks,
                jsonl=tmp_path / "out.jsonl",
                warehouse=ro / "wh",
                **extra,
            )
            started = time.monotonic()
            proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
            assert proc.returncode == 1, proc.stderr
            assert f"{ro}/wh" in proc.stderr and "Read-only file system" in proc.stderr, proc.stderr
            assert "hint: make" in proc.stderr and "retrying" not in proc.stderr, proc.stderr
            assert time.monotonic() - started < 30
    # an unwritable jsonl path is refused the same way (it was an "unexpected FileNotFoundError")
    cfg = write_config(
        tmp_path / "j.properties", pg, slot=slot, sinks="jsonl", jsonl=Path("/etc/hostname/out.jsonl")
    )
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    assert (
        proc.returncode == 1 and "/etc/hostname/out.jsonl is not writable: Not a directory" in proc.stderr
    ), proc.stderr
    assert "unexpected" not in proc.stderr
    assert slot not in _slots(pg)  # nothing was set up on the server


@pytest.mark.parametrize("sinks", ["delta", "jsonl"])
def test_a_warehouse_that_turns_read_only_stops_the_connector(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path, sinks: str
) -> None:
    slot = unique_name("slot")
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)", dbname=pg_database)
    with tmpfs(tmp_path / "fs", read_only=False) as fs:
        # jsonl: the warehouse holds the offset table (the output file stays outside: an open
        # file would keep the file system from being remounted).
        out = tmp_path / "out.jsonl"
        cfg = write_config(
            tmp_path / "c.properties",
            pg,
            slot=slot,
            sinks=sinks,
            jsonl=out,
            warehouse=fs / "wh",
            dbname=pg_database,
        )
        log = tmp_path / "run.log"
        proc = popen_cli("run", "--config", str(cfg), log=log)
        try:
            wait_until(
                lambda: pg.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)),
                timeout=60,
                what="the connector's slot",
                on_timeout=log.read_text,
            )
            pg.execute("INSERT INTO t VALUES (1)", dbname=pg_database)
            # jsonl: the offset table's first save; delta: the change log's first commit.
            first = ("_state/offsets" if sinks == "jsonl" else "tm/changelog") + "/_delta_log"
            wait_until(
                lambda: (fs / "wh" / first).exists(),
                timeout=60,
                what=f"{first} to be written",
                on_timeout=log.read_text,
            )
            remount(fs, "ro")
            pg.execute("INSERT INTO t VALUES (2)", dbname=pg_database)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = log.read_text()
        assert code == 1, err
        assert "Read-only file system" in err and str(fs) in err and "tidemark: error:" in err, err
        assert "retrying" not in err, err
    pg.execute(f"SELECT pg_drop_replication_slot('{slot}')", dbname=pg_database)


# --------------------------------------------------------------------------- object store
def test_delta_change_log_on_an_object_store(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path, azurite: Any
) -> None:
    """The Delta sink writes to an object store (Azurite, signed requests); refused credentials
    are a terminal error at start, before the slot exists, and the key never shows."""
    from deltalake import DeltaTable

    container = azurite.create_container(unique_name("lake").replace("_", "-"))
    uri = f"az://{container}/tm/changelog"
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)", dbname=pg_database)
    pg.execute("INSERT INTO t VALUES (0)", dbname=pg_database)
    slot = unique_name("slot")

    def config(key: str) -> Path:
        opts = {f"debezium.sink.delta.storage.{k}": v for k, v in azurite.storage_options(key).items()}
        return write_config(
            tmp_path / "c.properties",
            pg,
            slot=slot,
            sinks="delta",
            dbname=pg_database,
            warehouse=tmp_path / "wh",
            **{"debezium.sink.delta.table.path": uri, **opts},
        )

    wrong_key = "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudHMtb3duLWtleS1hdC1hbGwtMTIzNDU2Nzg5MA=="
    proc = run_cli("run", "--config", str(config(wrong_key)), "--until-caught-up", check=False, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert f"the Delta change log {uri}" in proc.stderr and "403" in proc.stderr, proc.stderr
    assert "AuthorizationFailure" in proc.stderr and "check the object-store credentials" in proc.stderr
    assert wrong_key not in proc.stderr and "retrying" not in proc.stderr
    assert slot not in _slots(pg)

    # with the right key the connector streams into the container
    cfg = config(azurite.storage_options()["azure_storage_account_key"])
    proc = popen_cli("run", "--config", str(cfg), log=tmp_path / "run.log")
    try:
        wait_until(
            lambda: pg.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)),
            timeout=60,
            what="the connector's slot",
            on_timeout=(tmp_path / "run.log").read_text,
        )

        def rows() -> int:
            if not DeltaTable.is_deltatable(uri, storage_options=azurite.storage_options()):
                return 0
            return (
                DeltaTable(uri, storage_options=azurite.storage_options())
                .to_pyarrow_table(columns=["op"])
                .num_rows
            )

        # One commit after another (the first creates the table): Azurite 3.35 let a table
        # take two commits and refused the third ("Invalid table version: 1").
        for n in range(1, 5):
            pg.execute(f"INSERT INTO t VALUES ({n})", dbname=pg_database)
            wait_until(lambda: rows() == n, timeout=60, what=f"{n} rows in the object-store change log")  # noqa: B023
        assert DeltaTable(uri, storage_options=azurite.storage_options()).version() >= 3
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    pg.execute(f"SELECT pg_drop_replication_slot('{slot}')", dbname=pg_database)
