"""What a failed connect or a broken binlog stream means for the user: `TerminalError` (fix
something: credentials, TLS, a server id clash, a purged position) or `TransientError` (the
engine reconnects with backoff), and the recovery hint for a position or schema history that
can no longer be used.
"""

from __future__ import annotations

import pymysql

from connectors.api import TerminalError, TransientError
from connectors.sources.mysql import tls
from connectors.sources.mysql.connection import ConnectionSettings


def recovery_hint(config_path: str | None = None) -> str:
    """What to do when the stored position or the schema history cannot be used any more: forget
    the offsets; the next run's snapshot (snapshot.mode=initial) recovers the data."""
    cmd = f"tidemark offsets reset --config {config_path or 'FILE'} --yes"
    return (
        f"run `{cmd}`: with snapshot.mode=initial the next run takes a new snapshot of the data and streams "
        "from its position, so nothing is lost (snapshot.mode=when_needed does this by itself); with "
        "snapshot.mode=no_data it takes a fresh schema snapshot and streams from the current binlog position, "
        "and the changes made between the stored position and now are NOT captured"
    )


def connection_error(
    e: pymysql.err.MySQLError, s: ConnectionSettings, *, unreachable_is_transient: bool = True
) -> Exception:
    """Translate a failed connect. An unreachable server is a passing fault once the connector
    has reached it (a restart in progress), but a set-up error at the very first start: retrying
    a wrong host or port forever helps nobody."""
    code = e.args[0] if e.args else 0
    text = str(e.args[-1]) if e.args else str(e)
    configured = s.ssl_mode_name or s.ssl_mode

    def mode(m: str) -> str:
        return tls.spelled(m, configured)

    if code == 1045:
        return TerminalError(
            f"access denied for user {s.user!r} at {s.host}:{s.port} (wrong password?)",
            "check database.user / database.password",
        )
    if code == 2026:  # CR_SSL_CONNECTION_ERROR: TLS required, the server offers none
        # the MariaDB connector has no `preferred`
        plain = "preferred or disabled" if mode("disabled") == "disabled" else mode("disabled")
        return TerminalError(
            f"the server at {s.host}:{s.port} does not offer TLS, but database.ssl.mode="
            f"{configured} requires it",
            f"enable TLS on the server (ssl_cert/ssl_key), or set database.ssl.mode={plain}",
        )
    if (
        "certificate" in text.lower() or "hostname" in text.lower()
    ):  # verification failed: not a passing fault
        return TerminalError(
            f"TLS with {s.host}:{s.port} failed (database.ssl.mode={configured}): {text}",
            "database.ssl.truststore must hold the CA that signed the server's certificate; "
            f"{mode('verify_identity')} also needs the certificate to name database.hostname; "
            f"database.ssl.mode={mode('required')} encrypts without checking the certificate",
        )
    if code in (2003, 2005, 2006, 2013):
        cls = TransientError if unreachable_is_transient else TerminalError
        return cls(
            f"cannot reach the database at {s.host}:{s.port}: {e.args[-1]}",
            "check database.hostname/database.port and that the server is running",
        )
    return TerminalError(f"cannot connect to {s.host}:{s.port}: {e}")


def stream_error(e: pymysql.err.OperationalError, config_path: str | None = None) -> Exception:
    code = e.args[0] if e.args else 0
    msg = str(e.args[-1]) if e.args else str(e)
    if code == 1236:
        low = msg.lower()
        if (
            "same server_uuid/server_id" in low
            or "same server id" in low
            or "server_id" in low
            and "same" in low
        ):
            return TerminalError(
                f"another replica uses this server id: {msg}",
                "give database.server.id a value no other replica or connector uses",
            )
        if (
            "could not find first log file" in low
            or "purged" in low
            or "not find gtid" in low
            or "gtid" in low
            and ("purged" in low or "not exist" in low or "missing" in low)
        ):
            return TerminalError(
                f"the stored binlog position is no longer on the server (purged): {msg}",
                recovery_hint(config_path),
            )
        return TerminalError(f"the server refused to stream the binlog: {msg}")
    if code in (2006, 2013, 2003, 1053, 1927, 4031):
        return TransientError(f"binlog connection lost ({code}): {msg}", "the engine reconnects with backoff")
    return TransientError(f"binlog read failed ({code}): {msg}")
