"""A Python 3.9 virtualenv with the real k2 (k2 publishes wheels only for Python 3.9 with
torch 1.13.1), to prove the files ``streamdec lang`` writes without k2.

Built once per machine with pyenv's Python 3.9 (``torch==1.13.1``, ``k2==1.23.4``, about
3.4 GB, a minute or two) under ``~/.cache/streamdec/k2-venv-py39`` (``STREAMDEC_K2_VENV``
overrides), and reused while ``import k2`` works there. A fresh machine (CI) builds it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

PINS = ("torch==1.13.1", "k2==1.23.4")


def venv_dir() -> Path:
    default = Path.home() / ".cache" / "streamdec" / "k2-venv-py39"
    return Path(os.environ.get("STREAMDEC_K2_VENV", default))


def python39() -> Path:
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    found = sorted(glob.glob(f"{root}/versions/3.9*/bin/python"))
    if not found:
        raise RuntimeError(f"no Python 3.9 under {root}/versions (pyenv install 3.9)")
    return Path(found[-1])


def _works(python: Path) -> bool:
    if not python.is_file():
        return False
    ok = subprocess.run([str(python), "-c", "import k2, torch"], capture_output=True,
                        timeout=300)
    return ok.returncode == 0


def k2_python() -> Path:
    """The virtualenv's python, building the virtualenv first when needed."""
    target = venv_dir()
    python = target / "bin" / "python"
    if _works(python):
        return python
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python39()), "-m", "venv", str(tmp)], check=True, timeout=300)
    subprocess.run([str(tmp / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", *PINS], check=True, timeout=1800)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)  # python -m ... works from the moved folder (pyvenv.cfg is beside it)
    if not _works(python):
        raise RuntimeError(f"{target}: k2 does not import after installing {PINS}")
    return python
