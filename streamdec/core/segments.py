"""Segment and endpoint bookkeeping as a pure function.

After each decoded chunk a stream's open segment either goes on (a partial result when its
text changed), closes at an endpoint (a final result, the search restarts with the last
context) or closes because the stream has ended (the last final, ``is_eof``). ``Segmenter``
computes that from values and returns new values; it touches no stream:

    events, search_state, segment = segmenter.advance(search, search_state, segment, is_last)

A segment closed by an endpoint advances the segment id only when it had text (an empty
segment yields no final, like sherpa-onnx's server). ``close`` ends the open segment on
request (a client's force-final): it always yields a final, empty or not, and advances the
id only when the segment had text. A partial is made when its text or its stable part
(``Result.stable_tokens``) changed. ``advance`` takes the stream's own endpoint rules
(None: the recognizer's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..models.base import ModelMeta
from ..search.base import Hypothesis, Search, SearchState
from ..tokens import SymbolTable
from .endpoint import EndpointConfig, is_endpoint
from .results import Result, make_result

__all__ = ["SegmentState", "Segmenter", "Closing"]


@dataclass(frozen=True)
class SegmentState:
    """Where a stream stands between segments."""

    segment_id: int = 0  # id of the open segment
    last_partial: tuple[int, ...] = ()  # tokens of the last partial sent (no repeats)
    last_stable: int = 0  # its stable tokens
    done: bool = False  # the end-of-stream final has been made
    # silence a force-final inserted before this segment (encoder frames), and where this
    # segment starts on the audio's timeline (seconds) when it follows such silence
    shift: int = 0
    start: float | None = None


@dataclass(frozen=True)
class Closing:
    """A requested final closes the segment after this chunk: the silence that padded the
    chunk (encoder frames) and where the audio ended (seconds on its own timeline)."""

    inserted: int
    audio_end: float


@dataclass(frozen=True)
class Segmenter:
    """Endpoint rules + result making for every stream of a recognizer (stateless)."""

    endpoint: EndpointConfig
    symbols: SymbolTable
    meta: ModelMeta

    def result(self, hyp: Hypothesis, search_state: SearchState, seg: SegmentState,
               is_final: bool, is_eof: bool = False, stable_tokens: int | None = None,
               end_limit: float | None = None) -> Result:
        words = getattr(search_state, "words", None)  # a beam search's word graph
        unknown = None
        if words is not None and words.unk_text is not None:  # grammar mode: [unk] words
            unknown = [not known for known in words.word_is_known(hyp.tokens)]
        return make_result(hyp, self.symbols, self.meta, segment=seg.segment_id,
                           segment_start=search_state.segment_start,
                           encoder_frame_offset=search_state.encoder_frame_offset,
                           is_final=is_final, is_eof=is_eof, unknown_words=unknown,
                           unknown_text=words.unk_text if unknown else None,
                           stable_tokens=stable_tokens, shift=seg.shift, start_time=seg.start,
                           end_limit=end_limit)

    def final(self, search: Search, state: SearchState, seg: SegmentState,
              is_eof: bool = False, end_limit: float | None = None) -> Result:
        """The final result of the segment; with an n-best search (``nbest`` > 1) it carries
        the n-best list as ``alternatives``."""
        nbest = search.finalize(state)
        best = self.result(nbest[0], state, seg, is_final=True, is_eof=is_eof,
                           end_limit=end_limit)
        if search.config.nbest > 1:
            alternatives = (best,) + tuple(self.result(h, state, seg, is_final=True,
                                                       is_eof=is_eof, end_limit=end_limit)
                                           for h in nbest[1:])
            best = replace(best, alternatives=alternatives)
        return best

    def advance(self, search: Search, state: SearchState, seg: SegmentState, is_last: bool,
                endpoint: EndpointConfig | None = None, closing: Closing | None = None
                ) -> tuple[list[Result], SearchState, SegmentState]:
        """The events after a decoded chunk, the search state to go on with and the new
        segment state. ``is_last``: the stream's input has ended and this was its last chunk;
        ``endpoint``: the stream's endpoint rules (None: the recognizer's); ``closing``: a
        requested final closes the segment after this chunk."""
        if closing is not None and not is_last:
            return self.close(search, state, seg, closing)
        if is_last:
            final = self.final(search, state, seg, is_eof=True)
            return [final], state, replace(seg, last_partial=(), done=True)
        best = search.partial(state)
        last = best.frames[-1] + 1 if best.frames else state.segment_start
        if is_endpoint(endpoint or self.endpoint, state.encoder_frame_offset - state.segment_start,
                       state.encoder_frame_offset - last, self.meta.encoder_frame_seconds):
            return self.end_at_endpoint(search, state, seg)
        stable = search.stable_length(state)
        if (best.tokens, stable) != (seg.last_partial, seg.last_stable):
            return ([self.result(best, state, seg, is_final=False,
                                 stable_tokens=stable)], state,
                    replace(seg, last_partial=best.tokens, last_stable=stable))
        return [], state, seg

    def end_at_endpoint(self, search: Search, state: SearchState, seg: SegmentState
                        ) -> tuple[list[Result], SearchState, SegmentState]:
        """End the open segment at an endpoint (the rules', or the voice activity
        detector's silence): its final when it has text, and a fresh segment."""
        events, segment = [], seg.segment_id
        if search.partial(state).tokens:
            events.append(self.final(search, state, seg))
            segment += 1
        return events, search.reset(state), SegmentState(segment_id=segment, shift=seg.shift)

    def close(self, search: Search, state: SearchState, seg: SegmentState,
              closing: Closing | None = None
              ) -> tuple[list[Result], SearchState, SegmentState]:
        """End the open segment now (a force-final): its final (empty when it has no text),
        the search restarted at ``state.encoder_frame_offset`` and the next segment's state.
        ``closing``: the last chunk was padded with silence; the final ends where the audio
        did, and the next segment starts there, the silence taken out of its times."""
        if closing is None:
            final = self.final(search, state, seg)
            nxt = SegmentState(shift=seg.shift)
        else:
            final = self.final(search, state, seg, end_limit=closing.audio_end)
            nxt = SegmentState(shift=seg.shift + closing.inserted, start=final.end_time)
        segment = seg.segment_id + 1 if final.token_ids else seg.segment_id
        return [final], search.reset(state), replace(nxt, segment_id=segment)
