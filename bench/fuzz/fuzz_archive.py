"""Fuzz target: a model archive (``unpack``, as ``streamdec models get --from`` unpacks
one: tar, tar.bz2, tar.gz or tar.xz read as a stream, each member checked). Invariants:
the only error is ModelDownloadError; nothing is written outside the destination, and no
link there points outside it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness import fuzz, instrumented, scratch_file

with instrumented("tarfile"):
    from streamdec.errors import ModelDownloadError
    from streamdec.hub.archive import unpack

_ARCHIVE = scratch_file("model.tar.bz2")
_ROOT = _ARCHIVE.parent
_DEST = _ROOT / "dest"


def _inside(path: Path, root: Path) -> bool:
    return os.path.realpath(path).startswith(str(root.resolve()) + os.sep) or \
        os.path.realpath(path) == str(root.resolve())


def TestOneInput(data: bytes) -> None:
    shutil.rmtree(_DEST, ignore_errors=True)
    _ARCHIVE.write_bytes(data)
    try:
        unpack(_ARCHIVE, _DEST)
    except ModelDownloadError:
        pass
    assert sorted(p.name for p in _ROOT.iterdir()) == ["dest", "model.tar.bz2"], \
        "written outside the destination"
    for folder, dirs, files in os.walk(_DEST):
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                assert _inside(path, _DEST), f"{path} links outside the destination"


if __name__ == "__main__":
    fuzz(TestOneInput)
