"""Checks shared by the frozen config dataclasses (each validates itself once, in
``__post_init__``)."""

from __future__ import annotations

import dataclasses
import math

from .errors import ConfigError

__all__ = ["require_finite"]


def require_finite(config, where: str) -> None:
    """ConfigError for any float field of the dataclass ``config`` that is NaN or infinite
    (``--blank-penalty nan`` must be refused, not decode garbage)."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}.{f.name} must be a finite number, got {value}")
