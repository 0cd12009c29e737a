"""TLS for the MySQL/MariaDB connections: `database.ssl.*` → an `ssl.SSLContext` for PyMySQL.

`database.ssl.mode` takes each connector class's own Debezium values (the configuration refuses
the other class's spelling, as Debezium does):

  connector.class=mysql (MySqlConnectorConfig.SecureConnectionMode, default `preferred`)
  connector.class=mariadb (MariaDbConnectorConfig.MariaDbSecureConnectionMode, default `disable`;
      mapped onto the MySQL modes as MariaDbStreamingChangeEventSource.sslModeFor maps them)

  mysql            mariadb       behaviour
  disabled         disable       plain connection, even when the server offers TLS;
  preferred        -             TLS when the server offers it, certificate not checked (PyMySQL's default);
  required         trust         TLS or a clear error; certificate not checked;
  verify_ca        verify-ca     TLS, the server certificate must chain to `database.ssl.truststore`
                                 (or the system CAs when no truststore is given);
  verify_identity  verify-full   verify_ca, and the certificate must name `database.hostname`.

Messages and hints name modes the way the configuration spells them.

Debezium reads Java key stores. Tidemark reads the same properties but needs files Python can
load: PEM (certificates, and for the keystore the client certificate plus its private key) or
PKCS12 (`.p12`/`.pfx`, what `keytool -importkeystore -deststoretype PKCS12` writes), opened with
`database.ssl.truststore.password` / `database.ssl.keystore.password`. A JKS/JCEKS store is
refused with the command that converts it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from connectors.api import TerminalError
from connectors.settings.model import MySqlSettings


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


Mode = Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"]
MODES: tuple[Mode, ...] = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
_MARIADB_MODES: dict[str, Mode] = {
    "disable": "disabled",
    "trust": "required",
    "verify-ca": "verify_ca",
    "verify-full": "verify_identity",
}
_MARIADB_NAMES: dict[str, str] = {mode: name for name, mode in _MARIADB_MODES.items()}
_JAVA_STORES = {b"\xfe\xed\xfe\xed": "a Java KeyStore (JKS)", b"\xce\xce\xce\xce": "a Java JCEKS key store"}


def ssl_mode(s: MySqlSettings) -> Mode:
    """The behaviour of the configured `database.ssl.mode` (either connector class's spelling;
    the configuration has checked it is one of its class's values)."""
    return _MARIADB_MODES.get(s.database_ssl_mode, s.database_ssl_mode)


def spelled(mode: str, configured: str) -> str:
    """`mode` (one of MODES) as the configuration spells modes: the MariaDB connector's names
    when the configured mode is one of them."""
    return _MARIADB_NAMES.get(mode, mode) if configured.strip().lower() in _MARIADB_MODES else mode


def ssl_context(s: MySqlSettings, mode: Mode) -> ssl.SSLContext | None:
    """The context for `mode`, None for disabled/preferred (PyMySQL handles those)."""
    if mode in ("disabled", "preferred"):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if mode == "required":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = mode == "verify_identity"
        ctx.verify_mode = ssl.CERT_REQUIRED
        trust = s.database_ssl_truststore
        if trust:
            pem = _certificates_pem(
                trust, _secret(s.database_ssl_truststore_password), "database.ssl.truststore"
            )
            try:
                ctx.load_verify_locations(cadata=pem)
            except ssl.SSLError as e:
                raise TerminalError(
                    f"database.ssl.truststore {trust}: no usable CA certificate ({e.reason})",
                    "give the PEM or PKCS12 file of the CA that signed the server's certificate",
                ) from None
        else:
            ctx.load_default_certs()
    keystore = s.database_ssl_keystore
    if keystore:
        _load_client_certificate(ctx, keystore, _secret(s.database_ssl_keystore_password))
    return ctx


# --------------------------------------------------------------------------- key store files
def _read(path: str, prop: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TerminalError(f"{prop} {path} cannot be read: {e.strerror}", f"check {prop}") from None
    kind = _JAVA_STORES.get(data[:4])
    if kind:
        raise TerminalError(
            f"{prop} {path} is {kind}; Tidemark reads PEM or PKCS12 files",
            f"convert it: keytool -importkeystore -srckeystore {path} -destkeystore {path}.p12 "
            f"-deststoretype PKCS12, then set {prop}={path}.p12 (or export PEM files with keytool -exportcert -rfc)",
        )
    return data


def _pkcs12(data: bytes, password: Any, path: str, prop: str) -> tuple[Any, Any, list[Any]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(data, str(password).encode() if password else None)
    except ValueError:
        raise TerminalError(
            f"{prop} {path} is neither PEM nor a PKCS12 file that opens with {prop}.password",
            f"check {prop} and {prop}.password",
        ) from None


def _certificates_pem(path: str, password: Any, prop: str) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    data = _read(path, prop)
    if b"-----BEGIN" in data:
        return data.decode("ascii", "replace")
    _key, cert, extra = _pkcs12(data, password, path, prop)
    certs = ([cert] if cert is not None else []) + list(extra or [])
    if not certs:
        raise TerminalError(f"{prop} {path} holds no certificate", f"check {prop}")
    return "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in certs)


def _load_client_certificate(ctx: ssl.SSLContext, path: str, password: Any) -> None:
    """The client certificate and key (mutual TLS). A PKCS12 store is written to a private
    temporary PEM file only for the moment `load_cert_chain` reads it."""
    prop = "database.ssl.keystore"
    data = _read(path, prop)
    try:
        if b"-----BEGIN" in data:
            ctx.load_cert_chain(path, password=str(password) if password else None)
            return
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

        key, cert, extra = _pkcs12(data, password, path, prop)
        if key is None or cert is None:
            raise TerminalError(f"{prop} {path} has no private key and certificate", f"check {prop}")
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + b"".join(
            c.public_bytes(Encoding.PEM) for c in [cert, *(extra or [])]
        )
        with tempfile.TemporaryDirectory(prefix="tidemark-tls-") as tmp:
            pem_path = os.path.join(tmp, "client.pem")
            fd = os.open(pem_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            ctx.load_cert_chain(pem_path)
    except ssl.SSLError as e:
        raise TerminalError(
            f"{prop} {path}: the client certificate or key cannot be used ({e.reason})",
            f"it must hold the certificate and its private key (PEM or PKCS12); check {prop}.password",
        ) from None
