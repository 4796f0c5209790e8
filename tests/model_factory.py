"""Random-weight streaming transducers in three encoder-state layouts, exported to ONNX in
the published icefall / sherpa-onnx format (inputs bound by position, metadata
``model_type``, ``T``, ``decode_chunk_len``, ``context_size``, ``vocab_size`` and what
sherpa-onnx reads of each family). Small and fast test fixtures with a 12-unit vocabulary,
not models to use; the exporters' own output is in tests/fixtures/published-layouts.

- ``lstm``: state0 (layers, N, d_model), state1 (layers, N, hidden): batch axis 1.
- ``conformer``: cached_attn (layers, left, N, dim), cached_conv (layers, k-1, N, dim):
  batch axis 2; processed_lens (N,) int64 is an input only (the runtime fills it with the
  feature frames already processed), so it returns 2 states for 3.
- ``zipformer2``: one stack of one layer as icefall's exporter lays it out: cached_key,
  cached_nonlin_attn, cached_val1, cached_val2 (batch axis 1), cached_conv1, cached_conv2,
  embed_states (N, 128, 3, 19) and processed_lens (N,) int64 (batch axis 0).

Every state influences the output, so a stacking or carrying mistake changes tokens.
The subsampling turns T = 35 feature frames into exactly 8 encoder frames (decode chunk 32).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

T_CHUNK, CHUNK_SHIFT, T_OUT = 35, 32, 8
FEAT, DIM, JOINER, VOCAB, CONTEXT = 80, 32, 24, 12, 2
SYMBOLS = ["<blk>", "\u2581", "A", "B", "C", "D", "E", "F", "G", "H", "I", "<unk>"]


def _torch():
    import torch

    return torch


def _subsampling(torch):
    nn = torch.nn

    class Subsampling(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(FEAT, DIM, 3, stride=2)
            self.c2 = nn.Conv1d(DIM, DIM, 3, stride=2)

        def forward(self, x):  # (N, T, F) -> (N, T', DIM)
            y = torch.relu(self.c1(x.transpose(1, 2) / 10.0))
            return torch.tanh(self.c2(y)).transpose(1, 2)

    return Subsampling()


def _decoder_and_joiner(torch):
    nn = torch.nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, DIM)
            self.proj = nn.Linear(CONTEXT * DIM, JOINER)

        def forward(self, y):  # (N, C) int64 -> (N, JOINER)
            e = self.emb(y.clamp(min=0)) * (y >= 0).unsqueeze(-1).to(torch.float32)
            return self.proj(torch.relu(e.reshape(y.shape[0], -1)))

    class Joiner(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = nn.Linear(JOINER, VOCAB)
            with torch.no_grad():
                self.out.bias[0] += 0.15  # blank often wins: pauses, endpoints

        def forward(self, encoder_out, decoder_out):
            return 4.0 * self.out(torch.tanh(3.0 * encoder_out + 0.5 * decoder_out))

    return Decoder(), Joiner()


def _lstm_encoder(torch, layers=2, hidden=40):
    nn = torch.nn

    class LstmEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = _subsampling(torch)
            self.ih = nn.ModuleList(nn.Linear(DIM, 4 * hidden) for _ in range(layers))
            self.hh = nn.ModuleList(nn.Linear(DIM, 4 * hidden, bias=False) for _ in range(layers))
            self.proj = nn.ModuleList(nn.Linear(hidden, DIM, bias=False) for _ in range(layers))
            self.out = nn.Linear(DIM, JOINER)

        def forward(self, x, state0, state1):
            y = self.sub(x)
            hs, cs = [], []
            for l in range(layers):
                h, c = state0[l], state1[l]
                outs = []
                for t in range(T_OUT):
                    i, f, g, o = self.ih[l](y[:, t]).add(self.hh[l](h)).chunk(4, dim=-1)
                    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                    h = self.proj[l](torch.sigmoid(o) * torch.tanh(c))
                    outs.append(h)
                y = torch.stack(outs, dim=1)
                hs.append(h)
                cs.append(c)
            return self.out(y), torch.stack(hs), torch.stack(cs)

    enc = LstmEncoder()
    inputs = (torch.zeros(1, T_CHUNK, FEAT), torch.zeros(layers, 1, DIM), torch.zeros(layers, 1, hidden))
    names = ["x", "state0", "state1"]
    axes = {"x": {0: "N"}, "state0": {1: "N"}, "state1": {1: "N"}, "encoder_out": {0: "N"},
            "new_state0": {1: "N"}, "new_state1": {1: "N"}}
    meta = {"model_type": "lstm", "num_encoder_layers": layers, "d_model": DIM,
            "rnn_hidden_size": hidden}
    return enc, inputs, names, ["encoder_out", "new_state0", "new_state1"], axes, meta


def _conformer_encoder(torch, layers=2, left=16, kernel=5):
    """The layout of icefall's pruned_transducer_stateless5/export-onnx-streaming.py: inputs
    x, cached_attn, cached_conv, processed_lens; outputs encoder_out and the two caches
    only (the runtime fills processed_lens: the feature frames already processed)."""
    nn = torch.nn

    class ConformerEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = _subsampling(torch)
            self.q = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(layers))
            self.k = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(layers))
            self.conv = nn.ParameterList(nn.Parameter(torch.randn(kernel, DIM) * 0.3)
                                         for _ in range(layers))
            self.out = nn.Linear(DIM, JOINER)

        def forward(self, x, cached_attn, cached_conv, processed_lens):
            y = self.sub(x)  # (N, T', DIM)
            done = processed_lens * T_OUT // CHUNK_SHIFT  # encoder frames already processed
            pos = torch.arange(left).unsqueeze(0)  # cache slot j valid if j >= left - done
            valid = torch.cat([pos >= (left - done.unsqueeze(1)),
                               torch.ones(y.shape[0], T_OUT, dtype=torch.bool)], dim=1)
            new_attn, new_conv = [], []
            for l in range(layers):
                keys = torch.cat([cached_attn[l].transpose(0, 1), y], dim=1)  # (N, left+T', DIM)
                scores = self.q[l](y) @ self.k[l](keys).transpose(1, 2) / DIM ** 0.5
                scores = scores.masked_fill(~valid.unsqueeze(1), -1e4)
                y = y + torch.softmax(scores, dim=-1) @ keys
                new_attn.append(keys[:, -left:].transpose(0, 1))
                padded = torch.cat([cached_conv[l].transpose(0, 1), y], dim=1)
                conv = sum(padded[:, j:j + T_OUT] * self.conv[l][j] for j in range(kernel))
                new_conv.append(padded[:, -(kernel - 1):].transpose(0, 1))
                y = torch.tanh(y + conv)
            return self.out(y), torch.stack(new_attn), torch.stack(new_conv)

    enc = ConformerEncoder()
    inputs = (torch.zeros(1, T_CHUNK, FEAT), torch.zeros(layers, left, 1, DIM),
              torch.zeros(layers, kernel - 1, 1, DIM), torch.zeros(1, dtype=torch.int64))
    names = ["x", "cached_attn", "cached_conv", "processed_lens"]
    outs = ["encoder_out", "new_cached_attn", "new_cached_conv"]
    axes = {"x": {0: "N"}, "cached_attn": {2: "N"}, "cached_conv": {2: "N"},
            "processed_lens": {0: "N"}, "encoder_out": {0: "N"}, "new_cached_attn": {2: "N"},
            "new_cached_conv": {2: "N"}}
    meta = {"model_type": "conformer", "version": 1, "comment": "streamdec test model",
            "pad_length": T_CHUNK - CHUNK_SHIFT, "encoder_dim": DIM,
            "num_encoder_layers": layers, "cnn_module_kernel": kernel, "left_context": left,
            "right_context": 0, "chunk_size": T_OUT}
    return enc, inputs, names, outs, axes, meta


def _zipformer2_encoder(torch, left=12, kernel=5, heads=2, head_dim=4):
    """The state layout of icefall's zipformer/export-onnx-streaming.py with one stack of
    one layer: cached_key, cached_nonlin_attn, cached_val1, cached_val2, cached_conv1,
    cached_conv2, then embed_states (N, 128, 3, 19) and processed_lens (N,), each returned
    updated, with the metadata sherpa-onnx builds the initial states from."""
    nn = torch.nn
    att, nonlin, pad = heads * head_dim, DIM * 3 // 4, (kernel - 1) // 2

    class Zipformer2Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = _subsampling(torch)
            self.q, self.k = nn.Linear(DIM, att), nn.Linear(DIM, att)
            self.v1, self.v2 = nn.Linear(DIM, att), nn.Linear(DIM, att)
            self.back1, self.back2 = nn.Linear(att, DIM), nn.Linear(att, DIM)
            self.nl, self.nl_back = nn.Linear(DIM, nonlin), nn.Linear(nonlin, DIM)
            self.conv1 = nn.Parameter(torch.randn(DIM, pad + 1) * 0.3)
            self.conv2 = nn.Parameter(torch.randn(DIM, pad + 1) * 0.3)
            self.embed = nn.Linear(FEAT, 128)
            self.embed_back = nn.Linear(128, DIM)
            self.out = nn.Linear(DIM, JOINER)

        def _conv(self, cache, y, weight):
            padded = torch.cat([cache, y.transpose(1, 2)], dim=2)  # (N, DIM, pad + T')
            conv = sum(padded[:, :, j:j + T_OUT] * weight[:, j:j + 1] for j in range(pad + 1))
            return conv.transpose(1, 2), padded[:, :, -pad:]

        def forward(self, x, cached_key, cached_nonlin_attn, cached_val1, cached_val2,
                    cached_conv1, cached_conv2, embed_states, processed_lens):
            y = self.sub(x)
            y = y + self.embed_back(embed_states.mean(dim=(2, 3))).unsqueeze(1)
            keys = torch.cat([cached_key.transpose(0, 1), self.k(y)], dim=1)
            valid = torch.cat([torch.arange(left).unsqueeze(0) >=
                               (left - processed_lens.unsqueeze(1)),
                               torch.ones(y.shape[0], T_OUT, dtype=torch.bool)], dim=1)
            scores = (self.q(y) @ keys.transpose(1, 2)).masked_fill(~valid.unsqueeze(1), -1e4)
            weights = torch.softmax(scores / att ** 0.5, dim=-1)
            val1 = torch.cat([cached_val1.transpose(0, 1), self.v1(y)], dim=1)
            y = y + 0.5 * self.back1(weights @ val1)
            nl = torch.cat([cached_nonlin_attn[0], torch.tanh(self.nl(y))], dim=1)
            y = y + 0.5 * self.nl_back(weights @ nl)
            conv, new_conv1 = self._conv(cached_conv1, y, self.conv1)
            y = y + 0.5 * conv
            val2 = torch.cat([cached_val2.transpose(0, 1), self.v2(y)], dim=1)
            y = y + 0.5 * self.back2(weights @ val2)
            conv, new_conv2 = self._conv(cached_conv2, y, self.conv2)
            y = torch.tanh(y + 0.5 * conv)
            new_embed = torch.tanh(0.5 * embed_states +
                                   self.embed(x[:, -3:].mean(dim=1) / 10.0)[:, :, None, None])
            return (self.out(y), keys[:, -left:].transpose(0, 1), nl[:, -left:].unsqueeze(0),
                    val1[:, -left:].transpose(0, 1), val2[:, -left:].transpose(0, 1),
                    new_conv1, new_conv2, new_embed, processed_lens + T_OUT)

    enc = Zipformer2Encoder()
    inputs = (torch.zeros(1, T_CHUNK, FEAT), torch.zeros(left, 1, att),
              torch.zeros(1, 1, left, nonlin), torch.zeros(left, 1, att),
              torch.zeros(left, 1, att), torch.zeros(1, DIM, pad), torch.zeros(1, DIM, pad),
              torch.zeros(1, 128, 3, 19), torch.zeros(1, dtype=torch.int64))
    states = ["cached_key_0", "cached_nonlin_attn_0", "cached_val1_0", "cached_val2_0",
              "cached_conv1_0", "cached_conv2_0", "embed_states", "processed_lens"]
    batch_axis = {"cached_key_0": 1, "cached_nonlin_attn_0": 1, "cached_val1_0": 1,
                  "cached_val2_0": 1, "cached_conv1_0": 0, "cached_conv2_0": 0,
                  "embed_states": 0, "processed_lens": 0}
    axes = {"x": {0: "N"}, "encoder_out": {0: "N"}}
    for name, axis in batch_axis.items():
        axes[name] = axes[f"new_{name}"] = {axis: "N"}
    meta = {"model_type": "zipformer2", "version": 1, "comment": "streamdec test model",
            "encoder_dims": DIM, "num_encoder_layers": 1, "cnn_module_kernels": kernel,
            "left_context_len": left, "query_head_dims": head_dim, "value_head_dims": head_dim,
            "num_heads": heads}
    return (enc, inputs, ["x", *states], ["encoder_out", *[f"new_{n}" for n in states]], axes,
            meta)


# per layout, a draw of the weights whose greedy output on test_audio is varied (several
# units, word starts and blanks; the zipformer2 draw of seed 0 emits one unit only)
_SEED_OFFSET = {"zipformer2": 1}

ENCODERS = {"lstm": _lstm_encoder, "conformer": _conformer_encoder, "zipformer2": _zipformer2_encoder}


def _add_metadata(path: Path, meta: dict) -> None:
    import onnx

    model = onnx.load(str(path))
    for k, v in meta.items():
        p = model.metadata_props.add()
        p.key, p.value = k, str(v)
    onnx.save(model, str(path))


def _script_lstm(torch, enc, dec, joiner, inputs, path: Path) -> None:
    """model.pt for the PyTorch backend: the same networks as TorchScript."""
    from typing import List, Tuple

    traced = torch.jit.trace(enc, inputs)

    class Scripted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec, self.join = traced, dec, joiner

        @torch.jit.export
        def encoder(self, x: torch.Tensor, states: List[torch.Tensor]
                    ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
            out, s0, s1 = self.enc(x, states[0], states[1])
            return out, [s0, s1]

        @torch.jit.export
        def decoder(self, y: torch.Tensor) -> torch.Tensor:
            return self.dec(y)

        @torch.jit.export
        def joiner(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
            return self.join(encoder_out, decoder_out)

    torch.jit.save(torch.jit.script(Scripted().eval()), str(path))


def export_test_model(layout: str, out_dir: Path, seed: int = 0) -> Path:
    """Export a random-weight model of ``layout`` into ``out_dir``; returns ``out_dir``."""
    torch = _torch()
    torch.manual_seed(seed + _SEED_OFFSET.get(layout, 0))
    out_dir.mkdir(parents=True, exist_ok=True)
    enc, inputs, names, outs, axes, meta = ENCODERS[layout](torch)
    dec, joiner = _decoder_and_joiner(torch)
    for m in (enc, dec, joiner):
        m.eval()
    kw = dict(opset_version=17, dynamo=False)
    with torch.no_grad():
        torch.onnx.export(enc, inputs, str(out_dir / "encoder.onnx"), input_names=names,
                          output_names=outs, dynamic_axes=axes, **kw)
        torch.onnx.export(dec, (torch.zeros(1, CONTEXT, dtype=torch.int64),),
                          str(out_dir / "decoder.onnx"), input_names=["y"],
                          output_names=["decoder_out"],
                          dynamic_axes={"y": {0: "N"}, "decoder_out": {0: "N"}}, **kw)
        torch.onnx.export(joiner, (torch.zeros(1, JOINER), torch.zeros(1, JOINER)),
                          str(out_dir / "joiner.onnx"), input_names=["encoder_out", "decoder_out"],
                          output_names=["logit"],
                          dynamic_axes={"encoder_out": {0: "N"}, "decoder_out": {0: "N"},
                                        "logit": {0: "N"}}, **kw)
    _add_metadata(out_dir / "encoder.onnx", {**meta, "T": T_CHUNK, "decode_chunk_len": CHUNK_SHIFT})
    _add_metadata(out_dir / "decoder.onnx", {"vocab_size": VOCAB, "context_size": CONTEXT})
    _add_metadata(out_dir / "joiner.onnx", {"joiner_dim": JOINER})
    if layout == "lstm":
        _script_lstm(torch, enc, dec, joiner, inputs, out_dir / "model.pt")
    (out_dir / "tokens.txt").write_text("".join(f"{s} {i}\n" for i, s in enumerate(SYMBOLS)),
                                        encoding="utf-8")
    return out_dir


def test_audio(seconds: float, seed: int = 0, rate: int = 16000) -> np.ndarray:
    """Speech-like test signal: random chirps and noise bursts with pauses, float32."""
    rng = np.random.RandomState(seed)
    n = int(seconds * rate)
    out = np.zeros(n, np.float32)
    pos = 0
    while pos < n:
        length = int(rng.uniform(0.1, 0.5) * rate)
        t = np.arange(min(length, n - pos)) / rate
        f0 = rng.uniform(100, 2000)
        seg = 0.3 * np.sin(2 * np.pi * (f0 + rng.uniform(-800, 800) * t) * t)
        seg += rng.uniform(0, 0.1) * rng.randn(len(t))
        out[pos:pos + len(t)] = seg * np.hanning(len(t))
        pos += len(t) + int(rng.uniform(0, 0.3) * rate)
    return out


test_audio.__test__ = False  # a helper, not a test (pytest collects names starting with test)
