"""Options every command shares: which config, model and search. One place turns them
into the frozen config objects (flags override the config file)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from ..appconfig import AppConfig, load_config
from ..core.recognizer import Recognizer
from ..hub.cache import resolve_model_dir
from ..models.config import ModelConfig
from ..search.config import (BEAM_SEARCHES, SEARCH_METHODS, WORDS_SEARCH, SearchConfig,
                             default_search, with_method)

__all__ = ["HelpFormatter", "DEFAULT_SEARCH_TEXT", "add_recognizer_options",
           "add_text_format_option", "chosen_text_format", "app_config_from_args",
           "announce_model", "add_keywords_option", "keyword_lines"]

#: the default search in words, as every command's --help states it
DEFAULT_SEARCH_TEXT = (f"the model's words ({WORDS_SEARCH.method}, beam {WORDS_SEARCH.beam}, "
                       "its lang/) where its directory has lang/, as the built-in model "
                       "does; else greedy")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except None and False (an option whose default is
    None says in its help what happens without it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_recognizer_options(p: argparse.ArgumentParser) -> None:
    """The recognizer's options; ``app_config_from_args`` applies them."""
    g = p.add_argument_group("recognizer", "The defaults below are the built-in settings; "
                             "--config replaces them and the options override both.")
    g.add_argument("--config", metavar="CONFIG", help="TOML config file, or a name in configs/ "
                   "(default, telephony, low-latency, accurate, two-pass) (default: none, the "
                   "built-in settings)")
    g.add_argument("--model", metavar="MODEL", help="model directory, or the name of a model "
                   "downloaded by 'streamdec models get NAME' (default: the built-in model)")
    g.add_argument("--backend", choices=("onnx", "torch"),
                   help=f"inference backend (default: {ModelConfig.backend})")
    g.add_argument("--int8", action="store_true", default=None,
                   help="use the *.int8.onnx files (per network, where the directory has one)")
    g.add_argument("--model-variant", metavar="NAME", help="which of several variants of a "
                   "model directory to load, e.g. chunk-16-left-64 (default: the largest "
                   "left context)")
    for role in ("encoder", "decoder", "joiner"):
        g.add_argument(f"--{role}", metavar="FILE", help=f"the {role} ONNX file, as "
                       "sherpa-onnx takes it (default: found in the model directory)")
    g.add_argument("--tokens", metavar="FILE",
                   help="tokens.txt (default: the model directory's)")
    g.add_argument("--num-threads", type=int, metavar="N",
                   help=f"threads per ONNX Runtime session (default: {ModelConfig.num_threads})")
    g.add_argument("--search", choices=SEARCH_METHODS, metavar="METHOD",
                   help=f"search method: {', '.join(SEARCH_METHODS)}; greedy drops the "
                   f"words (default: {DEFAULT_SEARCH_TEXT})")
    g.add_argument("--beam", type=int, metavar="N",
                   help=f"beam size / max active paths (default: {WORDS_SEARCH.beam} with "
                   f"words, else {SearchConfig.beam})")
    g.add_argument("--blank-penalty", type=float, metavar="X",
                   help="subtracted from the blank logit "
                   f"(default: {SearchConfig.blank_penalty:g})")
    beams = ", ".join(BEAM_SEARCHES)
    g.add_argument("--hotwords-file", metavar="FILE",
                   help="one phrase per line, optional ':score'; hotwords "
                   f"need a beam search (--search {beams}), not greedy (default: none)")
    g.add_argument("--hotwords-score", type=float, metavar="X",
                   help="default bonus per hotword token "
                   f"(default: {SearchConfig.hotwords_score:g})")
    g.add_argument("--lang", metavar="DIR", help="words: a lang directory (lexicon or "
                   "words.txt, and G.arpa) that constrains a beam search to its words; "
                   f"without --search, the {WORDS_SEARCH.method} words search with it "
                   "(default: the model directory's lang/, where it has one)")
    g.add_argument("--word-lm-scale", type=float, metavar="X",
                   help="weight of the word n-gram (--lang) "
                   f"(default: {SearchConfig.word_lm_scale:g})")
    g.add_argument("--word-bonus", type=float, metavar="X",
                   help="added per word (--lang) "
                   f"(default: {SearchConfig.word_bonus:g})")
    g.add_argument("--allow-oov", action="store_true", default=None,
                   help="let words outside the lexicon through, each paying --unk-penalty "
                   f"(default: {'on' if WORDS_SEARCH.allow_oov else 'off'} with the model's "
                   f"words, else {'on' if SearchConfig.allow_oov else 'off'})")
    g.add_argument("--unk-penalty", type=float, metavar="X",
                   help="cost of an unknown word (--allow-oov) "
                   f"(default: {SearchConfig.unk_penalty:g})")
    g.add_argument("--lm", metavar="FILE", help="neural unit LM (ONNX) for shallow fusion "
                   "(default: none)")
    g.add_argument("--lm-scale", type=float, metavar="X", help="weight of the neural LM (--lm) "
                   f"(default: {SearchConfig.lm_scale:g})")
    g.add_argument("--no-endpoint", action="store_true", help="never split into segments")


