"""Raw vs formatted finals of the built-in model on dev utterances, side by side.

Usage: python bench/text/textfmt_examples.py DEV_DIR TSV ID... [--out FILE.md]

DEV_DIR holds the dev audio (``recipes/synthetic-en/make_dev.py`` writes it, e.g.
``/tmp/streamdec-dev/espeak``), TSV its references (``utt_id<TAB>text``, e.g.
``recipes/synthetic-en/dev/espeak.tsv``). Each ID is transcribed with the built-in model
(the built-in settings: greedy, as ``streamdec serve``) and its finals are shown as recognised
(``raw``) and formatted (``full``: punctuation, casing, inverse text normalisation).
Then the spoken sentences of the call-center list (``tests/data/itn_cases.tsv``) and
their ``full`` formatting (words with made-up times: the text alone is shown).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamdec import Recognizer  # noqa: E402
from streamdec.core.results import Word  # noqa: E402
from streamdec.textfmt import default_formatter  # noqa: E402
from streamdec.files.transcribe import transcribe_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dev_dir", type=Path)
    ap.add_argument("tsv", type=Path)
    ap.add_argument("ids", nargs="+")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    refs = dict(line.split("\t", 1) for line in args.tsv.read_text().splitlines() if line)
    rec = Recognizer()
    fmt = default_formatter()
    rows = ["| utterance | reference | raw (`text`) | formatted (`display`, full) |",
            "|---|---|---|---|"]
    paths = [str(args.dev_dir / f"{i}.wav") for i in args.ids]
    for utt, item in zip(args.ids, transcribe_files(rec, paths)):
        finals = [fmt.apply(r, "full") for r in item.finals if r.text]
        raw = " ".join(r.text for r in finals)
        shown = " ".join(r.display for r in finals)
        rows.append(f"| {utt} | {refs[utt]} | {raw} | {shown} |")
    rows += ["", "| call-center list (spoken) | formatted (full) |", "|---|---|"]
    cases = Path(__file__).resolve().parents[2] / "tests" / "data" / "itn_cases.tsv"
    for line in cases.read_text().splitlines():
        if line and not line.startswith("#"):
            spoken = line.split("\t")[0].split()
            words = [Word(w, 0.3 * n, 0.3 * n + 0.25, 0.9) for n, w in enumerate(spoken)]
            rows.append(f"| {' '.join(spoken)} | {fmt.format(words, 'full').text} |")
    text = "\n".join(rows) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
