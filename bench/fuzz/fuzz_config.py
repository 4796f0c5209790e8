"""Fuzz target: a config file (``load_config`` of a ``.toml`` file: TOML, then every
table's keys and values, paths resolved beside the file). Invariants: the only errors
are ConfigError (the file) and ModelLoadError (``model_dir`` names a catalog model not
downloaded yet); a config that loads is frozen and loads again to the same value."""

from __future__ import annotations

from harness import fuzz, instrumented, scratch_file

with instrumented("tomllib"):
    from streamdec.appconfig import load_config
    from streamdec.errors import ConfigError, ModelLoadError

_FILE = scratch_file("streamdec.toml")


def TestOneInput(data: bytes) -> None:
    _FILE.write_bytes(data)
    try:
        config = load_config(_FILE)
    except (ConfigError, ModelLoadError):
        return
    assert load_config(_FILE) == config


if __name__ == "__main__":
    fuzz(TestOneInput)
