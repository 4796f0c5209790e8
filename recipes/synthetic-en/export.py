"""Export a checkpoint to the streaming transducer files streamdec and sherpa-onnx load.

Writes to OUT_DIR:
  encoder.onnx  x (N, 35, 80), state0 (L, N, H), state1 (L, N, H)
                -> encoder_out (N, 8, J), next state0, next state1   (model_type=lstm)
  decoder.onnx  y (N, 2) int64 -> decoder_out (N, J)
  joiner.onnx   encoder_out (N, J), decoder_out (N, J) -> logit (N, V)
  *.int8.onnx   the same, weights dynamically quantised to int8 (--int8)
  tokens.txt    '<blk> 0', '▁ 1', ...
  model.pt      TorchScript: encoder(x, [state0, state1]) -> (encoder_out, [state0', state1']),
                decoder(y), joiner(encoder_out, decoder_out), metadata() (the ONNX metadata union)

Usage: python export.py CHECKPOINT OUT_DIR [--int8]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Tuple

import onnx
import torch
from torch import Tensor, nn

from model import ModelConfig, Transducer
from units import write_tokens

CHUNK = 32  # decode_chunk_len: frames the stream advances per call (320 ms)
T_CHUNK = CHUNK + 3  # frames fed per call: two k=3, s=2 convs turn exactly CHUNK into CHUNK/4 outputs


class OnnxEncoder(nn.Module):
    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.encoder, self.proj = model.encoder, model.joiner.encoder_proj

    def forward(self, x: Tensor, state0: Tensor, state1: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        out, _, s0, s1 = self.encoder(x, state0, state1)
        return self.proj(out), s0, s1


class OnnxDecoder(nn.Module):
    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.decoder, self.proj = model.decoder, model.joiner.decoder_proj

    def forward(self, y: Tensor) -> Tensor:
        return self.proj(self.decoder(y, pad=False)[:, -1])


class OnnxJoiner(nn.Module):
    def __init__(self, model: Transducer) -> None:
        super().__init__()
        self.output_linear = model.joiner.output_linear

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.output_linear(torch.tanh(encoder_out + decoder_out))


class ScriptedTransducer(nn.Module):
    """The PyTorch-backend artifact: same semantics as the three ONNX files."""

    def __init__(self, model: Transducer, meta: Dict[str, str]) -> None:
        super().__init__()
        self.enc = OnnxEncoder(model)
        self.dec = OnnxDecoder(model)
        self.join = OnnxJoiner(model)
        self.meta = meta

    @torch.jit.export
    def encoder(self, x: Tensor, states: List[Tensor]) -> Tuple[Tensor, List[Tensor]]:
        out, s0, s1 = self.enc(x, states[0], states[1])
        return out, [s0, s1]

    @torch.jit.export
    def decoder(self, y: Tensor) -> Tensor:
        return self.dec(y)

    @torch.jit.export
    def joiner(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.join(encoder_out, decoder_out)

    @torch.jit.export
    def metadata(self) -> Dict[str, str]:
        return self.meta

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.join(encoder_out, decoder_out)


def load_model(checkpoint: Path) -> Transducer:
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    model = Transducer(ModelConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    return model.eval()


# ScriptedTransducer parameter prefixes -> Transducer's (the inverse of the export wrappers)
_SCRIPTED_TO_TRAINING = (("enc.encoder.", "encoder."), ("enc.proj.", "joiner.encoder_proj."),
                         ("dec.decoder.", "decoder."), ("dec.proj.", "joiner.decoder_proj."),
                         ("join.output_linear.", "joiner.output_linear."))


def weights_from_scripted(path: Path) -> Dict[str, Tensor]:
    """The exported part of a Transducer's state dict, read back from an exported model.pt
    (training-only heads are not in it)."""
    out = {}
    for key, value in torch.jit.load(str(path), map_location="cpu").state_dict().items():
        for src, dst in _SCRIPTED_TO_TRAINING:
            if key.startswith(src):
                out[dst + key[len(src):]] = value
                break
        else:
            raise ValueError(f"{path}: unexpected parameter {key}")
    return out


def metadata(cfg: ModelConfig) -> Dict[str, Dict[str, str]]:
    """The files' metadata. ``d_model`` and ``rnn_hidden_size`` are the sizes of state0 (h)
    and state1 (c), as sherpa-onnx reads them: both H. A widened model (H > D) also says
    its residual width D, as ``residual_dim``, which train.py reads back from a model.pt."""
    encoder = {"model_type": "lstm", "T": str(T_CHUNK), "decode_chunk_len": str(CHUNK),
               "num_encoder_layers": str(cfg.num_layers), "d_model": str(cfg.hidden),
               "rnn_hidden_size": str(cfg.hidden), "subsampling_factor": "4",
               "comment": "streamdec synthetic-en char LSTM transducer"}
    if cfg.hidden != cfg.d_model:
        encoder["residual_dim"] = str(cfg.d_model)
    return {
        "encoder": encoder,
        "decoder": {"vocab_size": str(cfg.vocab_size), "context_size": str(cfg.context_size)},
        "joiner": {"joiner_dim": str(cfg.joiner_dim)},
    }


def _add_metadata(path: Path, meta: Dict[str, str]) -> None:
    m = onnx.load(str(path))
    del m.metadata_props[:]
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(path))


def _export(module: nn.Module, args: tuple, path: Path, inputs: List[str], outputs: List[str],
            dynamic: Dict[str, Dict[int, str]]) -> None:
    module.eval()
    torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                      dynamic_axes=dynamic, opset_version=17, dynamo=False)
    module.eval()


def export(model: Transducer, out_dir: Path, int8: bool) -> None:
    cfg = model.cfg
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = metadata(cfg)
    n = 1
    s0, s1 = model.encoder.init_states(n)
    _export(OnnxEncoder(model), (torch.zeros(n, T_CHUNK, cfg.num_features), s0, s1), out_dir / "encoder.onnx",
            ["x", "state0", "state1"], ["encoder_out", "next_state0", "next_state1"],
            {"x": {0: "N"}, "state0": {1: "N"}, "state1": {1: "N"}, "encoder_out": {0: "N"},
             "next_state0": {1: "N"}, "next_state1": {1: "N"}})
    _export(OnnxDecoder(model), (torch.zeros(n, cfg.context_size, dtype=torch.long),), out_dir / "decoder.onnx",
            ["y"], ["decoder_out"], {"y": {0: "N"}, "decoder_out": {0: "N"}})
    _export(OnnxJoiner(model), (torch.zeros(n, cfg.joiner_dim), torch.zeros(n, cfg.joiner_dim)),
            out_dir / "joiner.onnx", ["encoder_out", "decoder_out"], ["logit"],
            {"encoder_out": {0: "N"}, "decoder_out": {0: "N"}, "logit": {0: "N"}})
    for name in ("encoder", "decoder", "joiner"):
        _add_metadata(out_dir / f"{name}.onnx", meta[name])
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        for name in ("encoder", "decoder", "joiner"):
            quantize_dynamic(str(out_dir / f"{name}.onnx"), str(out_dir / f"{name}.int8.onnx"),
                             weight_type=QuantType.QInt8)
            _add_metadata(out_dir / f"{name}.int8.onnx", meta[name])
    write_tokens(out_dir / "tokens.txt")
    union = {k: v for part in meta.values() for k, v in part.items()}
    for p in model.parameters():
        p.requires_grad_(False)
    scripted = torch.jit.script(ScriptedTransducer(model, union).eval())
    scripted.save(str(out_dir / "model.pt"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--int8", action="store_true")
    args = ap.parse_args()
    export(load_model(args.checkpoint), args.out_dir, args.int8)
    print(f"exported {args.checkpoint} -> {args.out_dir}")


if __name__ == "__main__":
    main()
