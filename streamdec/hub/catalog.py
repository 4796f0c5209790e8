"""The catalog of downloadable models: ``catalog.toml`` in this package, plus the
entries of a catalog file of your own (a mirror, an in-house model) named by the
``STREAMDEC_CATALOG`` environment variable or ``--catalog``; an entry there replaces the
built-in entry of the same name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import ConfigError
from ..validation import build_table, read_toml

__all__ = ["CatalogEntry", "CATALOG_ENV", "is_model_name", "load_catalog", "find_entry"]

#: environment variable naming a catalog file whose entries add to the built-in ones
CATALOG_ENV = "STREAMDEC_CATALOG"
BUILTIN_CATALOG = Path(__file__).resolve().parent / "catalog.toml"
CPU_MARKS = ("low", "medium", "high")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CatalogEntry:
    """One downloadable model (the keys are described in ``catalog.toml``)."""

    name: str  # the directory it unpacks to; what ``--model NAME`` takes
    url: str  # the .tar.bz2 archive
    files: tuple[str, ...]  # files the unpacked directory must hold
    size_bytes: int | None = None  # exact archive size, when the publisher gives it
    sha256: str | None = None  # archive checksum, when the publisher gives it
    language: str = ""
    family: str = ""
    trained_on: str = ""
    chunk: str = ""
    encoder_mb: float | None = None
    encoder_int8_mb: float | None = None
    unpacked_mb: float | None = None
    cpu: str = ""
    recommended: bool = False
    docs: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        where = f"model {self.name!r}"
        if not is_model_name(self.name):
            raise ConfigError(f"model name {self.name!r}: letters, digits, '.', '_' and '-' "
                              "only, not starting with '.' or '-'")
        if not isinstance(self.url, str) or not re.match(r"(https?|file)://", self.url):
            raise ConfigError(f"{where}: url must be an http(s):// or file:// URL, "
                              f"got {self.url!r}")
        if (not isinstance(self.files, (list, tuple)) or not self.files
                or not all(isinstance(f, str) and f for f in self.files)):
            raise ConfigError(f"{where}: files must be a non-empty list of file names")
        object.__setattr__(self, "files", tuple(self.files))
        if self.size_bytes is not None and (isinstance(self.size_bytes, bool) or not (
                isinstance(self.size_bytes, int) and self.size_bytes > 0)):
            raise ConfigError(f"{where}: size_bytes must be a positive integer, "
                              f"got {self.size_bytes!r}")
        if self.sha256 is not None:
            if not isinstance(self.sha256, str) or not _SHA256.fullmatch(self.sha256.lower()):
                raise ConfigError(f"{where}: sha256 must be 64 hex digits, got {self.sha256!r}")
            object.__setattr__(self, "sha256", self.sha256.lower())
        if self.cpu and self.cpu not in CPU_MARKS:
            raise ConfigError(f"{where}: cpu must be one of {CPU_MARKS}, got {self.cpu!r}")


def is_model_name(value) -> bool:
    """A name a model may have (and so a directory of the cache, never a path)."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def _read(path: Path) -> dict[str, CatalogEntry]:
    data = read_toml(path, "catalog")
    unknown = sorted(set(data) - {"model"})
    models = data.get("model", [])
    if unknown or not isinstance(models, list):
        raise ConfigError(f"{path}: a catalog holds only [[model]] tables"
                          + (f", not {', '.join(unknown)}" if unknown else ""))
    entries: dict[str, CatalogEntry] = {}
    for n, table in enumerate(models, 1):
        entry = build_table(CatalogEntry, table, f"{path} [[model]] #{n}")
        if entry.name in entries:
            raise ConfigError(f"{path}: model {entry.name!r} is listed twice")
        entries[entry.name] = entry
    return entries


def load_catalog(extra: str | Path | None = None) -> dict[str, CatalogEntry]:
    """Name -> entry: the built-in catalog, then ``extra`` (or else the file that
    ``STREAMDEC_CATALOG`` names) on top of it."""
    entries = _read(BUILTIN_CATALOG)
    extra = extra or os.environ.get(CATALOG_ENV) or None
    if extra:
        entries.update(_read(Path(extra).expanduser()))
    return entries


def find_entry(name: str, extra: str | Path | None = None) -> CatalogEntry:
    """The catalog entry called ``name``; ConfigError naming how to list them otherwise."""
    entries = load_catalog(extra)
    if name not in entries:
        raise ConfigError(f"unknown model {name!r}; 'streamdec models list' shows the "
                          f"{len(entries)} names it knows")
    return entries[name]
