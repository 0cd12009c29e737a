"""`tidemark` command line: run a connector, inspect/reset offsets, run the embedded demo."""

from __future__ import annotations

import atexit
import contextlib
import enum
import functools
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import typer

from connectors.api import ConfigError, TerminalError, TidemarkError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Tidemark: change data capture from PostgreSQL and MySQL/MariaDB into Kafka and Delta Lake.",
)
offsets_app = typer.Typer(no_args_is_help=True, help="Inspect or reset a connector's stored offsets.")
app.add_typer(offsets_app, name="offsets")
config_app = typer.Typer(no_args_is_help=True, help="Inspect a connector configuration.")
app.add_typer(config_app, name="config")
signal_app = typer.Typer(
    no_args_is_help=True,
    help="Send a signal to a connector through its Delta signal table (<warehouse>/_state/signals); "
    "the connector must have delta in signal.enabled.channels.",
)
app.add_typer(signal_app, name="signal")

log = logging.getLogger("tidemark")

# The file is checked by config.load, so that a missing or unreadable file gets the same one-line
# error (exit 2) as any other configuration problem.
ConfigOpt = typer.Option(
    ..., "--config", "-c", help="Connector config (.properties or .yaml), Debezium property names"
)


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


def LogLevelOpt(default: str) -> Any:  # noqa: N802 - reads like the typer.Option it returns
    """`--log-level`, one of Python's level names (any case); anything else is a usage error."""
    return typer.Option(LogLevel(default), "--log-level", case_sensitive=False, help="Log level")


