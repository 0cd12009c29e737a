"""The driver JVM's stderr, read through a pipe while Spark starts.

Why: a Spark that cannot start (a bad master URL, a bad `spark.driver.memory`, ...) says why on
the JVM's stderr, followed by a Java stack trace, and PySpark then raises only
"[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number". Reading the
JVM's stderr ourselves lets the job's error name the JVM's own reason and keeps the stack frames
out of the user's terminal (they go to the DEBUG log). After a successful start every line is
passed on unchanged: a stack trace during the job is a diagnostic worth seeing.

PySpark's `launch_gateway(popen_kwargs=...)` starts the JVM with our pipe as its stderr; a
thread copies the pipe to this process's stderr line by line. Under spark-submit no JVM is
started here and the pipe stays unused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections import deque
from typing import IO, Any

log = logging.getLogger("tidemark.snapshot")

_FRAME = re.compile(rb"^\s+(at |\.\.\. \d+ more)")
# "Exception in thread "main" org.apache.spark.SparkException: Could not parse Master URL: ...",
# "Error: Could not create the Java Virtual Machine.", "Invalid maximum heap size: -Xmxlots"
_REASON = re.compile(rb"(Exception|Error|Invalid|Unrecognized|Could not)\b")
_NOISE = re.compile(
    rb"^(Error: A fatal exception has occurred|Error: Could not create the Java Virtual Machine)"
)


class JvmStderr:
    """A pipe for the driver JVM's stderr and the thread that copies it to ours."""

    def __init__(self, out: IO[bytes] | None = None) -> None:
        self._out = out
        self._read_fd, self._write_fd = os.pipe()
        self._starting = True
        self._reasons: deque[str] = deque(maxlen=5)
        self._thread = threading.Thread(target=self._copy, name="jvm-stderr", daemon=True)
        self._thread.start()

    def popen_kwargs(self) -> dict[str, Any]:
        return {"stderr": self._write_fd}

    def started(self) -> None:
        """Spark is up (or was started by spark-submit): from now on every line passes as is."""
        self._starting = False
        self._close_write_end()

    def reason(self, timeout: float = 10.0) -> str | None:
        """After a failed start: the JVM's own words for it (it has exited, so the pipe ends)."""
        self._close_write_end()
        self._thread.join(timeout)
        return "; ".join(self._reasons) or None

    def _close_write_end(self) -> None:
        # The JVM holds its own copy; ours must go, or the reader would never see the end.
        if self._write_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._write_fd)
            self._write_fd = -1

    def _copy(self) -> None:
        # A buffered reader hands out each line as soon as its newline arrives.
        with open(self._read_fd, "rb") as pipe:
            for line in pipe:
                if self._starting and _FRAME.match(line):
                    log.debug("driver JVM: %s", line.decode(errors="replace").rstrip())
                    continue
                if self._starting and _REASON.search(line) and not _NOISE.match(line):
                    self._reasons.append(line.decode(errors="replace").strip())
                self._write(line)

    def _write(self, line: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):
            out = self._out if self._out is not None else getattr(sys.stderr, "buffer", None)
            if out is None:  # a stderr without bytes (a test's capture): text then
                sys.stderr.write(line.decode(errors="replace"))
                sys.stderr.flush()
                return
            out.write(line)
            out.flush()
