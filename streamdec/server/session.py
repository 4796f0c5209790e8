"""What a protocol session (a state machine without I/O) tells the connection to do.

A session (``sherpa.SherpaSession``, ``vosk.VoskSession``) takes the client's messages
(``receive``: bytes, text, or ``DRAIN`` when the server starts draining) and its streams'
results, and answers with commands; ``Connection.serve`` carries them out in order (the only
code that touches the socket and the engine). A protocol error is a ``ClientError`` raised
by the session; the connection turns it into the error message and close code.

=================  ===========================================================================
command            the connection
=================  ===========================================================================
``Feed(data)``     decodes the audio message and feeds it to the channels' streams (limits,
                   back-pressure)
``Finish()``       ends the input of every channel (their last results follow)
``ForceFinal(w)``  ends the open utterance of every channel now (force-final; ``bad_message``
                   naming the client's request ``w`` when a channel has a VAD)
``Reply()``        waits until the audio so far is decoded, then hands each channel's new
                   results to ``session.reply(channel, results, audio_seconds)``
``Send(text)``     sends a text message
``Reopen(opts)``   opens the channels' streams anew with these options (``bad_config`` when
                   unusable)
``Retune(opts)``   takes these options for the audio to come (its rate, text format and
                   endpoint rules), keeping the streams
``Close(code)``    closes the connection normally: the session is over
=================  ===========================================================================

A session that streams results as they come (``push_results``) gets each one through
``session.result(channel, result)`` and, once every channel has its last one,
``session.results_ended()``. Either way the finals it gets are already formatted at the
connection's ``text_format`` (``display``: done off the loop by the connection).

Such a session also says, as ``binary_is_audio``, whether a binary message would now be
``[Feed(message)]`` and nothing else: while it is, the connection may feed a binary
message the moment it arrives, without handing it to ``receive`` (``Connection``'s audio
taken as it arrives), which is the same thing done sooner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..errors import ClientError
from .options import StreamOptions

__all__ = ["DRAIN", "Feed", "Finish", "ForceFinal", "Reply", "Send", "Reopen", "Retune", "Close",
           "Command", "InputEnd"]

DRAIN = object()  # the message a session receives once when the server starts draining


@dataclass(frozen=True)
class Feed:
    data: bytes


@dataclass(frozen=True)
class Finish:
    pass


@dataclass(frozen=True)
class ForceFinal:
    request: str  # what the client sent for it (for the error when it is not available)


@dataclass(frozen=True)
class Reply:
    pass


@dataclass(frozen=True)
class Send:
    text: str


@dataclass(frozen=True)
class Reopen:
    options: StreamOptions


@dataclass(frozen=True)
class Retune:
    options: StreamOptions


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


Command = Union[Feed, Finish, ForceFinal, Reply, Send, Reopen, Retune, Close]


class InputEnd:
    """Where a session stands with its client's input, and the rule every protocol keeps at
    its end: ``finished`` once the client's end message (``end_input``) or the server's
    drain came, ``draining`` for the drain. The drain finishes the streams; audio after
    the drain is dropped (the client could not know); audio after the client's own end is
    the client's error."""

    finished = False
    draining = False

    def end_input(self) -> list[Command]:
        self.finished = True
        return [Finish()]

    def at_input_end(self, message, audio_after_end: str) -> list[Command] | None:
        """The commands for ``message`` where the input's end decides them (``DRAIN``;
        audio once finished: nothing in a drain, else ClientError ``bad_message`` with
        ``audio_after_end``), or None where the session reads it itself."""
        if message is DRAIN:
            self.draining = True
            return self.end_input()
        if isinstance(message, bytes) and self.finished:
            if self.draining:
                return []
            raise ClientError("bad_message", audio_after_end)
        return None