def _setup_logging(level: LogLevel | str) -> None:
    name = level.value if isinstance(level, LogLevel) else level.upper()
    logging.basicConfig(
        level=getattr(logging, name, logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    for noisy in ("kafka", "deltalake", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _fail(err: BaseException, code: int = 1) -> None:
    """Print one error line (and its hint) and exit: 2 for invalid configuration, `code` otherwise."""
    if isinstance(err, ConfigError):
        code = 2  # whenever it is found: at load, or when a source or sink reads its settings
    if not isinstance(err, TidemarkError):
        # Not one of ours: say what it was in one line; the traceback goes to the debug log only.
        log.debug("unexpected error", exc_info=err)
        first = next(iter(str(err).splitlines()), "")
        err = TidemarkError(
            f"unexpected {type(err).__name__}: {first}",
            "rerun with --log-level DEBUG for the traceback and report it",
        )
    typer.echo(f"tidemark: error: {_without_backtrace(err.message)}", err=True)
    if err.hint:
        typer.echo(f"  hint: {err.hint}", err=True)
    raise typer.Exit(code)


_FRAME = re.compile(r"\s*\d+: |\s+at \S")


def _without_backtrace(message: str) -> str:
    """The message without a native backtrace that a wrapped error may carry (deltalake's
    errors append Rust frames when RUST_BACKTRACE is set)."""
    lines = message.splitlines()
    cut = next((i for i, line in enumerate(lines) if i and _FRAME.match(line)), len(lines))
    return "\n".join(lines[:cut]).rstrip()


F = TypeVar("F", bound=Callable[..., Any])


def _guarded(command: F) -> F:
    """Route every error a command raises through `_fail`: one line and a hint, never a
    traceback (deltalake, OS and driver errors included). Click's own exits pass through."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as e:
            _fail(e)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps F's signature


@app.command()
@_guarded
def run(
    config: Path = ConfigOpt,
    until_caught_up: bool = typer.Option(
        False, "--until-caught-up", help="Stop once caught up with the server's log position at start"
    ),
    max_seconds: float = typer.Option(0, "--max-seconds", help="Stop after this many seconds (0 = no limit)"),
    metrics_port: int = typer.Option(0, "--metrics-port", help="Serve Prometheus metrics on this port"),
    status_interval: float = typer.Option(
        0,
        "--status-interval",
        help="Write health to <warehouse>/_state/status every this many seconds (0 = off)",
    ),
    log_level: LogLevel = LogLevelOpt("INFO"),
) -> None:
    """Snapshot as snapshot.mode says, then stream changes until SIGTERM/SIGINT (or the
    bounded-mode limit), then stop cleanly."""
    from connectors.app.snapshot_job import needs_job, run_job
    from connectors.engine.loop import close_all
    from connectors.engine.status import StatusReporter
    from connectors.engine.wiring import build_engine
    from connectors.settings.config import load

    _setup_logging(log_level)
    try:
        cfg = load(config)
    except TidemarkError as e:
        _fail(e, 2)
    if needs_job(cfg):
        outcome = run_job(config, log_level.value)
        if not outcome["stream"]:
            log.info("not streaming: %s", outcome["reason"])
            return
    engine = None
    stop_asked: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        # SIGINT (Ctrl-C) and SIGTERM mean the same: finish the batch in flight and exit 0. A
        # signal that arrives while the engine is still being built stops it right after.
        log.info("received %s: finishing the current batch and stopping", signal.Signals(signum).name)
        stop_asked.append(signum)
        if engine is not None:
            engine.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        engine = build_engine(cfg, until_caught_up=until_caught_up, max_seconds=max_seconds or None)
        if stop_asked:
            engine.stop()
        if metrics_port:
            try:
                engine.metrics.serve(metrics_port)
            except OSError as e:
                raise TerminalError(
                    f"--metrics-port {metrics_port}: cannot serve metrics: {e.strerror or e}",
                    "choose a free port",
                ) from None
        status = (
            StatusReporter(cfg.warehouse, cfg.name, engine, status_interval).start()
            if status_interval
            else None
        )
        try:
            stats = engine.run()
        except Exception as e:
            if status is not None:
                status.close(e)
            raise
        if status is not None:
            status.close()
        log.info(
            "stopped: %d records in %d batches, %.1fs; last offset %s",
            stats.records,
            stats.batches,
            stats.seconds,
            stats.last_offset,
        )
    except Exception as e:
        _fail(e)
    finally:
        if engine is not None:
            close_all(engine.sinks)


@app.command()
@_guarded
def snapshot(config: Path = ConfigOpt, log_level: LogLevel = LogLevelOpt("INFO")) -> None:
    """Run only the snapshot snapshot.mode asks for (or resume an unfinished one), then exit:
    what schedulers and the Airflow DAGs run. `tidemark run` does the same before streaming."""
    import orjson

    from connectors.app.snapshot_job import needs_job, run_job
    from connectors.settings.config import load

    _setup_logging(log_level)
    try:
        cfg = load(config)
    except TidemarkError as e:
        _fail(e, 2)
    if not needs_job(cfg):
        typer.echo(f"snapshot.mode={cfg.source.snapshot_mode}: nothing to snapshot")
        return
    outcome = run_job(config, log_level.value)
    typer.echo(orjson.dumps(outcome).decode())


@offsets_app.command("show")
@_guarded
def offsets_show(config: Path = ConfigOpt, log_level: LogLevel = LogLevelOpt("WARNING")) -> None:
    """Print the stored offsets: the offset table's and every self-offsetting sink's."""
    import orjson

    from connectors.settings.config import load
    from connectors.sinks.delta import DeltaChangeLogSink
    from connectors.state.offsets import DeltaOffsetStore

    _setup_logging(log_level)
    try:
        cfg = load(config)
        out: dict[str, Any] = {"connector": cfg.name}
        stored = DeltaOffsetStore(cfg.warehouse, cfg.name).load()
        if stored is not None and stored[1].get("reset"):
            out["offsets"] = {"batch_seq": stored[0], "reset": True}
        elif stored is not None and stored[1].get("seq_only"):  # a snapshot took the seq, no offset yet
            out["offsets"] = {"batch_seq": stored[0], "offset": None}
        else:
            out["offsets"] = None if stored is None else {"batch_seq": stored[0], "offset": stored[1]}
        if "delta" in cfg.sink_types:
            # Only the Delta sink keeps offsets of its own; opening it does not touch Kafka.
            delta = DeltaChangeLogSink.from_config(cfg)
            own = delta.last_offset()
            out["sink.delta"] = None if own is None else {"batch_seq": own[0], "offset": own[1]}
            delta.close()
    except TidemarkError as e:
        _fail(e)
    typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


@offsets_app.command("reset")
@_guarded
def offsets_reset(
    config: Path = ConfigOpt,
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation"),
    log_level: LogLevel = LogLevelOpt("WARNING"),
) -> None:
    """Forget the stored offsets so the next run starts from the slot's/binlog's current position.

    The Delta change log keeps its rows; its app-transaction marker is left, so rows already
    landed are never written twice."""
    from connectors.engine.wiring import reset_offsets
    from connectors.settings.config import load
    from connectors.snapshot.progress import SnapshotProgress

    _setup_logging(log_level)
    try:
        cfg = load(config)
    except TidemarkError as e:
        _fail(e, 2)
    if not yes:
        typer.confirm(f"Reset the offsets of connector {cfg.name!r}?", abort=True)
    try:
        reset_offsets(cfg)
        # ... and the snapshot history: snapshot.mode=initial snapshots again on the next run.
        SnapshotProgress(cfg.warehouse, cfg.name).forget()
    except TidemarkError as e:
        _fail(e)
    typer.echo(
        f"offsets of {cfg.name} reset: the next run starts where the server stands now "
        "(PostgreSQL: the replication slot's confirmed position; MySQL/MariaDB: the current binlog "
        "position, with a fresh schema snapshot)"
    )


@config_app.command("explain")
@_guarded
def config_explain(
    config: Path = ConfigOpt,
    everything: bool = typer.Option(
        False, "--all", help="Every property the catalog knows for this connector"
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON document instead of text"),
    log_level: LogLevel = LogLevelOpt("WARNING"),
) -> None:
    """Print the effective settings: value (secrets masked), whether it comes from the file or is
    the default, what Tidemark does with it, and what it means."""
    import orjson

    from connectors.settings.config import load
    from connectors.settings.explain import as_text, explain

    _setup_logging(log_level)
    try:
        cfg = load(config)
    except TidemarkError as e:
        _fail(e, 2)
    rows = explain(cfg, everything=everything)
    if as_json:
        from connectors.settings.explain import as_json as to_json

        doc = {"connector": cfg.name, "class": cfg.connector, "file": str(config), "settings": to_json(rows)}
        typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(f"# {cfg.name} ({cfg.connector}) from {config}")
        typer.echo(as_text(rows))


# --------------------------------------------------------------------------- signal
@signal_app.callback()
def signal_main(
    ctx: typer.Context, config: Path = ConfigOpt, log_level: LogLevel = LogLevelOpt("WARNING")
) -> None:
    ctx.obj = {"config": config, "log_level": log_level}


def _send_signal(ctx: typer.Context, kind: str, data: dict[str, Any] | None) -> None:
    """Check the signal as the connector will (tables against the database when it answers),
    append it to the Delta signal table and print its id."""
    from connectors.settings.config import load
    from connectors.signals.catalog import TableCatalog
    from connectors.signals.model import EXECUTE_SNAPSHOT, SignalError, SignalRecord, TableInfo, parse
    from connectors.signals.settings import signal_settings
    from connectors.signals.tables import send_delta_signal

    _setup_logging(ctx.obj["log_level"])
    try:
        cfg = load(ctx.obj["config"])
        channels = signal_settings(cfg).channels
    except TidemarkError as e:
        _fail(e, 2)
    if "delta" not in channels:
        _fail(
            ConfigError(
                f"connector {cfg.name} does not read the Delta signal table "
                f"(signal.enabled.channels: {', '.join(channels) or 'none'})",
                f"add delta to {cfg.origin.full_name('signal.enabled.channels')} and restart the connector",
            )
        )
    import orjson

    record = SignalRecord("cli", kind, None if data is None else orjson.dumps(data).decode(), "delta", "cli")
    info = TableCatalog(cfg).info() if kind == EXECUTE_SNAPSHOT else TableInfo()
    try:
        parse(record, cfg.connector, info)
    except SignalError as e:
        _fail(TidemarkError(f"{kind}: {e}", "nothing was sent; correct the signal and send it again"), 2)
    sid = send_delta_signal(cfg.warehouse, cfg.name, kind, data)
    typer.echo(sid)


def _tables(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


@signal_app.command("execute-snapshot")
@_guarded
def signal_execute_snapshot(
    ctx: typer.Context,
    tables: str = typer.Option(..., "--tables", help="Comma-separated table names or regular expressions"),
    snapshot_type: str = typer.Option("incremental", "--type", help="incremental or blocking"),
    filters: list[str] = typer.Option(
        [], "--filter", help="TABLE=CONDITION: rows of TABLE to snapshot (repeatable)", show_default=False
    ),
    surrogate_key: str | None = typer.Option(
        None, "--surrogate-key", help="Column to chunk by instead of the key"
    ),
) -> None:
    """Ask for an ad hoc snapshot of some tables (Debezium's execute-snapshot signal)."""
    data: dict[str, Any] = {"data-collections": _tables(tables), "type": snapshot_type}
    conditions = []
    for f in filters:
        table, sep, cond = f.partition("=")
        if not sep or not table.strip() or not cond.strip():
            _fail(TidemarkError(f"--filter {f!r}: expected TABLE=CONDITION"), 2)
        conditions.append({"data-collection": table.strip(), "filter": cond.strip()})
    if conditions:
        data["additional-conditions"] = conditions
    if surrogate_key:
        data["surrogate-key"] = surrogate_key
    _send_signal(ctx, "execute-snapshot", data)


@signal_app.command("stop-snapshot")
@_guarded
def signal_stop_snapshot(
    ctx: typer.Context,
    tables: str | None = typer.Option(
        None, "--tables", help="Tables to drop from the snapshot (default: all)"
    ),
    snapshot_type: str = typer.Option("incremental", "--type", help="incremental"),
) -> None:
    """Stop the running incremental snapshot (or drop some tables from it)."""
    data: dict[str, Any] = {"type": snapshot_type}
    if tables:
        data["data-collections"] = _tables(tables)
    _send_signal(ctx, "stop-snapshot", data)


@signal_app.command("pause-snapshot")
@_guarded
def signal_pause_snapshot(ctx: typer.Context) -> None:
    """Pause the running incremental snapshot."""
    _send_signal(ctx, "pause-snapshot", None)


@signal_app.command("resume-snapshot")
@_guarded
def signal_resume_snapshot(ctx: typer.Context) -> None:
    """Resume a paused incremental snapshot."""
    _send_signal(ctx, "resume-snapshot", None)


@signal_app.command("log")
@_guarded
def signal_log(
    ctx: typer.Context, message: str = typer.Option(..., "--message", help="Text to log ({} = the offset)")
) -> None:
    """Make the connector write a line to its log."""
    _send_signal(ctx, "log", {"message": message})


@signal_app.command("set-binlog-position")
@_guarded
def signal_set_binlog_position(
    ctx: typer.Context,
    file: str | None = typer.Option(None, "--file", help="Binlog file name, e.g. mysql-bin.000003"),
    position: int | None = typer.Option(None, "--position", help="Position in that file"),
    gtid_set: str | None = typer.Option(None, "--gtid-set", help="GTID set to continue after"),
) -> None:
    """MySQL/MariaDB: move the stream to a binlog position or GTID set."""
    data: dict[str, Any] = {"gtid_set": gtid_set} if gtid_set else {}
    if file is not None or position is not None:
        data |= {"binlog_filename": file, "binlog_position": position}
    _send_signal(ctx, "set-binlog-position", data)


@app.command()
@_guarded
def demo(
    workdir: Path = typer.Option(Path("./demo-run"), "--workdir", help="Where servers and Delta tables go"),
    rows: int = typer.Option(200, "--rows", help="Workload size (changes)"),
    source: list[str] = typer.Option(
        ["postgres", "mariadb"],
        "--source",
        help="Which private servers to run (repeatable): postgres, mariadb",
    ),
    log_level: LogLevel = LogLevelOpt("WARNING"),
) -> None:
    """Embedded default: private CDC-ready PostgreSQL and MariaDB, sample database, connector +
    workload, result."""
    from connectors.app.demo import run_demo

    _setup_logging(log_level)
    try:
        run_demo(workdir.resolve(), rows, tuple(dict.fromkeys(source)))
    except Exception as e:
        _fail(e)


def main() -> None:
    """Entry point: run the command, then leave without interpreter finalization.

    Every command has finished its work when `app` returns: the engine loop ended, sinks are
    closed (Kafka flushed, jsonl fsynced), Delta commits and offsets are written synchronously.
    What can still be alive are native threads: pyarrow's I/O pool may hold read-ahead buffers of
    a Delta scan (the offsets table, the MySQL schema history) that wrap Python objects. When
    such a future completes while Py_FinalizeEx runs, its thread calls PyGILState_Ensure, Python
    ends it with pthread_exit, the forced unwind meets a noexcept C++ destructor and
    std::terminate aborts the process ("terminate called without an active exception", SIGABRT,
    after the work was done; apache/arrow#34314, #39862). So: run the atexit handlers (logging
    shutdown, embedded-server clean-up), flush stdout/stderr, and `os._exit` — no finalization,
    no race, and the exit code is the command's.
    """
    code = 1
    try:
        app()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, int):
            code = e.code
        elif e.code is None:
            code = 0
        else:  # a message instead of a code, as sys.exit("...") gives
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException as e:  # noqa: BLE001 - anything else still leaves through os._exit below
        print(f"tidemark: error: unexpected {type(e).__name__}: {e}", file=sys.stderr)
    if sys.getprofile() is not None:
        # Under `python -m cProfile` (bench --profile): the profiler writes its file after
        # main() returns, so leave the normal way.
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe must not change the outcome
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
