"""ONNX Runtime backend: loads published icefall / sherpa-onnx streaming transducers unchanged.

Inputs and outputs are bound by position (encoder input 0 = features, 1..k = states;
output 0 = encoder_out, 1..k = next states). The batch axis and the initial shape of each
state are read from the declared input shapes (the one symbolic dimension is the batch
axis); a per-family name table is used only when an export declared fixed sizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ModelLoadError
from .base import ModelMeta
from .config import ModelConfig
from .states import StateLayout, StateSpec

__all__ = ["OnnxTransducer", "batch_axis_from_table"]

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
               "tensor(float16)": np.float16, "tensor(int32)": np.int32,
               "tensor(double)": np.float64}

# Fallback only: batch axis by model family and state-name prefix (reference/model-format.md).
_BATCH_AXIS_TABLE: dict[str, tuple[tuple[str, int], ...]] = {
    "lstm": (("", 1),),
    "conformer": (("processed_lens", 0), ("cached_attn", 2), ("cached_conv", 2)),
    "zipformer2": (("cached_key", 1), ("cached_nonlin_attn", 1), ("cached_val1", 1),
                   ("cached_val2", 1), ("cached_conv1", 0), ("cached_conv2", 0),
                   ("embed_states", 0), ("processed_lens", 0)),
    "zipformer": (("cached_len", 1), ("cached_avg", 1), ("cached_key", 2), ("cached_val2", 2),
                  ("cached_val", 2), ("cached_conv1", 1), ("cached_conv2", 1)),
}


def batch_axis_from_table(model_type: str, state_name: str) -> int | None:
    """The batch axis the family table gives for a state name, or None."""
    for prefix, axis in _BATCH_AXIS_TABLE.get(model_type, ()):
        if state_name.startswith(prefix):
            return axis
    return None


def _open_session(path: Path, config: ModelConfig):
    import onnxruntime as ort

    if not path.is_file():
        raise ModelLoadError(f"{path}: model file not found")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = config.num_threads
    opts.inter_op_num_threads = config.inter_op_threads
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), sess_options=opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own Fail/InvalidProtobuf/... types
        raise ModelLoadError(f"{path}: not a loadable ONNX model ({type(e).__name__}: "
                             f"{str(e).strip().splitlines()[0][:200]})") from e


def _metadata(session) -> dict[str, str]:
    return dict(session.get_modelmeta().custom_metadata_map)


def _meta_int(meta: dict[str, str], key: str, path: Path) -> int:
    if key not in meta:
        raise ModelLoadError(f"{path}: metadata lacks {key!r} (has: {sorted(meta) or 'nothing'})")
    try:
        return int(meta[key])
    except ValueError:
        raise ModelLoadError(f"{path}: metadata {key!r} is not an integer: {meta[key]!r}") from None


class OnnxTransducer:
    """A streaming transducer run by ONNX Runtime. See ``TransducerModel`` for the methods."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        enc_path, dec_path, join_path = (config.file(s) for s in ("encoder", "decoder", "joiner"))
        self.encoder = _open_session(enc_path, config)
        self.decoder = _open_session(dec_path, config)
        self.joiner = _open_session(join_path, config)

        enc_meta = _metadata(self.encoder)
        dec_meta = _metadata(self.decoder)
        model_type = enc_meta.get("model_type")
        if not model_type:
            raise ModelLoadError(f"{enc_path}: metadata lacks 'model_type'")
        chunk_frames = _meta_int(enc_meta, "T", enc_path)
        chunk_shift = _meta_int(enc_meta, "decode_chunk_len", enc_path)
        if not 0 < chunk_shift <= chunk_frames:
            raise ModelLoadError(f"{enc_path}: need 0 < decode_chunk_len <= T, got "
                                 f"{chunk_shift}, {chunk_frames}")
        context_size = _meta_int(dec_meta, "context_size", dec_path)

        enc_inputs = self.encoder.get_inputs()
        feature_dim = enc_inputs[0].shape[-1]
        if not isinstance(feature_dim, int):
            raise ModelLoadError(f"{enc_path}: input 0 must declare a fixed feature dim")
        self.state_layout = StateLayout(tuple(
            self._state_spec(inp, model_type, enc_path) for inp in enc_inputs[1:]))
        if len(self.encoder.get_outputs()) != len(enc_inputs):
            raise ModelLoadError(f"{enc_path}: {len(enc_inputs) - 1} state inputs but "
                                 f"{len(self.encoder.get_outputs()) - 1} state outputs")
        self._enc_in = [i.name for i in enc_inputs]
        self._dec_in = self.decoder.get_inputs()[0].name
        self._join_in = [i.name for i in self.joiner.get_inputs()]
        if len(self._join_in) != 2:
            raise ModelLoadError(f"{join_path}: joiner must take 2 inputs, has {len(self._join_in)}")

        # One test call finds T' and D instead of trusting a hard-coded subsampling factor.
        probe = np.zeros((1, chunk_frames, feature_dim), np.float32)
        enc_out, _ = self.encode(probe, self.state_layout.initial())
        dec_out = self.decode(np.zeros((1, context_size), np.int64))
        logits = self.join(enc_out[:, 0], dec_out)
        t_out, joiner_dim = enc_out.shape[1], enc_out.shape[2]
        if t_out == 0 or chunk_shift % t_out:
            raise ModelLoadError(f"{enc_path}: decode_chunk_len {chunk_shift} is not a multiple "
                                 f"of the {t_out} encoder frames one call produces")
        self.meta = ModelMeta(
            model_type=model_type, chunk_frames=chunk_frames, chunk_shift=chunk_shift,
            encoder_frames_per_chunk=t_out, feature_dim=feature_dim, joiner_dim=joiner_dim,
            context_size=context_size, vocab_size=logits.shape[-1])
        declared_vocab = dec_meta.get("vocab_size")
        if declared_vocab is not None and int(declared_vocab) != self.meta.vocab_size:
            raise ModelLoadError(f"{dec_path}: vocab_size {declared_vocab} != joiner output "
                                 f"{self.meta.vocab_size}")

    @staticmethod
    def _state_spec(inp, model_type: str, path: Path) -> StateSpec:
        shape = list(inp.shape)
        symbolic = [i for i, d in enumerate(shape) if not isinstance(d, int)]
        if len(symbolic) == 1:
            axis = symbolic[0]
        else:
            axis = batch_axis_from_table(model_type, inp.name)
            if axis is None or axis >= len(shape):
                raise ModelLoadError(
                    f"{path}: cannot tell the batch axis of state {inp.name!r} {shape} "
                    f"(model_type {model_type!r})")
        shape[axis] = 1
        if not all(isinstance(d, int) for d in shape):
            raise ModelLoadError(f"{path}: state {inp.name!r} has unknown size {inp.shape}")
        dtype = _ORT_DTYPES.get(inp.type)
        if dtype is None:
            raise ModelLoadError(f"{path}: state {inp.name!r} has unsupported type {inp.type}")
        return StateSpec(inp.name, np.dtype(dtype), axis, tuple(shape))

    def encode(self, features: np.ndarray, states: Sequence[np.ndarray]
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        feeds = dict(zip(self._enc_in, [features, *states]))
        out = self.encoder.run(None, feeds)
        return out[0], out[1:]

    def decode(self, contexts: np.ndarray) -> np.ndarray:
        return self.decoder.run(None, {self._dec_in: contexts})[0]

    def join(self, encoder_out: np.ndarray, decoder_out: np.ndarray) -> np.ndarray:
        return self.joiner.run(None, {self._join_in[0]: encoder_out,
                                      self._join_in[1]: decoder_out})[0]
