"""Decode wav files with the exported ONNX model (own chunked greedy search, or
sherpa-onnx) and write hypotheses as JSONL in the ``streamdec transcribe --format
jsonl`` shape (one ``final`` event per file), so ``score.py`` scores either.

The encoder is run the streaming way: chunks of T = 35 frames advancing by
decode_chunk_len = 32, states carried; at most one symbol per encoder frame.

Usage: python evaluate.py MODEL_DIR WAV_DIR OUT_JSONL [--int8] [--engine onnx|sherpa]
Then:  python score.py WAV_DIR/refs.tsv OUT_JSONL
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: streamdec
from streamdec.audio.features import compute_fbank  # noqa: E402

TAIL_PADDING_FRAMES = 66


def read_tokens(path: Path) -> dict[int, str]:
    table = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        table[int(parts[-1])] = parts[0] if len(parts) > 1 else " "
    return table


class OnnxGreedy:
    """Streaming greedy decoding of one utterance at a time with onnxruntime."""

    def __init__(self, model_dir: Path, int8: bool = False, threads: int = 1) -> None:
        suffix = ".int8.onnx" if int8 else ".onnx"
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1

        def session(name: str) -> ort.InferenceSession:
            return ort.InferenceSession(str(model_dir / f"{name}{suffix}"), opts, providers=["CPUExecutionProvider"])

        self.encoder, self.decoder, self.joiner = session("encoder"), session("decoder"), session("joiner")
        meta = self.encoder.get_modelmeta().custom_metadata_map
        self.T, self.chunk = int(meta["T"]), int(meta["decode_chunk_len"])
        self.layers, self.d_model = int(meta["num_encoder_layers"]), int(meta["d_model"])
        self.hidden = int(meta["rnn_hidden_size"])
        self.tokens = read_tokens(model_dir / "tokens.txt")

    def decode_features(self, feats: np.ndarray) -> list[int]:
        """feats (T, 80) -> token ids."""
        s0 = np.zeros((self.layers, 1, self.d_model), np.float32)
        s1 = np.zeros((self.layers, 1, self.hidden), np.float32)
        ctx = np.array([[-1, 0]], np.int64)
        dec = self.decoder.run(None, {self.decoder.get_inputs()[0].name: ctx})[0]
        hyp: list[int] = []
        names = [i.name for i in self.encoder.get_inputs()]
        jn = [i.name for i in self.joiner.get_inputs()]
        for start in range(0, len(feats) - self.T + 1, self.chunk):
            x = feats[None, start:start + self.T].astype(np.float32)
            enc, s0, s1 = self.encoder.run(None, {names[0]: x, names[1]: s0, names[2]: s1})
            for t in range(enc.shape[1]):
                logit = self.joiner.run(None, {jn[0]: enc[:, t], jn[1]: dec})[0]
                best = int(logit[0].argmax())
                if best != 0:
                    hyp.append(best)
                    ctx = np.array([[ctx[0, 1], best]], np.int64)
                    dec = self.decoder.run(None, {self.decoder.get_inputs()[0].name: ctx})[0]
        return hyp

    def transcribe(self, samples: np.ndarray, rate: int) -> str:
        feats = compute_fbank(samples, rate, tail_padding_frames=TAIL_PADDING_FRAMES)
        text = "".join(self.tokens[i] for i in self.decode_features(feats))
        return " ".join(text.replace("\u2581", " ").split())


class SherpaGreedy:
    """The same files decoded by the sherpa-onnx package (reference implementation)."""

    def __init__(self, model_dir: Path, int8: bool = False, threads: int = 1) -> None:
        import sherpa_onnx
        suffix = ".int8.onnx" if int8 else ".onnx"
        self.rec = sherpa_onnx.OnlineRecognizer.from_transducer(
            tokens=str(model_dir / "tokens.txt"), encoder=str(model_dir / f"encoder{suffix}"),
            decoder=str(model_dir / f"decoder{suffix}"), joiner=str(model_dir / f"joiner{suffix}"),
            num_threads=threads, sample_rate=16000, feature_dim=80, decoding_method="greedy_search")

    def transcribe(self, samples: np.ndarray, rate: int) -> str:
        s = self.rec.create_stream()
        s.accept_waveform(rate, samples)
        s.accept_waveform(rate, np.zeros(int(TAIL_PADDING_FRAMES * rate / 100), np.float32))
        s.input_finished()
        while self.rec.is_ready(s):
            self.rec.decode_stream(s)
        return " ".join(self.rec.get_result(s).split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("wav_dir", type=Path)
    ap.add_argument("out_jsonl", type=Path)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--engine", choices=["onnx", "sherpa"], default="onnx")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    decoder = (OnnxGreedy if args.engine == "onnx" else SherpaGreedy)(args.model_dir, args.int8, args.threads)
    with open(args.out_jsonl, "w") as out:
        for wav in sorted(args.wav_dir.glob("*.wav")):
            samples, rate = sf.read(wav, dtype="float32")
            text = decoder.transcribe(samples, rate)
            out.write(json.dumps({"file": str(wav), "type": "final", "segment": 0, "text": text}) + "\n")


if __name__ == "__main__":
    main()
