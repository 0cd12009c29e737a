"""database.ssl.* for MySQL/MariaDB: each mode against a private MariaDB without TLS and one with
TLS (certificates made here with `cryptography`), PEM and PKCS12 stores, JKS refused clearly."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import pymysql
import pytest
from cfgutil import source as settings_of
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from connectors.api import ConfigError, TerminalError
from connectors.settings import config
from connectors.sources.mysql import setup
from connectors.sources.mysql.stream import BinlogStream


# --------------------------------------------------------------------------- certificates
def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: Any,
    issuer: tuple[str, Any] | None,
    *,
    ca: bool = False,
    san: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = (subject, key) if issuer is None else issuer
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(path: Path, *items: Any) -> Path:
    out = b""
    for it in items:
        if isinstance(it, x509.Certificate):
            out += it.public_bytes(serialization.Encoding.PEM)
        else:
            out += it.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
    path.write_bytes(out)
    return path


class Pki:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca = _cert("tidemark test CA", self.ca_key, None, ca=True)
        other_key = ec.generate_private_key(ec.SECP256R1())
        self.other_ca = _cert("another CA", other_key, None, ca=True)
        self.server_key = ec.generate_private_key(ec.SECP256R1())
        self.server = _cert(
            "mariadb",
            self.server_key,
            ("tidemark test CA", self.ca_key),
            san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        )
        self.client_key = ec.generate_private_key(ec.SECP256R1())
        self.client = _cert("tidemark client", self.client_key, ("tidemark test CA", self.ca_key))
        self.ca_pem = _pem(d / "ca.pem", self.ca)
        self.other_ca_pem = _pem(d / "other-ca.pem", self.other_ca)
        self.server_pem = _pem(d / "server.pem", self.server)
        self.server_key_pem = _pem(d / "server-key.pem", self.server_key)
        self.client_pem = _pem(d / "client.pem", self.client, self.client_key)
        self.trust_p12 = d / "trust.p12"
        self.trust_p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                None, None, None, [self.ca], serialization.BestAvailableEncryption(b"storepw")
            )
        )
        self.client_p12 = d / "client.p12"
        self.client_p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"client", self.client_key, self.client, None, serialization.BestAvailableEncryption(b"keypw")
            )
        )


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    d = tmp_path / "pki"
    d.mkdir()
    return Pki(d)


def _settings(props: dict[str, Any]) -> Any:
    """Connection settings through the configuration, under the connector class whose spelling
    of database.ssl.mode the props use."""
    mode = str(props.get("database.ssl.mode", "")).lower()
    return setup.connection_settings(settings_of("mariadb" if mode in MARIADB_NAMES else "mysql", props))


def _connect(server: Any, **props: Any) -> pymysql.connections.Connection:
    return setup.connect(_settings(dict(server.props(), **props)))


def _cipher(conn: pymysql.connections.Connection) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
    return str(row[1]) if row else ""


# --------------------------------------------------------------------------- tests
# database.ssl.mode per connector class, as Debezium 3.6 defines them (MySqlConnectorConfig's
# SecureConnectionMode; MariaDbConnectorConfig.MariaDbSecureConnectionMode, mapped onto the MySQL
# modes as MariaDbStreamingChangeEventSource.sslModeFor does): value → the mode tls.py applies.
SSL_MODES = {
    "mysql": {
        "disabled": "disabled",
        "preferred": "preferred",
        "required": "required",
        "verify_ca": "verify_ca",
        "verify_identity": "verify_identity",
    },
    "mariadb": {
        "disable": "disabled",
        "trust": "required",
        "verify-ca": "verify_ca",
        "verify-full": "verify_identity",
    },
}
DEFAULT_SSL_MODE = {"mysql": "preferred", "mariadb": "disabled"}
MARIADB_NAMES = set(SSL_MODES["mariadb"])


def test_ssl_mode_values_per_connector_class(tmp_path: Path, pki: Pki) -> None:
    """Every value of each connector class is accepted by the configuration and applied as its
    TLS behaviour; the other class's spelling is refused (as Debezium refuses it), and the default
    is Debezium's (MySQL `preferred`, MariaDB `disable`)."""
    base = {
        "database.hostname": "127.0.0.1",
        "database.user": "u",
        "topic.prefix": "p",
        "snapshot.mode": "no_data",
        "debezium.sink.type": "jsonl",
        "debezium.sink.jsonl.path": "-",
        "database.ssl.truststore": str(pki.ca_pem),
    }
    for connector, modes in SSL_MODES.items():
        for value, mode in modes.items():
            for spelled in (value, value.upper()):
                cfg = config.from_mapping(
                    {**base, "connector.class": connector, "database.ssl.mode": spelled}
                )
                settings = setup.connection_settings(cfg.source)
                assert settings.ssl_mode == mode, (connector, spelled)
                assert (settings.ssl_context is None) == (mode in ("disabled", "preferred"))
                if settings.ssl_context is not None:
                    verifies = mode in ("verify_ca", "verify_identity")
                    assert (settings.ssl_context.verify_mode == ssl.CERT_REQUIRED) == verifies
                    assert settings.ssl_context.check_hostname == (mode == "verify_identity")
        other = next(m for c, m in SSL_MODES.items() if c != connector)
        for value in other:
            if value in modes:
                continue
            with pytest.raises(
                ConfigError, match=f"database.ssl.mode={value} is not one of {', '.join(modes)}"
            ):
                config.from_mapping({**base, "connector.class": connector, "database.ssl.mode": value})
        cfg = config.from_mapping({**base, "connector.class": connector})
        assert setup.connection_settings(cfg.source).ssl_mode == DEFAULT_SSL_MODE[connector]


