"""Where streamdec keeps its files for a user: ``$STREAMDEC_HOME``, else
``$XDG_CACHE_HOME/streamdec``, else ``~/.cache/streamdec`` (downloaded models under
``models/``, ``streamdec.hub.cache``; compiled lang directories under ``lang-cache/``,
``streamdec.lang.compiled``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "streamdec_home"]

HOME_ENV = "STREAMDEC_HOME"


def streamdec_home() -> Path:
    """The cache root (``$STREAMDEC_HOME``, else ``$XDG_CACHE_HOME/streamdec``, else
    ``~/.cache/streamdec``)."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "streamdec"
