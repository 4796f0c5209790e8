"""The built-in model's words: its vocabulary, lang directory and word trigram, from the
recipe's training text only (never the dev sentences).

With ``--real-en K`` the transcripts of the real English training speakers
(``real_en.clips('train')``: never the held-out speakers, never the dev set) join the
text, repeated K times (their sentences are few beside the synthetic text: 3.3 k lines
against 46 k), and their words join the vocabulary.

- vocabulary: every word of the training text plus every entry of the ``wamerican`` word
  list (the list the training text samples spellings from; here with its names and
  possessives too), normalised like the text (``text_norm``);
- ``streamdec lang OUT --words vocab.txt``: the full lang directory (L.fst, L.pt, ...);
- ``streamdec lang lm --order 3 train.txt --out OUT --prune 2,2``: modified Kneser-Ney
  trigram over that vocabulary, bigrams and trigrams seen once dropped (0.9 MB compressed;
  on the espeak dev set, ALSD beam 8, the same WER as keeping them all: 21.5 vs 21.4%).

With ``--assets DIR`` the two files the search reads are also written there compressed:
``words.txt.gz`` and ``G.arpa.gz`` (the shipped ``streamdec/assets/synthetic-en/lang``).

Usage: python make_lang.py data/text/train.txt data/lang [--assets DIR] [--prune 2,2] [--real-en K]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

from make_text import WORD_LIST
from text_norm import normalize

from streamdec.cli.main import main as streamdec


def lm_text(train: Path, out: Path, real_en: int, data: Path | None = None) -> Path:
    """The LM's text: ``train`` alone, or (``real_en`` > 0) written to ``out`` with the real
    English training transcripts (of ``data``, default ``real_en.DATA``) appended ``real_en``
    times."""
    if real_en <= 0:
        return train
    from real_en import DATA, clips

    real = "".join(c.text + "\n" for c in clips("train", data or DATA))
    out.write_text(train.read_text(encoding="utf-8") + real * real_en, encoding="utf-8")
    return out


def vocabulary(train: Path) -> list[str]:
    words = {w for line in train.read_text(encoding="utf-8").splitlines() for w in line.split()}
    if WORD_LIST.is_file():
        entries = WORD_LIST.read_text(encoding="utf-8", errors="ignore").split()
        words |= {w for w in (normalize(x) for x in entries) if w and " " not in w}
    return sorted(words)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--assets", type=Path, help="also write words.txt.gz and G.arpa.gz here")
    ap.add_argument("--prune", default="2,2")
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--real-en", type=int, default=0, metavar="K",
                    help="add the real English training transcripts K times (0: none)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    text = lm_text(args.train, args.out / "lm-text.txt", args.real_en)
    vocab = args.out / "vocab.txt"
    vocab.write_text("\n".join(vocabulary(text)) + "\n", encoding="utf-8")
    for argv in (["lang", str(args.out), "--words", str(vocab)],
                 ["lang", "lm", "--order", str(args.order), str(text), "--out",
                  str(args.out), "--prune", args.prune]):
        if streamdec(argv) != 0:
            raise SystemExit(f"streamdec {' '.join(argv)} failed")
    if args.assets:
        args.assets.mkdir(parents=True, exist_ok=True)
        for name in ("words.txt", "G.arpa"):
            with open(args.out / name, "rb") as src, \
                    gzip.GzipFile(args.assets / f"{name}.gz", "wb", compresslevel=9,
                                  mtime=0) as dst:
                shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    main()
