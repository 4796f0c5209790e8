"""Transducer model backends: ONNX Runtime (default) and PyTorch (TorchScript ``model.pt``)."""

from __future__ import annotations

from .base import ModelMeta, TransducerModel
from .config import BUILTIN_MODEL_DIR, ModelConfig
from .files import ModelFiles, find_model_files
from .states import EncoderStates, StateLayout, StateRow, StateSpec

__all__ = ["ModelMeta", "TransducerModel", "ModelConfig", "BUILTIN_MODEL_DIR", "StateLayout",
           "StateSpec", "StateRow", "EncoderStates", "ModelFiles", "find_model_files", "load_model"]


def load_model(config: ModelConfig, features=None, files: ModelFiles | None = None
               ) -> TransducerModel:
    """Load the model ``config`` names with the backend it names (raises ModelLoadError);
    ``features``: the ``FeatureConfig`` it runs with (default ``FeatureConfig()``), which
    with tokens.txt completes its ``meta``; ``files``: the files ``find_model_files(config)``
    chose, when the caller has them."""
    from ..audio.features import FeatureConfig

    files = files or find_model_files(config)
    features = features or FeatureConfig()
    if config.backend == "torch":
        from .torch_backend import TorchTransducer

        return TorchTransducer(config, files, features)
    from .onnx_backend import OnnxTransducer

    return OnnxTransducer(config, files, features)
