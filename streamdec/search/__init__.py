"""Incremental transducer searches, one algorithm per module, all behind ``Search``.

=================  ===============================  ======================================
method             module                           per frame
=================  ===============================  ======================================
``greedy``         greedy.py                        argmax, <= max_sym_per_frame symbols
``modified_beam``  modified_beam.py                 top ``beam`` of hyps x vocab, <= 1 symbol
``alsd``           alsd.py                          alignment-length steps (t = i - u)
``tsd``            tsd.py                           <= max_sym_exp expansion rounds
``beam``           beam.py                          Graves: best-first until ``beam`` kept
``nsc``            nsc.py                           prefix merging + ``nstep`` rounds
=================  ===============================  ======================================

The beam searches share their bookkeeping (``beam_utils``): the whole beam is carried
between chunks in a frozen state value, one decoder call and one joiner call per inner step
for all hypotheses of all streams, ``<unk>`` as blank, equal sequences log-added, ranking by
score / (tokens + context size), hotword bonuses from the stream's ``ContextGraph``
(``context_graph``) refunded at segment end.

Keywords: ``keywords`` spots a stream's keywords (``keyword_graph``: sherpa-onnx's keyword
format and automaton) beside whichever search makes its transcript, on the same encoder
frames; it has a small protocol of its own (``init_state``, ``step`` -> states and hits).

Words, for every beam search: a stream's ``WordGraph`` (``word_graph``: lexicon prefix tree x
word n-gram, or a phrase ``Grammar`` from ``grammar``) constrains the units to words and
adds the word LM's scores; a search's ``NeuralLm`` (``neural_lm``, ``config.lm_file``) adds
a unit LM's log-probabilities (shallow fusion). Both are scored before pruning, their
states carried per hypothesis (``Hypothesis.word_node``/``lm_state``/``lm``).
"""

from __future__ import annotations

from .base import Hypothesis, Search, SearchState
from .config import SEARCH_METHODS, SearchConfig
from .decoder_cache import DecoderCache
from .alsd import AlsdSearch
from .beam import ClassicBeamSearch
from .greedy import GreedySearch
from .modified_beam import ModifiedBeamSearch
from .nsc import NscSearch
from .tsd import TsdSearch

__all__ = ["Hypothesis", "Search", "SearchState", "SearchConfig", "SEARCH_METHODS",
           "DecoderCache", "make_search", "SEARCHES"]

#: method name (``SEARCH_METHODS``, in its order) -> Search class
SEARCHES: dict[str, type[Search]] = dict(zip(SEARCH_METHODS, (
    GreedySearch, ModifiedBeamSearch, AlsdSearch, TsdSearch, ClassicBeamSearch, NscSearch),
    strict=True))


def make_search(model, config: SearchConfig, decoder_cache: DecoderCache | None = None,
                unk_id: int | None = None, meta=None, lm=None) -> Search:
    """The search object for ``config.method`` (shared by every stream that uses it);
    see ``Search.__init__`` for the arguments."""
    return SEARCHES[config.method](model, config, decoder_cache, unk_id, meta, lm)
