"""The `tidemark` command line as a user runs it: error reporting and exit codes, bounded runs,
signals, metrics, stdout output and the demo (subprocesses against real private servers)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pgcdc import ROOT, TIDEMARK

PG_KEYS = """\
debezium.source.connector.class=postgres
debezium.source.database.hostname=127.0.0.1
debezium.source.database.user=cdc
debezium.source.database.dbname=shop
debezium.source.topic.prefix=tm
debezium.source.snapshot.mode=no_data
"""


def cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDEMARK, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def assert_one_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """Exit `code`, one `tidemark: error:` line plus its hint on stderr, no traceback."""
    assert proc.returncode == code, proc.stderr
    err = proc.stderr
    assert "Traceback" not in err and "pthread" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("tidemark: error: "), err
    assert lines[-1].startswith("  hint: "), err
    for needle in needles:
        assert needle in err, err


# --------------------------------------------------------------------------- errors and exit codes
def test_missing_or_unreadable_config_exits_2(tmp_path: Path) -> None:
    for args in (("run",), ("offsets", "show"), ("offsets", "reset", "--yes")):
        proc = cli(*args, "--config", str(tmp_path / "nope.properties"))
        assert_one_error(proc, 2, f"cannot read configuration file {tmp_path / 'nope.properties'}")
    assert_one_error(cli("run", "--config", str(tmp_path)), 2, "Is a directory")


def test_offsets_commands_report_storage_errors_in_one_line(tmp_path: Path) -> None:
    # A damaged offsets table: deltalake raises its own error (with a Rust backtrace when
    # RUST_BACKTRACE is set); the user gets one line and a hint, exit 1.
    log = tmp_path / "wh" / "_state" / "offsets" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("not json{\n")
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + f"debezium.sink.type=delta\ntidemark.warehouse={tmp_path / 'wh'}\n")
    for args in (("offsets", "show"), ("offsets", "reset", "--yes")):
        proc = cli(*args, "--config", str(cfg), RUST_BACKTRACE="1")
        assert_one_error(proc, 1, "unexpected DeltaError: ", "--log-level DEBUG")
        assert len(proc.stderr.strip().splitlines()) == 2, proc.stderr


def test_config_error_found_after_load_exits_2(tmp_path: Path) -> None:
    # librdkafka refuses the producer setting when the sink is built, after config.load: still
    # invalid configuration, so exit 2 as for any other.
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + "debezium.sink.type=kafka\n"
                   "debezium.sink.kafka.producer.bootstrap.servers=127.0.0.1:1\n"
                   "debezium.sink.kafka.producer.no.such.setting=1\n"
                   f"tidemark.warehouse={tmp_path / 'wh'}\n")
    assert_one_error(cli("run", "--config", str(cfg), "--max-seconds", "5"), 2,
                     'invalid Kafka producer setting: No such configuration property: "no.such.setting"')


def test_invalid_config_lists_problems_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + "debezium.sink.type=jsonl\ndebezium.sink.jsonl.path=-\n"
                   "debezium.source.skipped.operations=update\n")
    proc = cli("run", "--config", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "skipped.operations=update: update is not one of c, u, d, t, r, none" in proc.stderr


# --------------------------------------------------------------------------- leaving the process
FINALIZE_PROBE = """
import sys
from connectors import cli

class Probe:
    def __del__(self):
        sys.stderr.write("interpreter finalization ran\\n")

cli.probe = Probe()  # module globals are cleared (and __del__ runs) only in Py_FinalizeEx
sys.argv = ["tidemark", *sys.argv[1:]]
cli.main()
"""


def test_cli_leaves_without_interpreter_finalization(tmp_path: Path) -> None:
    # pyarrow I/O threads of a Delta scan can still hold Python buffers when the command is
    # done; if they release them during interpreter finalization the process aborts (SIGABRT,
    # "terminate called without an active exception"). The CLI therefore ends with os._exit
    # after its atexit handlers: finalization never runs, output is flushed, the code is kept.
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + f"debezium.sink.type=delta\ntidemark.warehouse={tmp_path / 'wh'}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([TIDEMARK[0], "-c", FINALIZE_PROBE, "offsets", "show", "--config", str(cfg)],
                        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert ok.returncode == 0, ok.stderr
    assert '"connector": "tm"' in ok.stdout  # stdout flushed before leaving
    assert "interpreter finalization ran" not in ok.stderr
    bad = subprocess.run([TIDEMARK[0], "-c", FINALIZE_PROBE, "run", "--config", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert bad.returncode == 2 and "interpreter finalization ran" not in bad.stderr
