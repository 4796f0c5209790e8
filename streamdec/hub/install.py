"""``streamdec models get``: download, verify, unpack, then rename into the cache.

A model directory appears in the cache only whole: the archive is unpacked into a
temporary directory beside the cache's ``models/NAME`` and renamed there once its files
are checked. A download that stops short keeps its bytes for the next call to resume; an
archive that arrived whole but is wrong (size, checksum, contents) is deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelDownloadError
from .archive import check_archive, check_files, unpack
from .cache import models_dir
from .catalog import CatalogEntry
from .download import discard_partial, fetch

__all__ = ["Installed", "install", "SOURCE_FILE"]

#: written into each installed model directory: where it came from and its sha256
SOURCE_FILE = ".streamdec-source.json"


@dataclass(frozen=True)
class Installed:
    path: Path  # the model directory in the cache
    sha256: str | None  # of the archive; None when the model was there already
    fresh: bool  # False: it was downloaded before, nothing was done


@contextlib.contextmanager
def _exclusive(lock_path: Path, name: str):
    """One ``get`` of a model at a time (a second one fails at once, clearly)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(lock_path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ModelDownloadError(f"{name}: another 'streamdec models get' of this model "
                                     "is running") from None
        yield


def install(entry: CatalogEntry, *, url: str | None = None, archive: str | Path | None = None,
            force: bool = False, quiet: bool = False) -> Installed:
    """Put ``entry`` into the cache: from ``archive`` (a local file) when given, else
    downloaded from ``url`` or the entry's own URL. A model already there is kept unless
    ``force``."""
    root = models_dir()
    target = root / entry.name
    if target.is_dir() and not force:
        return Installed(target, None, False)
    partial = root / ".partial"
    partial.mkdir(parents=True, exist_ok=True)
    with _exclusive(partial / f"{entry.name}.lock", entry.name):
        if archive is not None:
            path, owned = Path(archive).expanduser(), False
            if not path.is_file():
                raise ModelDownloadError(f"{path}: no such archive file")
        else:
            path, owned = partial / f"{entry.name}.tar.bz2", True
            fetch(url or entry.url, path, quiet=quiet, label=entry.name)
        try:
            digest = check_archive(path, entry.size_bytes, entry.sha256)
            tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=root))
            try:
                model = unpack(path, tmp / "unpacked")
                check_files(model, entry.files, path.name)
                (model / SOURCE_FILE).write_text(json.dumps(
                    {"name": entry.name, "url": None if archive else (url or entry.url),
                     "archive": str(path) if archive else None, "sha256": digest},
                    indent=1) + "\n", encoding="utf-8")
                if target.exists():  # --force: the old one leaves whole, the new one comes whole
                    os.rename(target, tmp / "replaced")
                os.rename(model, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        except ModelDownloadError:
            if owned:  # it arrived whole but is wrong: resuming it cannot help
                discard_partial(path)
            raise
        if owned:
            discard_partial(path)
    return Installed(target, digest, True)
