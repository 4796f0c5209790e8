"""Search options: one frozen dataclass for every search method, validated once."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ConfigError
from ..validation import require_at_least, require_finite, require_positive

__all__ = ["SearchConfig", "SEARCH_METHODS", "BEAM_SEARCHES", "DEFAULT_BEAM_SEARCH",
           "WORDS_SEARCH", "default_search", "require_beam_search", "with_beam_search",
           "with_method"]

#: Method names, the same in the API, config files, CLI and server (``search.SEARCHES``
#: maps each to its class).
SEARCH_METHODS = ("greedy", "modified_beam", "alsd", "tsd", "beam", "nsc")
#: the methods that keep a beam of hypotheses: hotwords, words (lang directory, grammar),
#: a neural LM and a beam size need one of them
BEAM_SEARCHES = SEARCH_METHODS[1:]
#: the beam search taken where one is needed and the client could not name one (a Vosk
#: phrase list on a server whose search is greedy)
DEFAULT_BEAM_SEARCH = "modified_beam"


def require_beam_search(method: str, what: str) -> None:
    """ConfigError when ``method`` is not a beam search: ``what`` (e.g. ``"hotwords
    need"``) needs one. The one home of this rule (config, server options, streams)."""
    if method not in BEAM_SEARCHES:
        raise ConfigError(f"{what} a beam search ({', '.join(BEAM_SEARCHES)}); the search is "
                          f"{method}")


def with_beam_search(config: "SearchConfig") -> "SearchConfig":
    """``config``, with ``DEFAULT_BEAM_SEARCH`` in place of a search that is not a beam
    search."""
    if config.method in BEAM_SEARCHES:
        return config
    return replace(config, method=DEFAULT_BEAM_SEARCH)


@dataclass(frozen=True)
class SearchConfig:
    method: str = "greedy"
    # greedy: symbols a single encoder frame may emit (1 in icefall/sherpa-onnx)
    max_sym_per_frame: int = 1
    # beam searches: hypotheses kept (max_active_paths for modified_beam)
    beam: int = 4
    # subtracted from the blank logit before log_softmax (> 0 favours emitting tokens)
    blank_penalty: float = 0.0
    # an <unk> winning the argmax is taken as a blank (never emitted)
    unk_as_blank: bool = True
    # temperature of the reported per-token log-probs (confidences); scores use 1.0
    temperature: float = 1.0
    # tsd: expansion rounds per frame (a path emits at most max_sym_exp - 1 symbols a frame;
    # 3, not ESPnet's 2: character models often need 2 symbols in one 40 ms frame)
    max_sym_exp: int = 3
    # alsd: symbols one frame may emit (replaces the offline u_max bound)
    max_sym_per_frame_alsd: int = 3
    # beam (Graves): symbols one frame may emit along a path (bounds the expansion loop)
    max_sym_per_frame_beam: int = 4
    # nsc: expansion steps per frame and prefix length for prefix merging
    nstep: int = 2
    prefix_alpha: int = 1
    # n-best entries finalize() returns
    nbest: int = 1
    # hotwords: file with one phrase per line (optional ":score"), default bonus per token
    hotwords_file: str | None = None
    # bonus per matched token (1.0, not icefall's 1.5 for BPE: character units are ~3x more
    # tokens per word; on the built-in model 1.5 costs unrelated utterances 0.4 WER points)
    hotwords_score: float = 1.0
    # decoder outputs cached by the last context_size tokens (bounded); a Recognizer's cache
    # is shared by all its searches and sized by its own search config: the value of a
    # per-stream config (create_stream(search=...)) does not change it
    decoder_cache_size: int = 20000
    # words: a lang directory (lexicon.txt or words.txt, and the word n-gram G.arpa; ``.gz``
    # allowed) that constrains the beam searches to its words and scores them with its LM
    lang_dir: str | None = None
    # weight of the word LM's natural-log probabilities (added when a word ends)
    word_lm_scale: float = 0.5
    # added per completed word (word insertion bonus)
    word_bonus: float = 0.0
    # unigram look-ahead inside words (keeps good prefixes from being pruned early)
    word_lookahead: bool = True
    # words outside the lexicon may be spelled freely, each paying unk_penalty and the LM's
    # <unk> probability
    allow_oov: bool = False
    unk_penalty: float = 5.0
    # and per unit spelled outside the lexicon (keeps an unknown word from running on)
    unk_unit_penalty: float = 1.0
    # neural LM shallow fusion: an ONNX unit LM (streamdec.search.neural_lm) and its weight
    lm_file: str | None = None
    lm_scale: float = 0.3

    def __post_init__(self) -> None:
        require_finite(self, "search")
        if self.method not in SEARCH_METHODS:
            raise ConfigError(f"search.method must be one of {', '.join(SEARCH_METHODS)}; "
                              f"got {self.method!r}")
        require_at_least(self, "search", (
            "max_sym_per_frame", "beam", "max_sym_exp", "max_sym_per_frame_alsd",
            "max_sym_per_frame_beam", "nstep", "nbest", "decoder_cache_size"), 1)
        if self.prefix_alpha < 0:
            raise ConfigError("search.prefix_alpha must be >= 0")
        for name in ("hotwords_file", "lang_dir", "lm_file"):
            if getattr(self, name):
                require_beam_search(self.method, f"search.{name} needs")
        require_at_least(self, "search", ("word_lm_scale", "unk_penalty", "unk_unit_penalty",
                                          "lm_scale"), 0)
        require_positive(self, "search", ("temperature",))


#: The search with words: ALSD, beam 16, constrained to the words of the model directory's
#: ``lang/`` (lexicon or words list, and the word n-gram G.arpa) and scored by its n-gram;
#: a word outside the list may still be spelled, paying ``unk_penalty`` and
#: ``unk_unit_penalty`` per unit. The built-in config ``accurate`` is this search.
WORDS_SEARCH = SearchConfig(method="alsd", beam=16, lang_dir="lang", word_lm_scale=0.5,
                            word_bonus=0.0, allow_oov=True, unk_penalty=5.0, unk_unit_penalty=2.0)


def default_search(model_dir: Path) -> SearchConfig:
    """The search used where nothing names one, the same through every door (the Python
    API, ``transcribe``, ``mic``, ``serve`` and each of its protocols): ``WORDS_SEARCH`` for
    a model whose directory ships its words (a ``lang/`` folder, as the built-in model
    does), else greedy (``SearchConfig()``). Chosen by measurement:
    bench/results/2026-12-07-default-search/README.md."""
    return WORDS_SEARCH if (Path(model_dir) / "lang").is_dir() else SearchConfig()


def with_method(config: SearchConfig, method: str) -> SearchConfig:
    """``config`` searched by ``method``: a search that is not a beam search drops the
    settings that need one (``lang_dir``, ``lm_file``, ``hotwords_file``), so that naming
    greedy over the default search with words gives plain greedy; a beam search keeps them.
    The one rule for ``--search`` and a connection's ``search=``."""
    if method in BEAM_SEARCHES:
        return replace(config, method=method)
    return replace(config, method=method, lang_dir=None, lm_file=None, hotwords_file=None)
