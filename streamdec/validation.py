"""Checks shared by the frozen config dataclasses (each validates itself once, in
``__post_init__``)."""

from __future__ import annotations

import dataclasses
import math

from .errors import ConfigError

__all__ = ["require_finite", "require_at_least", "require_positive"]


def require_finite(config, where: str) -> None:
    """ConfigError for any float field of the dataclass ``config`` that is NaN or infinite
    (``--blank-penalty nan`` must be refused, not decode garbage)."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}.{f.name} must be a finite number, got {value}")


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
