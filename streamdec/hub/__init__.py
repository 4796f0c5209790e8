"""Published models: the catalog, downloads and the local cache (``streamdec models``).

This package does I/O (HTTP, files) and sits above the core: the core only ever sees the
directory a model name resolves to (``resolve_model_dir``).
"""

from .cache import models_dir, resolve_model_dir, streamdec_home
from .catalog import CatalogEntry, find_entry, load_catalog
from .install import Installed, install

__all__ = ["CatalogEntry", "Installed", "find_entry", "install", "load_catalog",
           "models_dir", "resolve_model_dir", "streamdec_home"]