def test_modes_against_a_server_without_tls(mariadb: Any) -> None:
    """Errors and hints spell modes the way the configuration does."""
    assert str(mariadb.variable("have_ssl")).upper() != "YES"
    for mode, plain in (
        ("required", "preferred or disabled"),
        ("verify_ca", "preferred or disabled"),
        ("trust", "disable"),
        ("verify-full", "disable"),
    ):
        with pytest.raises(
            TerminalError, match=f"does not offer TLS, but database.ssl.mode={mode} requires"
        ) as err:
            _connect(mariadb, **{"database.ssl.mode": mode})
        assert f"database.ssl.mode={plain}" in (err.value.hint or "")
    for mode in ("disabled", "disable", "preferred"):
        with contextlib.closing(_connect(mariadb, **{"database.ssl.mode": mode})) as conn:
            assert _cipher(conn) == ""


def test_modes_against_a_tls_server(mariadb_factory: Any, pki: Pki, tmp_path: Path, unique_name: Any) -> None:
    server = mariadb_factory(
        ssl_ca=str(pki.ca_pem), ssl_cert=str(pki.server_pem), ssl_key=str(pki.server_key_pem)
    )
    assert str(server.variable("have_ssl")).upper() == "YES"
    ca = {"database.ssl.truststore": str(pki.ca_pem)}
    # disabled stays plain although the server offers TLS; every other mode encrypts.
    with contextlib.closing(_connect(server, **{"database.ssl.mode": "disabled"})) as conn:
        assert _cipher(conn) == ""
    for props in (
        {"database.ssl.mode": "preferred"},
        {"database.ssl.mode": "required"},
        {"database.ssl.mode": "trust"},
        {"database.ssl.mode": "verify_ca", **ca},
        {
            "database.ssl.mode": "verify-ca",
            "database.ssl.truststore": str(pki.trust_p12),
            "database.ssl.truststore.password": "storepw",
        },
        {"database.ssl.mode": "verify_identity", **ca},
        {"database.ssl.mode": "verify-full", **ca},
    ):
        with contextlib.closing(_connect(server, **props)) as conn:
            assert _cipher(conn), props
    # A certificate from another CA, or one that does not name the host, is refused clearly.
    with pytest.raises(
        TerminalError, match=r"TLS with 127\.0\.0\.1:\d+ failed \(database.ssl.mode=verify_ca\)"
    ):
        _connect(
            server, **{"database.ssl.mode": "verify_ca", "database.ssl.truststore": str(pki.other_ca_pem)}
        )
    with pytest.raises(TerminalError, match="TLS with .* failed") as err:
        _connect(server, **{"database.ssl.mode": "verify_identity", "database.hostname": "localhost", **ca})
    assert "name database.hostname" in (err.value.hint or "")
    assert "database.ssl.mode=required encrypts" in (err.value.hint or "")
    with pytest.raises(TerminalError, match=r"TLS with .* failed \(database.ssl.mode=verify-full\)") as err:
        _connect(server, **{"database.ssl.mode": "verify-full", "database.hostname": "localhost", **ca})
    assert (
        "verify-full also needs" in (err.value.hint or "")
        and "database.ssl.mode=trust encrypts" in err.value.hint
    )
    # verify_ca checks the chain only: "localhost" is not in the certificate, and that is fine.
    with contextlib.closing(
        _connect(server, **{"database.ssl.mode": "verify_ca", "database.hostname": "localhost", **ca})
    ) as conn:
        assert _cipher(conn)
    # The binlog stream uses the same settings: it reads over TLS too.
    settings = _settings(dict(server.props(), **{"database.ssl.mode": "verify_identity", **ca}))
    stream = BinlogStream(settings, unique_name.server_id(), lambda db, t: None, blocking=False)
    try:
        first = next(iter(stream.events()))
        assert first.kind in ("rotate", "format") and isinstance(stream.conn._sock, ssl.SSLSocket)
    finally:
        stream.close()


