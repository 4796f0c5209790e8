"""A real PostgreSQL server for tests, from Debian's ``postgresql`` package: ``initdb``
into a fresh folder, ``pg_ctl`` on a free loopback port, stopped and removed afterwards.

As root (CI), the server runs as the ``postgres`` user the package creates (PostgreSQL
refuses to run as root): the folder is made over to it and every command runs through
``runuser``. A missing package fails with a message (never a skip).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PostgresServer", "pg_bin"]


def pg_bin() -> Path:
    """The folder of ``initdb`` and ``pg_ctl`` (the newest installed PostgreSQL)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise AssertionError("PostgreSQL is not installed: the store's tests need Debian's "
                             "postgresql package (scripts/install-test-deps.sh installs it)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as pg: pg.url`` — a server with database ``streamdec``
    (user ``streamdec``, trust authentication on loopback only)."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.as_root = os.geteuid() == 0
        # as root, in /tmp: the postgres user must reach it (a TMPDIR may be root's own)
        self.root = Path(tempfile.mkdtemp(prefix="streamdec-pg-",
                                          dir="/tmp" if self.as_root else None))
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql://streamdec@127.0.0.1:{self.port}/streamdec"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(a) for a in args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--"] + command
        return subprocess.run(command, capture_output=True, text=True, check=check,
                              timeout=120)

    def __enter__(self) -> "PostgresServer":
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(self.bin / "initdb", "-D", self.data, "-U", "streamdec", "-A", "trust",
                  "--no-sync", "-E", "UTF8")
        self.start()
        self._run(self.bin / "createdb", "-h", "127.0.0.1", "-p", self.port, "-U", "streamdec",
                  "streamdec")
        return self

    def start(self) -> None:
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                   f"-c unix_socket_directories={self.root} -c fsync=off")
        self._run(self.bin / "pg_ctl", "-D", self.data, "-o", options, "-l",
                  self.root / "log", "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def new_database(self, prefix: str = "t") -> str:
        """The URL of a new, empty database of this server (one per test)."""
        import psycopg

        name = f"{prefix}{time.monotonic_ns()}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url.rpartition("/")[0] + f"/{name}"

    def __exit__(self, *exc) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
