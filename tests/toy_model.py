"""A hand-made transducer in numpy for exact search tests.

The joiner's logits at encoder frame t are ``script[t] + decoder_bias(context)``: the test
writes the script, so it knows which symbol wins where. The decoder output penalises
repeating the last token by ``repeat_penalty`` (so a second symbol on the same frame is the
runner-up). One int64 state counts frames so the script continues across chunks.
"""

from __future__ import annotations

import numpy as np

from streamdec.models.base import ModelMeta
from streamdec.models.states import StateLayout, StateSpec


class ToyModel:
    def __init__(self, script: np.ndarray, repeat_penalty: float = 0.0, chunk_frames: int = 8):
        self.script = np.asarray(script, np.float32)  # (num_frames, V)
        V = self.script.shape[1]
        self.repeat_penalty = repeat_penalty
        self.meta = ModelMeta(model_type="toy", chunk_frames=chunk_frames * 4,
                              chunk_shift=chunk_frames * 4, encoder_frames_per_chunk=chunk_frames,
                              feature_dim=80, joiner_dim=V, context_size=2, vocab_size=V,
                              blank_id=0, frame_shift_ms=10.0, sample_rate=16000)
        self.state_layout = StateLayout((StateSpec("count", np.dtype(np.int64), 0, (1,)),))
        self.decoder_calls = 0

    def encode(self, features, states):
        count = states[0]
        T = self.meta.encoder_frames_per_chunk
        idx = np.minimum(count[:, None] + np.arange(T)[None, :], len(self.script) - 1)
        return self.script[idx], [count + T]

    def decode(self, contexts):
        self.decoder_calls += 1
        V = self.meta.vocab_size
        out = np.zeros((len(contexts), V), np.float32)
        for n, last in enumerate(contexts[:, -1]):
            if last > 0:
                out[n, last] -= self.repeat_penalty
        return out

    def join(self, encoder_out, decoder_out):
        return encoder_out + decoder_out


def script_from_winners(winners: list[int], vocab: int = 6, margin: float = 3.0) -> np.ndarray:
    """A script where ``winners[t]`` wins frame t by ``margin`` over all others."""
    s = np.zeros((len(winners), vocab), np.float32)
    for t, w in enumerate(winners):
        s[t, w] = margin
    return s
