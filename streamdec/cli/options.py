"""Options every command shares: which config, model and search. One place turns them
into the frozen config objects (flags override the config file)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..config import AppConfig, load_config
from ..search.config import SEARCH_METHODS

__all__ = ["add_recognizer_options", "app_config_from_args"]


def add_recognizer_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("recognizer")
    g.add_argument("--config", help="TOML config file, or a name in configs/ "
                   "(default, telephony, low-latency, accurate)")
    g.add_argument("--model", metavar="DIR", help="model directory (default: the built-in model)")
    g.add_argument("--backend", choices=("onnx", "torch"), help="inference backend")
    g.add_argument("--int8", action="store_true", default=None, help="use the *.int8.onnx files")
    g.add_argument("--num-threads", type=int, help="threads per ONNX Runtime session")
    g.add_argument("--search", choices=SEARCH_METHODS, help="search method")
    g.add_argument("--beam", type=int, help="beam size / max active paths")
    g.add_argument("--blank-penalty", type=float, help="subtracted from the blank logit")
    g.add_argument("--hotwords-file", help="one phrase per line, optional ':score'")
    g.add_argument("--hotwords-score", type=float, help="default bonus per hotword token")
    g.add_argument("--lang", metavar="DIR", help="words: a lang directory (lexicon or "
                   "words.txt, and G.arpa) that constrains a beam search to its words")
    g.add_argument("--word-lm-scale", type=float, help="weight of the word n-gram (--lang)")
    g.add_argument("--word-bonus", type=float, help="added per word (--lang)")
    g.add_argument("--allow-oov", action="store_true", default=None,
                   help="let words outside the lexicon through, each paying --unk-penalty")
    g.add_argument("--unk-penalty", type=float, help="cost of an unknown word (--allow-oov)")
    g.add_argument("--lm", metavar="FILE", help="neural unit LM (ONNX) for shallow fusion")
    g.add_argument("--lm-scale", type=float, help="weight of the neural LM (--lm)")
    g.add_argument("--no-endpoint", action="store_true", help="never split into segments")


def _override(obj, **changes):
    changes = {k: v for k, v in changes.items() if v is not None}
    return replace(obj, **changes) if changes else obj


def app_config_from_args(args: argparse.Namespace) -> AppConfig:
    """The config file named by ``--config`` with the flags applied on top."""
    app = load_config(args.config)
    rec = app.recognizer
    rec = replace(
        rec,
        model=_override(rec.model, model_dir=args.model, backend=args.backend, int8=args.int8,
                        num_threads=args.num_threads),
        search=_override(rec.search, method=args.search, beam=args.beam,
                         blank_penalty=args.blank_penalty, hotwords_file=args.hotwords_file,
                         hotwords_score=args.hotwords_score, lang_dir=args.lang,
                         word_lm_scale=args.word_lm_scale, word_bonus=args.word_bonus,
                         allow_oov=args.allow_oov, unk_penalty=args.unk_penalty,
                         lm_file=args.lm, lm_scale=args.lm_scale),
        endpoint=_override(rec.endpoint, enabled=False if args.no_endpoint else None))
    return replace(app, recognizer=rec)
