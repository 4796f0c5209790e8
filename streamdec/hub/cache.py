"""Where downloaded models live, and what ``--model VALUE`` means.

::

    $STREAMDEC_HOME/models/NAME/          an installed model (only ever renamed into place whole)
    $STREAMDEC_HOME/models/.partial/      downloads in progress (NAME.tar.bz2 + NAME.tar.bz2.json)

``STREAMDEC_HOME`` defaults to ``$XDG_CACHE_HOME/streamdec``, else ``~/.cache/streamdec``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelLoadError
from ..home import HOME_ENV, streamdec_home
from .catalog import is_model_name, load_catalog

__all__ = ["HOME_ENV", "streamdec_home", "models_dir", "installed_dir", "resolve_model_dir"]

def models_dir() -> Path:
    return streamdec_home() / "models"


def installed_dir(name: str) -> Path | None:
    """The directory of the downloaded model ``name``, or None when it is not there."""
    if not is_model_name(name):
        return None
    d = models_dir() / name
    return d if d.is_dir() else None


def resolve_model_dir(value: str | None, base_dir: Path | None = None) -> str | None:
    """What a model setting names: an existing path (relative to ``base_dir`` when given,
    the folder of the config file that sets it) is that path; otherwise a catalog name is
    its downloaded directory, or a ModelLoadError telling how to download it; anything
    else is returned as a path, for the loader's own "not found" error."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.exists() or "/" in value or os.sep in value:
        return str(path)
    if is_model_name(value):
        found = installed_dir(value)  # also one a catalog no longer in use installed
        if found is not None:
            return str(found)
        if value in load_catalog():
            raise ModelLoadError(f"model {value!r} is not downloaded yet; run: "
                                 f"streamdec models get {value}")
    return str(path)
