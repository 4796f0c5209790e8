"""``streamdec lang``: lang directories and word language models.

    streamdec lang OUT_DIR --words words.txt [--model DIR]    # spelled with the model's units
    streamdec lang OUT_DIR --lexicon lexicon.txt [--sil-unit SIL --sil-prob 0.5]
    streamdec lang lm --order 3 TEXT --out OUT_DIR [--prune 1,2]

The first form writes the lang directory (tokens.txt, words.txt, lexicon(_disambig).txt,
L(_disambig).fst/.pt/.txt; see ``streamdec.lang.prepare``). ``lang lm`` estimates a
modified Kneser-Ney n-gram from TEXT (one sentence a line, words as the lexicon spells
them), writes ``G.arpa`` and, with kaldilm installed, ``G.fst`` over OUT_DIR's words.txt
(``#0`` on the back-off arcs). When OUT_DIR has a words.txt the LM's vocabulary is its
words (others become ``<unk>``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError

__all__ = ["add_parser"]


def add_parser(sub) -> None:
    p = sub.add_parser("lang", help="make a lang directory or a word n-gram LM",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="OUT_DIR | lm ...")
    p.set_defaults(run=run)


def _dir_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamdec lang", description="Write a lang directory.")
    p.add_argument("out_dir", type=Path)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--lexicon", type=Path, help="'word unit unit ...' lines")
    src.add_argument("--words", type=Path,
                     help="one word a line (an id may follow), spelled with the model's units")
    p.add_argument("--model", metavar="MODEL", help="model directory, or a model downloaded "
                   "by 'streamdec models get' (default: the built-in model)")
    p.add_argument("--sil-unit", metavar="UNIT",
                   help="the model's silence unit, for optional silence (default: none)")
    p.add_argument("--sil-prob", type=float, default=0.5, metavar="P",
                   help="probability of the optional silence (default: %(default)s)")
    p.add_argument("--no-fst", action="store_true", help="only the text files")
    return p


def _lm_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamdec lang lm",
                                description="Estimate a modified Kneser-Ney word n-gram.")
    p.add_argument("text", type=Path, help="training text, one sentence a line")
    p.add_argument("--order", type=int, default=3, metavar="N",
                   help="the n-gram's order (default: %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="folder for G.arpa (and G.fst)")
    p.add_argument("--vocab", type=Path,
                   help="word list of the LM's vocabulary (default: OUT/words.txt if present, "
                        "else every word of the text)")
    p.add_argument("--prune", default="",
                   help="count cutoffs for orders 2..N, e.g. '1,2' drops trigrams seen once "
                        "(default: none)")
    p.add_argument("--no-fst", action="store_true", help="only G.arpa")
    return p


def run(args: argparse.Namespace) -> int:
    rest = list(args.args)
    if rest[:1] == ["lm"]:
        return run_lm(_lm_parser().parse_args(rest[1:]))
    return run_dir(_dir_parser().parse_args(rest))


def run_dir(a: argparse.Namespace) -> int:
    from ..lang.lexicon import read_lexicon, read_words, spell_words
    from ..lang.prepare import write_lang_dir
    from ..hub.cache import resolve_model_dir
    from ..models.config import ModelConfig
    from ..tokens import SymbolTable

    symbols = SymbolTable.from_file(ModelConfig(model_dir=resolve_model_dir(a.model)).path
                                    / "tokens.txt")
    if a.lexicon:
        entries = read_lexicon(a.lexicon)
        skipped: list[str] = []
    else:
        entries, skipped = spell_words(read_words(a.words), symbols)
    if not entries:
        raise ConfigError("no lexicon entries to write")
    torch_ok = _importable("torch")
    counts = write_lang_dir(a.out_dir, entries, symbols, a.sil_unit, a.sil_prob,
                            fsts=not a.no_fst, k2_dicts=torch_ok)
    print(f"streamdec lang: {counts['words']} words, {counts['entries']} pronunciations, "
          f"disambiguation symbols #0..#{counts['disambig']} in {a.out_dir}", file=sys.stderr)
    if skipped:
        print(f"streamdec lang: skipped {len(skipped)} words the units cannot write "
              f"(e.g. {', '.join(skipped[:5])})", file=sys.stderr)
    if not a.no_fst and not torch_ok:
        print("streamdec lang: L.pt/L_disambig.pt not written (needs torch)", file=sys.stderr)
    return 0


def run_lm(a: argparse.Namespace) -> int:
    from ..lang.kneser_ney import estimate
    from ..lang.lexicon import open_text, read_words

    vocab_file = a.vocab or (a.out / "words.txt" if (a.out / "words.txt").is_file() else None)
    vocab = None
    if vocab_file is not None:
        vocab = [w for w in read_words(vocab_file)
                 if not (w.startswith("#") or w in ("<eps>", "<s>", "</s>"))]
    cutoffs = [int(x) for x in a.prune.split(",")] if a.prune else []
    try:
        with open_text(a.text) as f:
            sentences = [line.split() for line in f if line.split()]
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{a.text}: cannot read text ({e})") from e
    est = estimate(sentences, a.order, vocab=vocab)
    if cutoffs:
        est.prune(cutoffs)
    a.out.mkdir(parents=True, exist_ok=True)
    with open_text(a.out / "G.arpa", "wt") as f:
        for line in est.arpa_lines():
            f.write(line + "\n")
    sizes = ", ".join(f"{len(p)} {n}-grams" for n, p in enumerate(est.probs, 1))
    print(f"streamdec lang lm: {sizes}; discounts "
          f"{[tuple(round(d, 3) for d in ds) for ds in est.discounts]}", file=sys.stderr)
    for note in est.notes:
        print(f"streamdec lang lm: {note}", file=sys.stderr)
    if not a.no_fst:
        write_g_fst(a.out / "G.arpa", a.out / "G.fst", a.out / "words.txt", a.order)
    return 0


def write_g_fst(arpa: Path, out: Path, words: Path, order: int) -> None:
    """G.fst from the ARPA with kaldilm: word labels of ``words`` (when it exists), ``#0``
    on the back-off arcs."""
    try:
        import kaldilm
    except ImportError as e:
        raise ConfigError("G.fst needs kaldilm (python3 -m pip install -e '.[words]' in "
                          "the streamdec folder); or pass --no-fst") from e
    kw = {"read_symbol_table": str(words)} if words.is_file() else {}
    kaldilm.arpa2fst(input_arpa=str(arpa), output_fst=str(out), disambig_symbol="#0",
                     max_order=order, **kw)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