def add_text_format_option(p: argparse.ArgumentParser, default: str) -> None:
    """``--text-format raw|punct|full`` (streamdec.textfmt); ``default`` says in words what
    applies without it."""
    from ..textfmt import TEXT_FORMATS

    p.add_argument("--text-format", choices=TEXT_FORMATS,
                   help="finals for people: raw (as recognised), punct (punctuation and "
                        "casing), full (punct, and numbers, dates, times, money written as "
                        f"digits) (default: {default})")


def chosen_text_format(given: str | None, default: str) -> str:
    """``--text-format`` as given; without it the command's ``default``, except that
    ``full`` becomes ``punct`` where the inverse text normalisation library is not
    installed (a core install), said in one line on stderr. Asked for by name, ``full``
    without it stays an error (the caller's load says which package to install)."""
    from ..textfmt import itn_available

    if given is not None:
        return given
    if default == "full" and not itn_available():
        print("streamdec: note: finals get punctuation and casing, but numbers, dates and "
              "times stay in words: python3 -m pip install -e '.[text]' in the streamdec "
              "folder for --text-format full",
              file=sys.stderr)
        return "punct"
    return default


def _override(obj, **changes):
    changes = {k: v for k, v in changes.items() if v is not None}
    return replace(obj, **changes) if changes else obj


def app_config_from_args(args: argparse.Namespace) -> AppConfig:
    """The config file named by ``--config`` with the flags applied on top. Every command
    reads its search from here: without ``--config``/``--search``, the model's default
    search (``search.config.default_search``: words with the built-in model, greedy with
    a model without ``lang/``), as the Python API's ``RecognizerConfig()`` and the server."""
    app = load_config(args.config)
    rec = app.recognizer
    model = _override(rec.model, model_dir=resolve_model_dir(args.model), backend=args.backend,
                      int8=args.int8, num_threads=args.num_threads, variant=args.model_variant,
                      encoder=args.encoder, decoder=args.decoder, joiner=args.joiner,
                      tokens=args.tokens)
    search = rec.search
    if search == default_search(rec.model.path):  # the config's default: the model's own
        search = default_search(model.path)
    if args.search is not None:
        search = with_method(search, args.search)
    if args.lang is not None:
        keep = args.search is not None or search.method in BEAM_SEARCHES
        search = replace(search if keep else WORDS_SEARCH, lang_dir=args.lang)
    search = _override(search, beam=args.beam, blank_penalty=args.blank_penalty,
                       hotwords_file=args.hotwords_file, hotwords_score=args.hotwords_score,
                       word_lm_scale=args.word_lm_scale, word_bonus=args.word_bonus,
                       allow_oov=args.allow_oov, unk_penalty=args.unk_penalty,
                       lm_file=args.lm, lm_scale=args.lm_scale)
    rec = replace(rec, model=model, search=search,
                  endpoint=_override(rec.endpoint, enabled=False if args.no_endpoint else None))
    return replace(app, recognizer=rec)


def announce_model(recognizer: Recognizer) -> None:
    """Say on stderr which files of a model directory were loaded, when it held other
    copies to choose from (variants, fp32 and int8); nothing for the built-in model."""
    files = recognizer.model_files
    if files is not None and files.chose and not recognizer.config.model.is_builtin:
        print(f"streamdec: {files.describe()}", file=sys.stderr, flush=True)


def add_keywords_option(p: argparse.ArgumentParser) -> None:
    """``--keywords KEYWORDS``: keyword spotting beside the transcript."""
    p.add_argument("--keywords", metavar="KEYWORDS",
                   help="spot keywords beside the transcript: a file with one keyword a line, "
                        "or keywords separated by '/', in sherpa-onnx's format: a phrase or "
                        "its units (e.g. 'HEY JARVIS' or '\u2581A LE X A'), then optional "
                        "':BOOST' '#THRESHOLD' '@TEXT' (e.g. 'ALEXA #0.3/JARVIS :2'); see "
                        "docs/keywords.md (default: none)")


def keyword_lines(value: str | None, recognizer: Recognizer) -> list[str] | None:
    """The keyword lines of ``--keywords`` (a file's lines when ``value`` names a file, else
    ``value`` split at ``/``), checked against the recognizer's model: ConfigError /
    TokenizeError for an unusable list (before any audio is decoded). None without it."""
    from pathlib import Path

    from ..search.keyword_graph import read_keywords, split_keywords

    if value is None:
        return None
    lines = read_keywords(value) if Path(value).is_file() else split_keywords(value)
    recognizer.resources.keywords(lines, recognizer.keyword_search.config)
    return lines
