"""Export a trained tagger to ONNX, with its vocabulary, for streamdec.textfmt.

Usage: python export.py EXP_DIR OUT_DIR

Writes OUT_DIR/tagger.onnx (input ``ids`` (B, T) int64; outputs ``punct`` (B, T, 4) and
``case`` (B, T, 3) logits; metadata ``punct_labels``, ``case_labels``, ``pad_id``,
``unk_id``) and OUT_DIR/vocab.txt (line n is word id n + 2).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import onnx
import torch

from data import CASES, PUNCT
from tagger import PAD, UNK, Tagger


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("exp", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    vocab = (args.exp / "vocab.txt").read_text().split("\n")[:-1]
    model = Tagger(len(vocab) + 2, **({"dim": 8, "hidden": 8} if args.smoke else {}))
    model.load_state_dict(torch.load(args.exp / "checkpoint.pt")["model"])
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "tagger.onnx"
    torch.onnx.export(model, (torch.tensor([[2, 3, 4]]),), str(path), input_names=["ids"],
                      output_names=["punct", "case"], opset_version=17, dynamo=False,
                      dynamic_axes={"ids": {0: "B", 1: "T"}, "punct": {0: "B", 1: "T"},
                                    "case": {0: "B", 1: "T"}})
    proto = onnx.load(str(path))
    for key, value in {"punct_labels": ",".join(p or "none" for p in PUNCT),
                       "case_labels": ",".join(CASES), "pad_id": str(PAD),
                       "unk_id": str(UNK)}.items():
        proto.metadata_props.add(key=key, value=value)
    onnx.save(proto, str(path))
    shutil.copy(args.exp / "vocab.txt", args.out / "vocab.txt")
    print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
