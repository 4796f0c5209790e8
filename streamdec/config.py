"""Config files (TOML) -> frozen config dataclasses, validated once.

A file has optional tables ``[model]``, ``[features]``, ``[search]``, ``[endpoint]``
(with ``[endpoint.rule1]`` .. ``[endpoint.rule3]``), ``[audio]`` and ``[server]`` (the
daemon, ``streamdec.server.config``); any key it leaves
out keeps its default. Unknown keys are errors (a typo must not be silently ignored).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .endpoint import EndpointConfig, EndpointRule
from .errors import ConfigError
from .features import FeatureConfig
from .models.config import ModelConfig
from .recognizer import RecognizerConfig
from .search.config import SearchConfig
from .server.config import ServerConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, packaged (a declared dependency there)
    import tomli as tomllib

__all__ = ["AudioConfig", "AppConfig", "load_config", "CONFIG_DIR"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


@dataclass(frozen=True)
class AudioConfig:
    """What live audio sources deliver when they do not say (raw PCM over a socket, a mic)."""

    sample_rate: int = 16000
    chunk_ms: int = 100  # microphone / realtime pacing block

    def __post_init__(self) -> None:
        if self.sample_rate <= 0 or self.chunk_ms <= 0:
            raise ConfigError(f"audio: sample_rate and chunk_ms must be positive: {self}")


@dataclass(frozen=True)
class AppConfig:
    recognizer: RecognizerConfig = field(default_factory=RecognizerConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    server: ServerConfig = field(default_factory=ServerConfig)


def _build(cls, table: Any, where: str):
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {table!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(names))}")
    try:
        return cls(**table)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def parse_config(data: dict, where: str = "config") -> AppConfig:
    """Build an AppConfig from a parsed TOML document."""
    unknown = sorted(set(data) - {"model", "features", "search", "endpoint", "audio",
                                "server"})
    if unknown:
        raise ConfigError(f"{where}: unknown table(s) {', '.join(unknown)}")
    endpoint = dict(data.get("endpoint", {}))
    for rule in ("rule1", "rule2", "rule3"):
        if rule in endpoint:
            endpoint[rule] = _build(EndpointRule, endpoint[rule], f"{where} [endpoint.{rule}]")
    rec = RecognizerConfig(
        model=_build(ModelConfig, data.get("model", {}), f"{where} [model]"),
        features=_build(FeatureConfig, data.get("features", {}), f"{where} [features]"),
        search=_build(SearchConfig, data.get("search", {}), f"{where} [search]"),
        endpoint=_build(EndpointConfig, endpoint, f"{where} [endpoint]"))
    return AppConfig(recognizer=rec, audio=_build(AudioConfig, data.get("audio", {}),
                                                  f"{where} [audio]"),
                     server=_build(ServerConfig, data.get("server", {}), f"{where} [server]"))


def load_config(path: str | Path | None) -> AppConfig:
    """Load a TOML config file; None gives the defaults. A bare name such as
    ``telephony`` names a file in the project's configs/ folder."""
    if path is None:
        return AppConfig()
    p = Path(path)
    if not p.exists() and not p.suffix and (CONFIG_DIR / f"{p}.toml").exists():
        p = CONFIG_DIR / f"{p}.toml"
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML ({e})") from None
    return parse_config(data, str(p))
