"""Segment and endpoint bookkeeping as a pure function.

After each decoded chunk a stream's open segment either goes on (a partial result when its
text changed), closes at an endpoint (a final result, the search restarts with the last
context) or closes because the stream has ended (the last final, ``is_eof``). ``Segmenter``
computes that from values and returns new values; it touches no stream:

    events, search_state, segment = segmenter.advance(search, search_state, segment, is_last)

A segment closed by an endpoint advances the segment id only when it had text (an empty
segment yields no final, like sherpa-onnx's server).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .endpoint import EndpointConfig, is_endpoint
from .models.base import ModelMeta
from .results import Result, make_result
from .search.base import Hypothesis, Search, SearchState
from .tokens import SymbolTable

__all__ = ["SegmentState", "Segmenter"]


@dataclass(frozen=True)
class SegmentState:
    """Where a stream stands between segments."""

    segment: int = 0  # id of the open segment
    last_partial: tuple[int, ...] = ()  # tokens of the last partial sent (no repeats)
    done: bool = False  # the end-of-stream final has been made


@dataclass(frozen=True)
class Segmenter:
    """Endpoint rules + result making for every stream of a recognizer (stateless)."""

    endpoint: EndpointConfig
    symbols: SymbolTable
    meta: ModelMeta

    def result(self, hyp: Hypothesis, search_state: SearchState, segment: int,
               is_final: bool, is_eof: bool = False) -> Result:
        words = getattr(search_state, "words", None)  # a beam search's word graph
        unknown = None
        if words is not None and words.unk_text is not None:  # grammar mode: [unk] words
            unknown = [not known for known in words.word_is_known(hyp.tokens)]
        return make_result(hyp, self.symbols, self.meta, segment=segment,
                           segment_start=search_state.segment_start,
                           frame_offset=search_state.frame_offset, is_final=is_final,
                           is_eof=is_eof, unknown_words=unknown,
                           unknown_text=words.unk_text if unknown else None)

    def final(self, search: Search, state: SearchState, segment: int, is_eof: bool = False
              ) -> Result:
        """The final result of the segment; with an n-best search (``nbest`` > 1) it carries
        the n-best list as ``alternatives``."""
        nbest = search.finalize(state)
        best = self.result(nbest[0], state, segment, is_final=True, is_eof=is_eof)
        if search.config.nbest > 1:
            alternatives = (best,) + tuple(self.result(h, state, segment, is_final=True,
                                                       is_eof=is_eof) for h in nbest[1:])
            best = replace(best, alternatives=alternatives)
        return best

    def advance(self, search: Search, state: SearchState, seg: SegmentState, is_last: bool
                ) -> tuple[list[Result], SearchState, SegmentState]:
        """The events after a decoded chunk, the search state to go on with and the new
        segment state. ``is_last``: the stream's input has ended and this was its last chunk."""
        if is_last:
            final = self.final(search, state, seg.segment, is_eof=True)
            return [final], state, replace(seg, last_partial=(), done=True)
        best = search.partial(state)
        last = best.frames[-1] + 1 if best.frames else state.segment_start
        if is_endpoint(self.endpoint, state.frame_offset - state.segment_start,
                       state.frame_offset - last, self.meta.encoder_frame_seconds):
            return self.close(search, state, seg)
        if best.tokens != seg.last_partial:
            return ([self.result(best, state, seg.segment, is_final=False)], state,
                    replace(seg, last_partial=best.tokens))
        return [], state, seg

    def close(self, search: Search, state: SearchState, seg: SegmentState
              ) -> tuple[list[Result], SearchState, SegmentState]:
        """End the open segment at an endpoint (the rules', or the voice activity
        detector's silence): its final when it has text, and a fresh segment."""
        events, segment = [], seg.segment
        if search.partial(state).tokens:
            events.append(self.final(search, state, segment))
            segment += 1
        return events, search.reset(state), SegmentState(segment=segment)
