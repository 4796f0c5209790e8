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
    int8: bool = False  # use *.int8.onnx files (per network, where the directory has one)
    num_threads: int = 1  # intra-op threads of each session
    inter_op_threads: int = 1
    # ONNX Runtime's CPU memory arena, with memory patterns off (see
    # streamdec.models.onnx_backend.open_session): a run's tensors come from memory the
    # session keeps, not freshly mapped pages. False: malloc and memory patterns, which hand
    # a burst's memory back but cost the 66 M zipformer2 6-16 % more CPU per encoder call.
    cpu_arena: bool = True
    # Rewrite the graph when a session is opened into one with the same outputs (to float
    # rounding) and faster ONNX Runtime kernels: depthwise 1-D convolutions as 2-D (the
    # zipformers' depthwise convolutions; streamdec.models.graph); and give an encoder
    # exported with a fixed batch of 1 a second graph that runs several streams in one call,
    # each with exactly its own outputs (streamdec.models.dynamic_batch). False: the files
    # as they are, one call per stream for such an encoder.
    graph_rewrites: bool = True
    # Explicit files, as sherpa-onnx's --encoder/--decoder/--joiner/--tokens take them; each
    # one given replaces what the directory would give (streamdec.models.files).
    encoder: str | None = None
    decoder: str | None = None
    joiner: str | None = None
    tokens: str | None = None
    # which of several ``-chunk-N-left-M`` (or other) variants of a directory to load, e.g.
    # "chunk-16-left-64"; default: the largest left context (see streamdec.models.files)
    variant: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"model.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.num_threads < 1 or self.inter_op_threads < 1:
            raise ConfigError("model.num_threads and model.inter_op_threads must be >= 1")
        for flag in ("cpu_arena", "graph_rewrites"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"model.{flag} must be true or false, "
                                  f"got {getattr(self, flag)!r}")
        named = [r for r in ("encoder", "decoder", "joiner") if getattr(self, r)]
        if named and len(named) < 3 and not self.model_dir:
            missing = ", ".join(f"model.{r}" for r in ("encoder", "decoder", "joiner")
                                if r not in named)
            raise ConfigError(f"model.{named[0]} given without {missing}: name all three "
                              "files, or model.model_dir for the directory holding the rest")

    @property
    def path(self) -> Path:
        """The model's directory: ``model_dir``, else the folder of an explicit encoder,
        else the built-in model. lang/, lm.onnx, model.pt and bpe.model are looked up here."""
        if self.model_dir:
            return Path(self.model_dir)
        if self.encoder:
            return Path(self.encoder).parent
        return BUILTIN_MODEL_DIR

    @property
    def is_builtin(self) -> bool:
        return not (self.model_dir or self.encoder or self.decoder or self.joiner or
                    self.tokens)
