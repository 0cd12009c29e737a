"""A private object store for tests: Azurite's blob service (Microsoft's Azure Storage emulator,
installed by .ci/setup with npm from tests/harness/azurite/package-lock.json).

It checks shared-key signatures, so a wrong account key gets the same `403 AuthorizationFailure`
Azure gives, and delta-rs talks to it with its ordinary Azure client (`az://<container>/<path>`
plus the storage options from `storage_options()`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from connectors.app.embedded.util import (
    HarnessError,
    free_port,
    kill_tree,
    make_server_dir,
    popen_logged,
    port_open,
    register,
    remove_dir,
    tail,
    unregister,
    wait_until,
)

BIN = Path(__file__).resolve().parent / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's documented development-account key (public; not a secret).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class Azurite:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.logfile = base / "azurite.log"
        self._proc: subprocess.Popen | None = None

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

    def start(self) -> None:
        if not BIN.exists():
            raise HarnessError(f"{BIN} is missing: run .ci/setup (it installs Azurite with npm)")
        cmd = [
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
        self._proc = popen_logged(cmd, self.logfile, cwd=self.base)
        (self.base / "azurite.pid").write_text(str(self._proc.pid))
        wait_until(
            lambda: self._alive() and port_open(self.port),
            60,
            f"Azurite on port {self.port}",
            on_timeout=lambda: tail(self.logfile),
        )

    def _alive(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            raise HarnessError(f"Azurite exited with code {self._proc.returncode}:\n{tail(self.logfile)}")
        return True

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

    def destroy(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            kill_tree(self._proc.pid)
        self._proc = None
        unregister(self)
        remove_dir(self.base)


def start_azurite(tmp_path: Path | None = None) -> Azurite:
    server = Azurite(make_server_dir("azurite", tmp_path))
    register(server)
    try:
        server.start()
    except BaseException:
        server.destroy()
        raise
    return server
