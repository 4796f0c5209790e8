"""PyTorch backend: runs ``model.pt``, a TorchScript export of the same trained model.

``model.pt`` has methods ``encoder(x, states: List[Tensor]) -> (encoder_out, states)``,
``decoder(y) -> decoder_out``, ``joiner(encoder_out, decoder_out) -> logits`` with the
same shapes and semantics as the ONNX files. The chunking metadata and the state layout
are read from the encoder ONNX file chosen beside it (``streamdec.models.files``), so both backends share one contract.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ModelLoadError
from .base import feature_facts, probe_meta
from .config import ModelConfig
from .files import ModelFiles
from .onnx_backend import (onnx_meta_weights, open_session, read_context_size,
                           read_encoder_contract)

__all__ = ["TorchTransducer"]


class TorchTransducer:
    """See ``TransducerModel``. Thread count: ``torch.set_num_threads`` is process-wide."""

    def __init__(self, config: ModelConfig, files: ModelFiles, features) -> None:
        """``files``: the chosen network and token files; ``features``: the
        ``FeatureConfig`` the model runs with (see ``feature_facts``)."""
        try:
            import torch
        except ImportError:
            raise ModelLoadError("the torch backend needs PyTorch: "
                                 "python3 -m pip install -e '.[torch]' in the streamdec "
                                 "folder") from None
        self._torch = torch
        path = files.directory / "model.pt"
        if not path.is_file():
            raise ModelLoadError(f"{path}: model file not found")
        try:
            self.module = torch.jit.load(str(path), map_location="cpu").eval()
        except Exception as e:  # torch raises RuntimeError / pickle errors
            raise ModelLoadError(f"{path}: not a loadable TorchScript model ({e})") from None
        for method in ("encoder", "decoder", "joiner"):
            if not hasattr(self.module, method):
                raise ModelLoadError(f"{path}: TorchScript module lacks method {method!r}")
        torch.set_num_threads(config.num_threads)
        enc_path = files.encoder
        contract = read_encoder_contract(open_session(enc_path, config), enc_path)
        dec_path = files.decoder
        if contract.frame_counter is not None:
            raise ModelLoadError(f"{enc_path}: the torch backend does not fill an encoder's "
                                 "processed_lens input (streaming conformer); use the onnx "
                                 "backend")
        self.state_layout = contract.state_layout
        self.meta = probe_meta(self, model_type=contract.model_type,
                               chunk_frames=contract.chunk_frames,
                               chunk_shift=contract.chunk_shift,
                               context_size=read_context_size(open_session(dec_path, config),
                                                              dec_path),
                               feature_dim=contract.feature_dim, where=path,
                               declared=contract.declared,
                               weights=onnx_meta_weights(files),
                               **feature_facts(files.tokens, features))

    def encode(self, features: np.ndarray, states: Sequence[np.ndarray]
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        t = self._torch
        with t.inference_mode():
            out, new = self.module.encoder(t.from_numpy(np.ascontiguousarray(features)),
                                           [t.from_numpy(np.ascontiguousarray(s)) for s in states])
        return out.numpy(), [s.numpy() for s in new]

    def decode(self, contexts: np.ndarray) -> np.ndarray:
        with self._torch.inference_mode():
            return self.module.decoder(self._torch.from_numpy(contexts)).numpy()

    def join(self, encoder_out: np.ndarray, decoder_out: np.ndarray) -> np.ndarray:
        t = self._torch
        with t.inference_mode():
            return self.module.joiner(t.from_numpy(np.ascontiguousarray(encoder_out)),
                                      t.from_numpy(np.ascontiguousarray(decoder_out))).numpy()