def test_client_certificate_from_the_keystore(mariadb_factory: Any, pki: Pki, unique_name: Any) -> None:
    """database.ssl.keystore holds the client certificate and key (PEM or PKCS12) for users that
    REQUIRE X509."""
    server = mariadb_factory(
        ssl_ca=str(pki.ca_pem), ssl_cert=str(pki.server_pem), ssl_key=str(pki.server_key_pem)
    )
    user = unique_name("x509")
    server.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw' REQUIRE X509")
    props = {
        "database.user": user,
        "database.password": "pw",
        "database.ssl.mode": "verify_identity",
        "database.ssl.truststore": str(pki.ca_pem),
    }
    with pytest.raises(TerminalError, match="access denied"):
        _connect(server, **props)
    for store, password in ((pki.client_pem, None), (pki.client_p12, "keypw")):
        extra = {"database.ssl.keystore": str(store)}
        if password:
            extra["database.ssl.keystore.password"] = password
        with contextlib.closing(_connect(server, **props, **extra)) as conn:
            assert _cipher(conn)
    with pytest.raises(TerminalError, match="database.ssl.keystore .* PKCS12 file that opens with"):
        _connect(
            server,
            **props,
            **{"database.ssl.keystore": str(pki.client_p12), "database.ssl.keystore.password": "wrong"},
        )


def test_java_key_stores_are_refused_with_the_conversion(tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + b"\x00" * 32)
    props = {
        "database.hostname": "127.0.0.1",
        "database.ssl.mode": "verify_ca",
        "database.ssl.truststore": str(jks),
        "database.ssl.truststore.password": "changeit",
    }
    with pytest.raises(
        TerminalError, match="is a Java KeyStore \\(JKS\\); Tidemark reads PEM or PKCS12"
    ) as err:
        _settings(props)
    assert "keytool -importkeystore" in (err.value.hint or "") and "changeit" not in str(err.value)
    with pytest.raises(TerminalError, match="cannot be read"):
        _settings(dict(props, **{"database.ssl.truststore": str(tmp_path / "missing.pem")}))
    with pytest.raises(TerminalError, match="database.ssl.mode=sometimes is not one of"):
        _settings({"database.ssl.mode": "sometimes"})
