"""Config files (TOML) -> frozen config dataclasses, validated once: the application's
config (``AppConfig``), above the core. Only the command line, the server and the Ray Serve
app import it; the core receives the frozen ``RecognizerConfig`` it holds.

A file has optional tables ``[model]``, ``[features]``, ``[search]``, ``[endpoint]``
(with ``[endpoint.rule1]`` .. ``[endpoint.rule3]``), ``[vad]`` (voice activity
detection, ``streamdec.audio.vad``), ``[second_pass]`` (a second pass over each
utterance, ``streamdec.core.second_pass``), ``[audio]``, ``[server]`` (the
daemon, ``streamdec.server.config``, with the engine's keys), ``[store]`` (the daemon's
transcript store, ``streamdec.records.config``) and ``[ray]`` (the daemon on Ray Serve,
``streamdec.rayserve.config``); any key it leaves
out keeps its default (a file without ``[search]`` gets the model's default search,
``search.config.default_search``; a ``[search]`` table starts from ``SearchConfig``'s
defaults, greedy). Unknown keys are errors (a typo must not be silently ignored).
Relative paths in a file (``model.model_dir``, ``model.encoder`` etc., ``search.hotwords_file``, the server's
``token_file``, ``tls_cert``, ``tls_key``) are relative to the file's folder; ``search.lang_dir`` and ``search.lm_file`` too when they exist there,
else they name files of the model directory. The built-in configs (``default``,
``telephony``, ``low-latency``, ``accurate``, ``two-pass``) ship inside the package
(``streamdec/configs/``) and are named without a suffix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .audio.features import FeatureConfig
from .audio.vad import VadConfig
from .core.endpoint import EndpointConfig, EndpointRule
from .core.recognizer import RecognizerConfig
from .core.second_pass import SecondPassConfig
from .errors import ConfigError
from .models.config import ModelConfig
from .rayserve.config import RayConfig
from .records.config import StoreConfig
from .search.config import SearchConfig
from .server.config import SETTINGS as SERVER_KEYS
from .server.config import ServerConfig
from .validation import build_table, read_toml, require_positive, require_sample_rate

__all__ = ["AudioConfig", "AppConfig", "load_config", "CONFIG_DIR"]

#: The built-in config files, shipped inside the package.
CONFIG_DIR = Path(__file__).resolve().parent / "configs"

#: (table, key) of settings that name files: relative to the config file that sets them
PATH_KEYS = (("model", "model_dir"), ("search", "hotwords_file"), ("server", "token_file"),
             ("server", "read_token_file"), ("server", "redact_patterns_file"),
             ("server", "tls_cert"), ("server", "tls_key"), ("model", "encoder"),
             ("model", "decoder"), ("model", "joiner"), ("model", "tokens"))
#: settings that name files of the model (``lang``, ``lm.onnx``): relative to the config
#: file when they exist there, else left for the model directory
#: (``SearchResources.model_file``)
MODEL_PATH_KEYS = (("search", "lang_dir"), ("search", "lm_file"))


@dataclass(frozen=True)
class AudioConfig:
    """What live audio sources deliver when they do not say (raw PCM over a socket, a mic)."""

    sample_rate: int = 16000
    chunk_ms: int = 100  # microphone / realtime pacing block

    def __post_init__(self) -> None:
        require_sample_rate(self.sample_rate, "audio.sample_rate")
        require_positive(self, "audio", ("chunk_ms",))


@dataclass(frozen=True)
class AppConfig:
    recognizer: RecognizerConfig = field(default_factory=RecognizerConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    store: StoreConfig = field(default_factory=StoreConfig)


def parse_config(data: dict, where: str = "config", base_dir: Path | None = None) -> AppConfig:
    """Build an AppConfig from a parsed TOML document; relative paths are taken relative to
    ``base_dir`` (the config file's folder) when given."""
    unknown = sorted(set(data) - {"model", "features", "search", "endpoint", "audio",
                                "server", "ray", "vad", "second_pass", "store"})
    if unknown:
        raise ConfigError(f"{where}: unknown table(s) {', '.join(unknown)}")
    if base_dir is not None:
        data = _resolve_paths(data, base_dir)
    endpoint = dict(data.get("endpoint", {}))
    for rule in ("rule1", "rule2", "rule3"):
        if rule in endpoint:
            endpoint[rule] = build_table(EndpointRule, endpoint[rule], f"{where} [endpoint.{rule}]")
    rec = RecognizerConfig(
        model=build_table(ModelConfig, data.get("model", {}), f"{where} [model]"),
        features=build_table(FeatureConfig, data.get("features", {}), f"{where} [features]"),
        search=(build_table(SearchConfig, data["search"], f"{where} [search]")
                if "search" in data else None),  # None: the model's default search
        endpoint=build_table(EndpointConfig, endpoint, f"{where} [endpoint]"),
        vad=build_table(VadConfig, data.get("vad", {}), f"{where} [vad]"),
        second_pass=build_table(SecondPassConfig, data.get("second_pass", {}),
                                f"{where} [second_pass]"))
    return AppConfig(recognizer=rec, audio=build_table(AudioConfig, data.get("audio", {}),
                                                  f"{where} [audio]"),
                     server=build_table(ServerConfig, data.get("server", {}), f"{where} [server]",
                                   SERVER_KEYS, lambda **table: ServerConfig().updated(table)),
                     ray=build_table(RayConfig, data.get("ray", {}), f"{where} [ray]"),
                     store=build_table(StoreConfig, data.get("store", {}), f"{where} [store]"))


def _resolve_paths(data: dict, base_dir: Path) -> dict:
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for table, key in PATH_KEYS + MODEL_PATH_KEYS:
        value = data.get(table, {}).get(key) if isinstance(data.get(table), dict) else None
        if (table, key) == ("model", "model_dir") and isinstance(value, str) and value:
            from .hub.cache import resolve_model_dir  # a path, or a downloaded model's name

            data[table][key] = resolve_model_dir(value, base_dir)
        elif isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            if (table, key) in PATH_KEYS or (base_dir / value).exists():
                data[table][key] = str(base_dir / value)
    return data


def builtin_configs() -> list[str]:
    """Names of the built-in config files."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def load_config(path: str | Path | None) -> AppConfig:
    """Load a TOML config file; None gives the defaults. A bare name such as
    ``telephony`` names a built-in config (``builtin_configs()``)."""
    if path is None:
        return AppConfig()
    p = Path(path).expanduser()
    if not p.exists() and not p.suffix and "/" not in str(path):
        if (CONFIG_DIR / f"{p}.toml").is_file():
            p = CONFIG_DIR / f"{p}.toml"
        else:
            raise ConfigError(f"{path}: no such config file or built-in config (built-in: "
                              f"{', '.join(builtin_configs())})")
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory, not a config file")
    data = read_toml(p, "config")
    return parse_config(data, str(p), base_dir=p.resolve().parent)
