"""Where streamdec keeps its files for a user.

- The cache (``streamdec_home``): ``$STREAMDEC_HOME``, else ``$XDG_CACHE_HOME/streamdec``,
  else ``~/.cache/streamdec``: downloaded models under ``models/`` (``streamdec.hub.cache``),
  compiled lang directories under ``lang-cache/`` (``streamdec.lang.compiled``); all of it
  can be made again.
- The data (``streamdec_data``): ``$STREAMDEC_HOME``, else ``$XDG_DATA_HOME/streamdec``,
  else ``~/.local/share/streamdec``: what cannot be made again, the transcript store
  (``streamdec.records``), kept out of a cache that a user or a tool may clear."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "streamdec_home", "streamdec_data"]

HOME_ENV = "STREAMDEC_HOME"


def streamdec_home() -> Path:
    """The cache root (``$STREAMDEC_HOME``, else ``$XDG_CACHE_HOME/streamdec``, else
    ``~/.cache/streamdec``)."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "streamdec"


def streamdec_data() -> Path:
    """The data root (``$STREAMDEC_HOME``, else ``$XDG_DATA_HOME/streamdec``, else
    ``~/.local/share/streamdec``)."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "streamdec"
