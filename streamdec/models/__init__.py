"""Transducer model backends: ONNX Runtime (default) and PyTorch (TorchScript ``model.pt``)."""

from __future__ import annotations

from .base import ModelMeta, TransducerModel
from .config import BUILTIN_MODEL_DIR, ModelConfig
from .states import StateLayout, StateSpec

__all__ = ["ModelMeta", "TransducerModel", "ModelConfig", "BUILTIN_MODEL_DIR", "StateLayout",
           "StateSpec", "load_model"]


def load_model(config: ModelConfig) -> TransducerModel:
    """Load the model ``config`` names with the backend it names (raises ModelLoadError)."""
    from ..errors import ModelLoadError

    if not config.path.is_dir():
        raise ModelLoadError(f"{config.path}: model directory not found")
    if config.backend == "torch":
        from .torch_backend import TorchTransducer

        return TorchTransducer(config)
    from .onnx_backend import OnnxTransducer

    return OnnxTransducer(config)
