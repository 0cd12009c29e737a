"""Connector files as the DAG factory and the page see them, and the configuration a task runs.

Discovery (parse time, nothing connects): every `*.properties` / `*.yaml` / `*.yml` file of the
connectors directory — `$TIDEMARK_CONNECTORS_DIR`, else the Airflow Variable
`tidemark_connectors_dir`, else `dags/connectors/`. A file that names an Airflow Connection
(`tidemark.airflow.connection.id`) is validated with placeholders for the connection's keys
it leaves out; the Connection itself is read only when a task runs.

Runtime (inside a task): `runtime_config(path)` writes the file's properties plus the
Connection's (`hooks.TidemarkConnectionHook`) and the channels Airflow needs (the Delta signal
and notification channels) to a private file (mode 0600 in a 0700 directory, removed afterwards)
for `tidemark run` / the snapshot job: the password travels in that file only, never in argv,
XCom or a rendered template.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.api import ConfigError
from connectors.settings.config import ConnectorConfig, from_mapping
from connectors.settings.files import _read

log = logging.getLogger(__name__)

CONNECTORS_DIR_ENV = "TIDEMARK_CONNECTORS_DIR"
CONNECTORS_DIR_VARIABLE = "tidemark_connectors_dir"
DEFAULT_CONNECTORS_DIR = Path(__file__).resolve().parents[2] / "dags" / "connectors"
SUFFIXES = (".properties", ".yaml", ".yml")
SOURCE_PREFIX = "debezium.source."
CONNECTION_ID_KEY = "tidemark.airflow.connection.id"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")

# What a Connection provides; at parse time these stand in for keys the file leaves to it.
CONNECTION_KEYS = ("database.hostname", "database.port", "database.user", "database.password")
_PLACEHOLDERS = {
    "database.hostname": "airflow-connection",
    "database.port": "1",
    "database.user": "airflow-connection",
    "database.dbname": "airflow-connection",
}


def connectors_dir() -> Path:
    env = os.environ.get(CONNECTORS_DIR_ENV)
    if env:
        return Path(env)
    try:
        from airflow.sdk import Variable

        value = Variable.get(CONNECTORS_DIR_VARIABLE, default=None)
    except Exception as e:  # noqa: BLE001 - no metadata database (a bare import): the default
        log.debug("Variable %s unavailable: %s", CONNECTORS_DIR_VARIABLE, e)
        value = None
    return Path(value) if value else DEFAULT_CONNECTORS_DIR


@dataclass(frozen=True)
class ConnectorFile:
    """One connector file: `cfg` when it is valid, else `error` (the ConfigError's text)."""

    name: str
    path: Path
    cfg: ConnectorConfig | None
    error: str | None = None

    @property
    def connection_id(self) -> str | None:
        return None if self.cfg is None else self.cfg.runtime.airflow_connection_id


def _full(raw: Mapping[str, str], key: str) -> str:
    """A connector key as this file spells it (Debezium Server shape or plain)."""
    server_shape = any(k.startswith(SOURCE_PREFIX) for k in raw)
    return SOURCE_PREFIX + key if server_shape else key


# Paths in a connector file are taken relative to the file's directory: Airflow's processes
# (DAG processor, workers, API server) each run in a directory of their own.
_PATH_KEYS = ("tidemark.warehouse", "debezium.sink.jsonl.path", "debezium.sink.delta.table.path")


def _read_file(path: Path) -> dict[str, str]:
    raw = _read(path)
    raw.setdefault("tidemark.warehouse", "warehouse")
    for key in _PATH_KEYS:
        value = raw.get(key, "").strip()
        if value and value != "-" and "://" not in value and not Path(value).is_absolute():
            raw[key] = str((path.parent / value).resolve())
    return raw


def parse_config(path: Path) -> ConnectorConfig:
    """The file's validated configuration, without connecting to anything (Connection keys the
    file leaves out are placeholders)."""
    raw = _read_file(path)
    if raw.get(CONNECTION_ID_KEY, "").strip():
        for key, value in _PLACEHOLDERS.items():
            if (
                key == "database.dbname"
                and "postgres" not in raw.get(_full(raw, "connector.class"), "").lower()
            ):
                continue
            raw.setdefault(_full(raw, key), value)
    return from_mapping(raw, path=path)


def discover(directory: Path | None = None) -> list[ConnectorFile]:
    directory = directory or connectors_dir()
    if not directory.is_dir():
        log.warning("tidemark: connectors directory %s does not exist: no connector DAGs", directory)
        return []
    out = []
    for path in sorted(p for p in directory.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file()):
        name = path.stem
        if not _NAME.fullmatch(name):
            out.append(
                ConnectorFile(name, path, None, f"{path}: the file name must be letters, digits, _ . -")
            )
            continue
        try:
            out.append(ConnectorFile(name, path, parse_config(path)))
        except ConfigError as e:
            text = e.message + (f"\n  hint: {e.hint}" if e.hint else "")
            # The validation text names the problems; make sure it names the file too.
            out.append(ConnectorFile(name, path, None, text if str(path) in text else f"{path}: {text}"))
    return out


def find(name: str, directory: Path | None = None) -> ConnectorFile:
    for cf in discover(directory):
        if cf.name == name:
            return cf
    raise ConfigError(f"no connector file {name}.properties/.yaml in {directory or connectors_dir()}")


def _with_channel(text: str | None, channel: str, default: str) -> str:
    names = [c.strip() for c in (default if text is None else text).split(",") if c.strip()]
    return ",".join([*names, channel] if channel not in names else names)


def runtime_properties(path: Path, overrides: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The flat properties a task runs `path` with: the file's, the Connection's (when the file
    names one), the Delta signal and notification channels, then `overrides` (connector keys)."""
    raw = _read_file(path)
    conn_id = raw.get(CONNECTION_ID_KEY, "").strip()
    if conn_id:
        from tidemark_airflow.hooks import TidemarkConnectionHook

        connector = raw.get(_full(raw, "connector.class"), "")
        for key, value in TidemarkConnectionHook(conn_id).connector_properties(connector).items():
            raw[_full(raw, key)] = value
    # Under Airflow the snapshot DAG and the page signal through the Delta table and wait on the
    # Delta notifications: both channels are always on (besides the file's own).
    sig, note = _full(raw, "signal.enabled.channels"), _full(raw, "notification.enabled.channels")
    raw[sig] = _with_channel(raw.get(sig), "delta", "source")
    raw[note] = _with_channel(raw.get(note), "delta", "")
    for key, value in (overrides or {}).items():
        raw[key if key.startswith(("debezium.", "tidemark.")) else _full(raw, key)] = str(value)
    return raw


_PRIVATE = "tidemark-cfg-"  # + the writing process's pid: its directory is found once it died


def _remove_orphans() -> None:
    """Remove the private directories of tasks that were killed (SIGKILL, the OOM killer) before
    they could: their pid is gone. A directory of a live process, or of another user's, stays.
    (Workers in separate pid namespaces must not share one temp directory: each would take the
    other's live tasks for dead. Containers normally have a /tmp of their own.)"""
    for d in Path(tempfile.gettempdir()).glob(f"{_PRIVATE}*-*"):
        pid = d.name.removeprefix(_PRIVATE).split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


@contextlib.contextmanager
def runtime_config(
    path: Path, overrides: Mapping[str, Any] | None = None
) -> Iterator[tuple[Path, ConnectorConfig]]:
    """A private copy of the runtime properties (see the module docstring), validated; removed on exit."""
    import yaml

    props = runtime_properties(path, overrides)
    cfg = from_mapping(props, path=path)
    _remove_orphans()
    tmp = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE}{os.getpid()}-{path.stem}-"))
    try:
        os.chmod(tmp, 0o700)
        out = tmp / f"{path.stem}.yaml"
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(props, f, default_flow_style=False, allow_unicode=True)
        yield out, cfg
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
