"""Fuzz target: a model catalog file of one's own (``load_catalog(extra)``: TOML of
``[[model]]`` tables, each a ``CatalogEntry``). Invariants: the only error is
ConfigError; every entry that loads has a model name (never a path), an http(s) or file
URL, a non-empty tuple of file names, a lower-case sha256 when it has one."""

from __future__ import annotations

import re

from harness import fuzz, instrumented, scratch_file

with instrumented("tomllib"):
    from streamdec.errors import ConfigError
    from streamdec.hub.catalog import is_model_name, load_catalog

_FILE = scratch_file("catalog.toml")


def TestOneInput(data: bytes) -> None:
    _FILE.write_bytes(data)
    try:
        entries = load_catalog(_FILE)
    except ConfigError:
        return
    for name, entry in entries.items():
        assert name == entry.name and is_model_name(name) and "/" not in name
        assert re.match(r"(https?|file)://", entry.url)
        assert isinstance(entry.files, tuple) and entry.files
        assert entry.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", entry.sha256)


if __name__ == "__main__":
    fuzz(TestOneInput)
