"""Which model to load and how to run it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

__all__ = ["ModelConfig", "BUILTIN_MODEL_DIR"]

#: The model shipped inside the package (recipes/synthetic-en trains it).
BUILTIN_MODEL_DIR = Path(__file__).resolve().parent.parent / "assets" / "synthetic-en"

BACKENDS = ("onnx", "torch")


@dataclass(frozen=True)
class ModelConfig:
    """Model files and runtime settings. ``model_dir`` None means the built-in model."""

    model_dir: str | None = None  # holds encoder/decoder/joiner .onnx (+ model.pt) and tokens.txt
    backend: str = "onnx"  # "onnx" (ONNX Runtime, default) or "torch" (model.pt, TorchScript)
    int8: bool = False  # use *.int8.onnx files
    num_threads: int = 1  # intra-op threads of each session
    inter_op_threads: int = 1

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"model.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.num_threads < 1 or self.inter_op_threads < 1:
            raise ConfigError("model.num_threads and model.inter_op_threads must be >= 1")

    @property
    def path(self) -> Path:
        return Path(self.model_dir) if self.model_dir else BUILTIN_MODEL_DIR

    def file(self, stem: str) -> Path:
        """encoder/decoder/joiner file, the int8 variant when asked for."""
        return self.path / (f"{stem}.int8.onnx" if self.int8 else f"{stem}.onnx")
