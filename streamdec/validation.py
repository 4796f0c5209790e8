"""Checks shared by the frozen config dataclasses (each validates itself once, in
``__post_init__``)."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import typing
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, packaged (a declared dependency there)
    import tomli as tomllib

__all__ = ["require_finite", "require_at_least", "require_positive", "unknown_names",
           "require_sample_rate", "build_table", "read_toml"]


def require_finite(config, where: str) -> None:
    """ConfigError for any number field of the dataclass ``config`` (annotated ``int`` or
    ``float``, or either ``| None``) whose value is not a number of that kind (``max_batch =
    "x"`` or ``2.5`` in a config file, a bool anywhere), or a float that is NaN or infinite
    (``--blank-penalty nan`` must be refused, not decode garbage). An int is a float."""
    hints = _number_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind = hints.get(f.name)
        if kind is not None and value is not None and not _is_number(value, kind):
            what = "an integer" if kind is int else "a number"
            raise ConfigError(f"{where}.{f.name} must be {what}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}.{f.name} must be a finite number, got {value}")


def _is_number(value, kind: type) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, np.integer) if kind is int else (int, float, np.number))


@functools.lru_cache(maxsize=None)
def _number_hints(cls) -> dict[str, type]:
    """The fields of ``cls`` annotated int or float (or either | None): name -> int/float."""
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        args = set(typing.get_args(hint)) - {type(None)} if typing.get_args(hint) else {hint}
        if len(args) == 1 and next(iter(args)) in (int, float):
            out[name] = next(iter(args))
    return out


def require_at_least(config, where: str, names, bound: int) -> None:
    """ConfigError unless each named field of ``config`` is >= ``bound``."""
    for name in names:
        value = getattr(config, name)
        if not value >= bound:
            raise ConfigError(f"{where}.{name} must be >= {bound}, got {value}")


def require_positive(config, where: str, names) -> None:
    """ConfigError unless each named field of ``config`` is > 0."""
    for name in names:
        value = getattr(config, name)
        if not value > 0:
            raise ConfigError(f"{where}.{name} must be > 0, got {value}")


def unknown_names(names: Iterable[str], known: Sequence[str], what: str) -> str | None:
    """The message for the ``names`` that are not in ``known`` (``unknown option(s) a, b;
    known: x, y, z``), None when every one is known. Each caller raises its own error with
    it (ConfigError, a client's bad_config, an upload's 400)."""
    unknown = sorted(set(names) - set(known))
    if not unknown:
        return None
    return f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}"


def require_sample_rate(rate, where: str = "", error: type[Exception] = ConfigError) -> int:
    """``rate`` (Hz) as an int when it is a positive integer, else ``error`` with ``where``
    in front of the reason: config files, flags, raw PCM and the audio a stream accepts
    (AudioInputError) all check it here."""
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}the sample rate must be a positive integer, got {rate!r}")
    return int(rate)


def build_table(cls, table: Any, where: str, keys=None, make=None):
    """``cls`` from a TOML table whose keys are ``keys`` (default: its fields), made by
    ``make`` (default: ``cls``): ConfigError, naming ``where``, for what is not a table, an
    unknown key, a value that is not text for a text field, or a missing or invalid value
    (config files, the model catalog)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {table!r}")
    keys = keys or sorted(f.name for f in dataclasses.fields(cls))
    message = unknown_names(table, keys, "key")
    if message:
        raise ConfigError(f"{where}: {message}")
    for key in _text_fields(cls) & set(table):  # (their checks call str methods)
        if not isinstance(table[key], str):
            raise ConfigError(f"{where}: {key} must be text, got {table[key]!r}")
    try:
        return (make or cls)(**table)
    except (TypeError, ConfigError) as e:  # ConfigError: the dataclass's own checks
        raise ConfigError(f"{where}: {e}") from None


@functools.lru_cache(maxsize=None)
def _text_fields(cls) -> frozenset[str]:
    """The fields of the dataclass ``cls`` that hold text (``str`` or ``str | None``)."""
    hints = typing.get_type_hints(cls)
    return frozenset(f.name for f in dataclasses.fields(cls) if hints[f.name] in (str, str | None))


def read_toml(path: Path, what: str) -> dict:
    """The parsed TOML file ``path`` (``what``: "config", "catalog"); ConfigError when it is
    missing, unreadable or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read {what} file ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{path}: not valid TOML (arrays or tables nested too deep)") from None
