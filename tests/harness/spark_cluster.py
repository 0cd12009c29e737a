"""A private Spark standalone cluster for tests: one master and one worker, started from the
jars the pyspark wheel ships (`bin/spark-class`), on loopback and free ports.

The snapshot job then runs on `spark://127.0.0.1:<port>` as it would on any cluster: the driver
in the job's process, executors launched by the worker in JVMs of their own, the chunk tasks in
those executors' Python workers.

A worker can stand for another host (`OtherHost`): it runs in mount and UTS namespaces of its
own (`unshare`, as root), with its own host name and an empty tmpfs over one directory, so that
its executors do not see what the driver's host has there — a cluster without shared storage.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.app.embedded.server import EmbeddedServer, launch
from connectors.app.embedded.util import HarnessError, free_port, make_server_dir


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _SparkDaemon(EmbeddedServer):
    """A master or worker JVM (`spark-class <main class> ...`), its log in the server directory."""

    main_class = ""

    def __init__(self, base: Path) -> None:
        super().__init__(base, base / "daemon.log")
        self.base = base
        self.webui_port = free_port()

    def init(self) -> None:
        if not (spark_home() / "bin" / "spark-class").exists():
            raise HarnessError(f"{spark_home()}/bin/spark-class is missing: run .ci/setup (pyspark)")

    def _env(self) -> dict[str, str]:
        import os

        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOG_DIR=str(self.base))
        # A developer's cluster settings must not leak in.
        for var in ("SPARK_MASTER_HOST", "SPARK_LOCAL_IP", "SPARK_WORKER_DIR", "SPARK_CONF_DIR"):
            env.pop(var, None)
        return env

    def _spark_class(self, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), self.main_class, *args]

    def status(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
            return dict(json.load(r))


class SparkMaster(_SparkDaemon):
    label = process_name = "Spark master"
    pid_file = "spark-master.pid"
    main_class = "org.apache.spark.deploy.master.Master"

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        return self._spark_class(
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port)
        )

    def _probe(self) -> bool:
        return self.status().get("status") == "ALIVE"


@dataclass(frozen=True)
class OtherHost:
    """A worker's host: its name, and the directory it does not share with the driver's host."""

    name: str
    unshared: Path

    def wrap(self, command: list[str], hosts: Path) -> list[str]:
        """`command` on this host; `hosts` is the /etc/hosts it sees (`hosts_file`)."""
        # --kill-child: the worker dies with unshare, which is the process the harness tracks.
        script = (
            'hostname "$0" && mount --bind "$1" /etc/hosts && '
            'mount -t tmpfs -o size=512m tidemark-other-host "$2" && shift 2 && exec "$@"'
        )
        return [
            *("unshare", "--mount", "--uts", "--fork", "--kill-child", "--"),
            *("sh", "-c", script, self.name, str(hosts), str(self.unshared), *command),
        ]

    def hosts_file(self, path: Path) -> Path:
        """This machine's /etc/hosts plus this host's name on loopback (the JVM resolves it)."""
        path.write_text(f"{Path('/etc/hosts').read_text()}\n127.0.1.1 {self.name}\n")
        return path


class SparkWorker(_SparkDaemon):
    label = process_name = "Spark worker"
    pid_file = "spark-worker.pid"
    main_class = "org.apache.spark.deploy.worker.Worker"

    def __init__(
        self, base: Path, master: SparkMaster, cores: int, memory: str, host: OtherHost | None = None
    ) -> None:
        super().__init__(base)
        self.master, self.cores, self.memory, self.host = master, cores, memory, host

    def init(self) -> None:
        super().init()
        if self.host is not None and shutil.which("unshare") is None:
            raise HarnessError("a worker on another host needs unshare (util-linux) and root")
        if self.host is not None:
            self.host.hosts_file(self.base / "hosts")

    def _command(self) -> list[str]:
        command = self._spark_class(
            self.master.url,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(self.base / "work"),
        )
        return command if self.host is None else self.host.wrap(command, self.base / "hosts")

    def _probe(self) -> bool:
        # Ready once the master lists it as alive (it registers after it listens).
        return any(
            w.get("state") == "ALIVE" and str(w.get("port")) == str(self.port)
            for w in self.master.status().get("workers", [])
        )


class SparkCluster:
    """A master and one worker; `url` is the master URL a job is given."""

    def __init__(self, master: SparkMaster, worker: SparkWorker) -> None:
        self.master, self.worker = master, worker

    @property
    def url(self) -> str:
        return self.master.url

    def executor_logs(self) -> str:
        """Every executor's stderr (where a task's Python errors end up), for failure reports."""
        return "\n".join(
            f"--- {p} ---\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted((self.worker.base / "work").glob("*/*/stderr"))
        )

    def destroy(self) -> None:
        self.worker.destroy()
        self.master.destroy()


def start_spark_cluster(cores: int = 2, memory: str = "2g", host: OtherHost | None = None) -> SparkCluster:
    master = launch(SparkMaster(make_server_dir("spark-master", None)))
    try:
        worker = launch(SparkWorker(make_server_dir("spark-worker", None), master, cores, memory, host))
    except BaseException:
        master.destroy()
        raise
    return SparkCluster(master, worker)
