"""``StoreConfig``: the ``[store]`` table of a config file, validated once.

    [store]
    enabled = true                       # serve: on; transcribe never writes transcripts
    url = ""                             # "": SQLite in the data directory
    # url = "sqlite:////var/lib/streamdec/transcripts.sqlite3"   # sqlite:/// + the path
    # url = "postgresql://streamdec@db.example/streamdec"
    retention_days = 0                   # 0: keep every transcript until deleted
    busy_timeout_ms = 5000               # SQLite: how long a writer waits for another
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..home import streamdec_data
from ..validation import require_finite

__all__ = ["StoreConfig", "DEFAULT_FILE", "SCHEMES"]

#: the SQLite file of the default store, in the data directory (``streamdec_data()``)
DEFAULT_FILE = "transcripts.sqlite3"
SCHEMES = ("sqlite", "postgresql", "postgres")


@dataclass(frozen=True)
class StoreConfig:
    # every final of every stream and call is written here before it is sent (``serve``)
    enabled: bool = True
    # "": SQLite at <data directory>/transcripts.sqlite3; "sqlite:///PATH" (PATH follows the
    # third slash: sqlite:////var/t.db is /var/t.db); "postgresql://USER:PASSWORD@HOST:PORT/DB"
    # (libpq's URL form)
    url: str = ""
    # transcripts whose record started longer ago than this are purged (0: kept)
    retention_days: float = 0.0
    # SQLite: how long a write waits for another process's write (``--workers N``)
    busy_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigError(f"store.enabled must be true or false, got {self.enabled!r}")
        require_finite(self, "store")
        if self.retention_days < 0:
            raise ConfigError(f"store.retention_days must be >= 0, got {self.retention_days}")
        if self.busy_timeout_ms < 0:
            raise ConfigError(f"store.busy_timeout_ms must be >= 0, got {self.busy_timeout_ms}")
        if self.url and self.url.partition("://")[0] not in SCHEMES:
            raise ConfigError(f"store.url {self.url!r}: expected sqlite:///PATH or "
                              "postgresql://... (or \"\" for the data directory's SQLite file)")
        if self.url.startswith("sqlite:") and (not self.url.startswith("sqlite:///")
                                               or not self.url[len("sqlite:///"):]):
            raise ConfigError(f"store.url {self.url!r}: names no file (sqlite:///PATH)")

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "postgresql" if self.url.startswith(("postgresql:", "postgres:")) else "sqlite"

    def sqlite_path(self) -> Path:
        """The SQLite file (``url`` "" : the data directory's ``transcripts.sqlite3``)."""
        if not self.url:
            return streamdec_data() / DEFAULT_FILE
        return Path(self.url[len("sqlite:///"):]).expanduser()
