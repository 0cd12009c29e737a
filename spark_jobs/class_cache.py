"""The snapshot job's driver JVM loads Spark's classes from a class-data archive (the JDK's
application class-data sharing, AppCDS), written by the first job on the machine.

Why: the driver JVM spends most of Spark's start loading and verifying the classes of
Spark's jars. On a 2-core machine that was ~6 s of every job (gateway 1.6-2.2 s, SparkContext
2.1-2.4 s, first task 2.2-2.6 s); from the archive ~4 s (gateway 1.0-1.1 s, context ~1.1 s, first
task 1.6-1.9 s). bench/README ("Spark start from a class-data archive") has the runs.

How (JDK 13+ dynamic archives, no tool to run by hand):
- no archive yet: the JVM starts with `-XX:ArchiveClassesAtExit=<temporary file>` and writes the
  classes it loaded when it exits. `finish()` ends the JVM after the job (closing its stdin ends
  PySpark's gateway), waits for it, and renames the fsynced file into place. Only a whole
  archive ever has the final name: the JVM crashes (SIGBUS) on a truncated one.
- an archive: `-XX:SharedArchiveFile=<archive>`. If Spark does not start with it, Spark is
  started once more without it; when that works, the archive is deleted (`discard`).
- the file name is a digest of what the archive depends on (the java binary, pyspark's jars, the
  driver's memory setting), so an upgrade writes a new archive; archives no job used for 14 days
  are removed then (each use touches its archive). A JVM that rejects an archive (another JDK
  build) is meant to start without it (`-Xshare:auto`); if it fails instead, the retry above
  applies (only a truncated archive was tried: the JVM crashed, and the retry started Spark).
- the JVM's own CDS messages are silenced (`-Xlog:cds*=off`): they are about classes it
  leaves out, never errors of the job.

Where: `$TIDEMARK_CACHE_DIR`, else `$XDG_CACHE_HOME/tidemark`, else `~/.cache/tidemark`, in
`spark-cds/`. Off with `tidemark.spark.class.cache=false`, or when the job sets its own
`spark.driver.extraJavaOptions` (those are used as given). A directory that cannot be written
only means no archive: the job runs as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("tidemark.snapshot")

LOG_OFF = "-Xlog:cds*=off"
STALE_S = 3600  # a temporary file this old was left by a killed job
UNUSED_S = 14 * 86400  # another archive not used for this long was left by an upgrade


def cache_dir() -> Path:
    if os.environ.get("TIDEMARK_CACHE_DIR"):
        return Path(os.environ["TIDEMARK_CACHE_DIR"]) / "spark-cds"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tidemark" / "spark-cds"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def archive_name(conf: Mapping[str, str]) -> str | None:
    """The archive's file name for this JVM, these jars and this driver memory (None: no java
    or no pyspark found, so no archive)."""
    java = _java()
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    h = hashlib.sha256()
    st = java.stat()
    h.update(f"{java}:{st.st_size}:{st.st_mtime_ns}:{pyspark.__version__}:".encode())
    h.update(f"{conf.get('spark.driver.memory', '')}:{os.environ.get('SPARK_HOME', '')}:".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            js = jar.stat()
            h.update(f"{jar.name}:{js.st_size}:{js.st_mtime_ns};".encode())
    return f"spark-{pyspark.__version__}-{h.hexdigest()[:16]}.jsa"


@dataclass
class ClassCache:
    """One driver JVM's use of the archive: reading it, or writing it (to `writing`) at exit."""

    archive: Path
    writing: Path | None = None

    def java_options(self) -> str:
        if self.writing is not None:
            return f"{LOG_OFF} -XX:ArchiveClassesAtExit={self.writing}"
        return f"{LOG_OFF} -XX:SharedArchiveFile={self.archive}"

    def discard(self) -> None:
        """Spark started without this archive but not with it: delete it (the next job writes a
        new one)."""
        log.warning(
            "Spark did not start with the class-data archive %s but did without it (a JVM crash "
            "report hs_err_pid*.log in the working directory may be about it): archive deleted",
            self.archive,
        )
        with contextlib.suppress(OSError):
            self.archive.unlink()

    def finish(self, gateway: Any) -> None:
        """After the job: when this JVM writes the archive, end it (closing its stdin ends
        PySpark's gateway), wait for the write, and put the archive in place."""
        if self.writing is None:
            return
        writing, self.writing = self.writing, None
        proc = getattr(gateway, "proc", None)
        try:
            if proc is None:
                return
            with contextlib.suppress(Exception):
                gateway.shutdown()
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()
            try:
                proc.wait(timeout=120)
            except Exception:
                log.warning("the Spark JVM did not exit within 120 s: no class-data archive written")
                return
            if proc.returncode != 0 or not writing.exists() or writing.stat().st_size == 0:
                return
            fd = os.open(writing, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(writing, self.archive)
            log.info("Spark's classes archived in %s: later jobs start faster", self.archive)
            # Archives of other JVMs or jars unused for UNUSED_S: an upgrade left them. (Not all
            # others: two installs on one machine, e.g. a checkout and its CI clone, each keep theirs.)
            now = time.time()
            for old in self.archive.parent.glob("spark-*.jsa"):
                with contextlib.suppress(OSError):
                    if old != self.archive and now - old.stat().st_mtime > UNUSED_S:
                        old.unlink()
        except OSError as e:
            log.info("no class-data archive written (%s)", e)
        finally:
            with contextlib.suppress(OSError):
                writing.unlink()


def plan(conf: Mapping[str, str]) -> ClassCache | None:
    """The archive this job's driver JVM reads, or writes when there is none yet; None when
    there is nowhere to keep one."""
    from pyspark import SparkContext

    if os.environ.get("PYSPARK_GATEWAY_PORT") or SparkContext._gateway is not None:
        return None  # the JVM runs already (spark-submit started it, or an earlier session)
    name = archive_name(conf)
    if name is None:
        return None
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        archive = d / name
        if archive.is_file() and archive.stat().st_size > 0:
            with contextlib.suppress(OSError):
                os.utime(archive)  # in use: not removed as an upgrade's leftover
            return ClassCache(archive)
        now = time.time()
        for tmp in d.glob("*.jsa.tmp"):
            if now - tmp.stat().st_mtime > STALE_S:
                tmp.unlink(missing_ok=True)
        writing = d / f"{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.jsa.tmp"
        writing.touch()
        writing.unlink()  # (the JVM creates it: this only proves the directory is writable)
        return ClassCache(archive, writing)
    except OSError as e:
        log.debug("no class-data archive for Spark (%s)", e)
        return None
