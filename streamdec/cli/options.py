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
                   "(default, telephony, low-latency)")
    g.add_argument("--model", metavar="DIR", help="model directory (default: the built-in model)")
    g.add_argument("--backend", choices=("onnx", "torch"), help="inference backend")
    g.add_argument("--int8", action="store_true", default=None, help="use the *.int8.onnx files")
    g.add_argument("--num-threads", type=int, help="threads per ONNX Runtime session")
    g.add_argument("--search", choices=SEARCH_METHODS, help="search method")
    g.add_argument("--beam", type=int, help="beam size / max active paths")
    g.add_argument("--blank-penalty", type=float, help="subtracted from the blank logit")
    g.add_argument("--hotwords-file", help="one phrase per line, optional ':score'")
    g.add_argument("--hotwords-score", type=float, help="default bonus per hotword token")
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
                         hotwords_score=args.hotwords_score),
        endpoint=_override(rec.endpoint, enabled=False if args.no_endpoint else None))
    return replace(app, recognizer=rec)
