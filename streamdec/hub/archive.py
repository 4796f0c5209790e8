"""Checking a downloaded archive and unpacking it safely.

Unpacking reads the archive once, as a stream, and checks each member before it is
written: no absolute name, no ``..``, no link whose target leaves the directory, no
device or FIFO; tarfile's ``data`` filter (Python >= 3.11.4, 3.10.12) is applied as well.
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from pathlib import Path

from ..errors import ModelDownloadError

__all__ = ["sha256_of", "check_archive", "unpack", "check_files"]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_archive(path: Path, size_bytes: int | None, sha256: str | None) -> str:
    """ModelDownloadError unless the file has the expected size and checksum (each when
    given); returns its sha256."""
    size = path.stat().st_size
    if size_bytes is not None and size != size_bytes:
        raise ModelDownloadError(f"{path.name}: {size} bytes, but the catalog says "
                                 f"{size_bytes}: the archive is incomplete or not the one "
                                 "expected")
    digest = sha256_of(path)
    if sha256 is not None and digest != sha256:
        raise ModelDownloadError(f"{path.name}: sha256 {digest} does not match the "
                                 f"catalog's {sha256}")
    return digest


def _escapes(name: str) -> bool:
    norm = posixpath.normpath(name.replace("\\", "/"))
    return (name.startswith(("/", "\\")) or norm == ".." or norm.startswith("../")
            or (len(name) > 1 and name[1] == ":"))


def _refuse(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` must not be unpacked, or None."""
    if _escapes(member.name):
        return "its path leaves the model directory"
    if member.issym():
        target = member.linkname
        if target.startswith("/") or _escapes(posixpath.join(posixpath.dirname(member.name),
                                                              target)):
            return f"it links to {target!r}, outside the model directory"
    elif member.islnk():
        if _escapes(member.linkname):
            return f"it links to {member.linkname!r}, outside the model directory"
    elif not (member.isfile() or member.isdir()):
        return "it is a device or a FIFO"
    return None


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` (.tar, .tar.bz2, .tar.gz, .tar.xz) into the empty directory
    ``dest``; returns the model directory: the archive's single top-level directory, as
    the publishers pack them, else ``dest`` itself. ModelDownloadError for an unreadable
    archive or an unsafe member (nothing more is written once one is met)."""
    dest.mkdir(parents=True, exist_ok=True)
    extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    try:
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                why = _refuse(member)
                if why:
                    raise ModelDownloadError(f"{archive.name}: refused to unpack "
                                             f"{member.name!r}: {why}")
                tar.extract(member, dest, **extra)
    except ModelDownloadError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, TypeError, KeyError,
            RecursionError) as e:
        # (TypeError: tarfile's stream reader given a gzip header cut after its third
        # byte calls ord() on nothing; a link tarfile cannot make it unpacks as a copy of
        # its target, KeyError when there is none before it, RecursionError when the
        # target is the link itself)
        raise ModelDownloadError(f"{archive.name}: not a readable .tar.bz2 archive "
                                 f"({type(e).__name__}: {e})") from None
    children = list(dest.iterdir())
    return children[0] if len(children) == 1 and children[0].is_dir() else dest


def check_files(model_dir: Path, files, archive_name: str) -> None:
    """ModelDownloadError naming the files of ``files`` that ``model_dir`` lacks."""
    missing = [f for f in files if not (model_dir / f).is_file()]
    if missing:
        raise ModelDownloadError(f"{archive_name}: the archive lacks {', '.join(missing)}")
