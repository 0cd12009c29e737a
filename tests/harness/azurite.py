"""A private object store for tests: Azurite's blob service (Microsoft's Azure Storage emulator,
installed by .ci/setup with npm from tests/harness/azurite/package-lock.json).

It checks shared-key signatures, so a wrong account key gets the same `403 AuthorizationFailure`
Azure gives, and delta-rs talks to it with its ordinary Azure client (`az://<container>/<path>`
plus the storage options from `storage_options()`).
"""

from __future__ import annotations

from pathlib import Path

from connectors.app.embedded.server import EmbeddedServer, launch
from connectors.app.embedded.util import HarnessError, make_server_dir, port_open

BIN = Path(__file__).resolve().parent / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's documented development-account key (public; not a secret).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class Azurite(EmbeddedServer):
    label = process_name = "Azurite"
    pid_file = "azurite.pid"

    def __init__(self, base: Path) -> None:
        super().__init__(base, base / "azurite.log")
        self.base = base

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def storage_options(self, key: str = KEY) -> dict[str, str]:
        """delta-rs storage options for this account (`key`: the account key to sign with)."""
        return {
            "azure_storage_account_name": ACCOUNT,
            "azure_storage_account_key": key,
            "azure_storage_endpoint": self.endpoint,
            "allow_http": "true",
            "max_retries": "2",
        }

    def init(self) -> None:
        if not BIN.exists():
            raise HarnessError(f"{BIN} is missing: run .ci/setup (it installs Azurite with npm)")

    def _command(self) -> list[str]:
        return [
            str(BIN),
            "--silent",
            "--location",
            str(self.base / "data"),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--skipApiVersionCheck",
            "--loose",
        ]

    def _probe(self) -> bool:
        return port_open(self.port)

    def create_container(self, name: str) -> str:
        from pyarrow import fs

        store = fs.AzureFileSystem(
            account_name=ACCOUNT,
            account_key=KEY,
            blob_storage_authority=f"127.0.0.1:{self.port}",
            blob_storage_scheme="http",
        )
        store.create_dir(name)
        return name


def start_azurite(tmp_path: Path | None = None) -> Azurite:
    return launch(Azurite(make_server_dir("azurite", tmp_path)))
