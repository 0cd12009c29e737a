"""Where Tidemark writes (warehouse, Delta tables, jsonl files): checks before anything starts,
and the line between a storage fault worth retrying and one that needs the user.

A warehouse that cannot be written (permission denied, read-only file system, a path through a
file, rejected object-store credentials) never heals by itself: retrying it with backoff only
hides the cause, after the slot and publication were already created. `check_writable` refuses
such a location at start; `storage_error` classifies what a write raises later.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from connectors.api import TerminalError, TidemarkError, TransientError

# Errors of the operating system that a retry cannot fix.
_TERMINAL_ERRNOS = {
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENOENT,
    errno.ENAMETOOLONG,
    errno.ELOOP,
}
# The same, as delta-rs / object_store put them into their messages ("... (os error 30)",
# Os { code: 13, ... }), and object stores' authentication and authorization failures.
_TERMINAL_TEXT = re.compile(
    r"os error (?:13|1|30|20|21|2)\b|code: (?:13|1|30|20|21|2),|permission denied|read-only file system"
    r"|not a directory|no such file or directory"
    r"|status:? (?:401|403)\b|\b40[13] (?:forbidden|unauthorized)|forbidden|unauthori[sz]ed|access ?denied"
    r"|invalidaccesskeyid|signaturedoesnotmatch|expiredtoken|authorizationfailure|authenticationfailed"
    r"|invalid.?credential|no ?credential|missing credential|lacked the necessary privileges"
    r"|containernotfound|nosuchbucket|bucket.{0,40}not found",
    re.IGNORECASE,
)


def is_local(uri: str | Path) -> bool:
    """A local path or a `file://` URI (delta-rs treats both as the local file system)."""
    scheme = urlparse(str(uri)).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str | Path) -> Path:
    text = str(uri)
    return Path(urlparse(text).path if text.startswith("file://") else text)


def _hint(what: str, uri: str | Path = "") -> str:
    if uri and not is_local(uri):
        return (
            "check the object-store credentials and the bucket/container name (the storage options, e.g. "
            f"debezium.sink.delta.storage.*) and that the account may write there; or point {what} elsewhere"
        )
    return (
        f"make {what} writable by the user running Tidemark (owner, mode, mount options), "
        "or point the setting at a writable location"
    )


def check_writable(uri: str | Path, what: str, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Refuse a location Tidemark cannot write, before any connection is made.

    Local directories are created if missing and probed with a file that is removed at once; an
    object-store URI is probed by reading its Delta log (this surfaces rejected credentials and
    unknown buckets; permission to write is known only at the first commit)."""
    if is_local(uri):
        path = local_path(uri)
        try:
            _mkdir(path)
            fd, probe = tempfile.mkstemp(prefix=".tidemark-probe-", dir=path)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise TerminalError(f"{what} {path} is not writable: {e.strerror or e}", _hint(what)) from None
        return
    from deltalake import DeltaTable

    try:
        DeltaTable.is_deltatable(str(uri), storage_options=dict(storage_options) if storage_options else None)
    except Exception as e:  # delta-rs raises its own types and OSError; classify by the text
        raise storage_error(e, uri, what) from None


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        # mkdir -p through a regular file: say what is wrong with the path, not "File exists".
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from None


def check_file_writable(path: str | Path, what: str) -> None:
    """Refuse a file Tidemark cannot append to (the jsonl sink's output), before anything starts.
    The parent directory is created if missing; the file itself is not created here."""
    p = Path(path)
    try:
        _mkdir(p.parent)
        if p.exists():
            if p.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            with open(p, "ab"):
                pass
        else:
            probe = p.parent / f".tidemark-probe-{uuid.uuid4().hex}"
            probe.touch()
            probe.unlink()
    except OSError as e:
        raise TerminalError(f"{what} {p} is not writable: {e.strerror or e}", _hint(what)) from None


def storage_error(exc: BaseException, uri: str | Path, what: str) -> TidemarkError:
    """The error to raise for a failed write to `uri`: terminal when retrying cannot help
    (permissions, read-only file system, a missing or non-directory path, credentials),
    transient otherwise (a network fault, a commit conflict, a full disk an operator may free)."""
    text = _ANSI.sub("", str(exc))
    first = next(iter(text.strip().splitlines()), "") or type(exc).__name__
    # delta-rs puts the reason on later lines: the operating system's (`Os { ..., message: "..." }`)
    # or the object store's HTTP status and error code.
    reason = _OS_REASON.search(text)
    if reason and reason.group(1) not in first:
        first = f"{first}: {reason.group(1)}"
    status, code = _HTTP_STATUS.search(text), _STORE_CODE.search(text)
    if status:
        first = f"{first}: HTTP {status.group(1)}" + (f" {code.group(1)}" if code else "")
    errno_ = getattr(exc, "errno", None)
    if errno_ in _TERMINAL_ERRNOS or _TERMINAL_TEXT.search(text):
        return TerminalError(f"{what} {uri}: {first}", _hint(what, uri))
    return TransientError(f"{what} {uri}: {first}")


_OS_REASON = re.compile(r'message: "([^"]+)"')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HTTP_STATUS = re.compile(r"\b([45]\d\d [A-Z][A-Za-z ]+?)\s*$", re.MULTILINE)
_STORE_CODE = re.compile(r"<Code>(\w+)</Code>")


__all__ = ["check_file_writable", "check_writable", "is_local", "local_path", "storage_error"]
