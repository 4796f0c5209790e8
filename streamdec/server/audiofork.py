"""FreeSWITCH mod_audio_fork (WebSocket ``/audiofork``, subprotocol ``audio.drachtio.org``):
the protocol as a state machine without I/O.

FreeSWITCH connects on ``uuid_audio_fork <uuid> start <ws-url> <mix-type> <sampling-rate>
<metadata>``. It sends one text frame first, the metadata (arbitrary text; usually JSON),
then binary frames of L16 audio: signed 16-bit little-endian PCM at 8 or 16 kHz, with
``mono`` (the caller), ``mixed`` (both parties in one channel) or ``stereo`` (two
interleaved channels: channel 0 is the caller, what FreeSWITCH reads from the channel;
channel 1 the callee, what it writes to it). Later text frames (``send_text``, ``stop
<metadata>``) are passed on as notes. The server may send JSON text frames back, which
FreeSWITCH raises as ``mod_audio_fork::<type>`` events: results go back as
``{"type": "transcription", "data": ...}`` and an error as ``{"type": "error", "data":
...}`` (``reply``).

The mix type and sampling rate are arguments of the command, not part of the stream: the
server learns them from the URL (``ws://HOST:PORT/audiofork?mix=stereo&rate=16000``) or
from the metadata's ``mixType`` / ``sampleRate`` keys (as jambonz sends them), the
metadata winning. The call's id is the metadata's ``callSid``, ``uuid``, ``callId`` or
``call_id`` (the first present), else the URL's ``call_id``, else one made up
(``AudioForkProtocol(default_id)``).

The call's endpoint rules and ``text_format`` (``call_settings``) may be set in the URL
(``?rule2_min_trailing_silence=0.4&text_format=punct``) and as metadata keys (JSON
numbers and strings), the metadata winning. FreeSWITCH can send text frames mid-call
(``uuid_audio_fork <uuid> send_text <text>``): the text ``Finalize`` (the sherpa protocol's
word) ends each leg's open utterance now (``CallFinalize``); any other text is a note.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..audio.pcm import decode_pcm, deinterleave
from ..errors import AudioInputError, ClientError
from ..validation import unknown_names
from . import jsontext
from .call_events import CallAudio, CallEvent, CallFinalize, CallNote, CallStarted
from .call_settings import CALL_SETTING_KEYS, settings_layer

__all__ = ["AudioForkProtocol", "SUBPROTOCOL", "MIX_LEGS", "RATES", "ID_KEYS", "FINALIZE",
           "reply"]

SUBPROTOCOL = "audio.drachtio.org"
MIX_LEGS = {"mono": ("caller",), "mixed": ("mixed",), "stereo": ("caller", "callee")}
RATES = {"8k": 8000, "16k": 16000, "8000": 8000, "16000": 16000}
ID_KEYS = ("callSid", "uuid", "callId", "call_id")
FINALIZE = "Finalize"  # a text frame: each leg's open utterance ends now
_URL_KEYS = ("mix", "rate", "call_id", "token") + CALL_SETTING_KEYS


def _mix(value: Any, where: str) -> str:
    if not isinstance(value, str) or value not in MIX_LEGS:
        raise ClientError("bad_config", f"{where}: mix type must be one of "
                                        f"{', '.join(MIX_LEGS)}, got {value!r}")
    return value


def _rate(value: Any, where: str) -> int:
    if str(value) not in RATES:
        raise ClientError("bad_config", f"{where}: sampling rate must be 8k or 16k "
                                        f"(8000 or 16000), got {value!r}")
    return RATES[str(value)]


def reply(kind: str, data: Any) -> str:
    """A text frame FreeSWITCH raises as the event ``mod_audio_fork::<kind>``."""
    return json.dumps({"type": kind, "data": data}, ensure_ascii=False)


class AudioForkProtocol:
    """Feed ``receive(text_or_bytes)``; get the call's events.

    ``query``: the URL's ``mix``, ``rate``, ``call_id`` (validated here: ClientError
    ``bad_config``) and settings (``url_settings``, checked by ``call_settings``);
    ``default_id``: the call's id when neither says one."""

    def __init__(self, query: Mapping[str, str], default_id: str) -> None:
        message = unknown_names(query, _URL_KEYS, "URL parameter")
        if message:
            raise ClientError("bad_config", message)
        self.url_settings = settings_layer("URL", query, text=True)
        self.mix = _mix(query.get("mix", "mono"), "mix")
        self.rate = _rate(query.get("rate", "8k"), "rate")
        self.call_id: str | None = None
        self._default_id = query.get("call_id") or default_id

    @property
    def started(self) -> bool:
        return self.call_id is not None

    @property
    def channels(self) -> int:
        return len(MIX_LEGS[self.mix])

    def receive(self, message: str | bytes) -> list[CallEvent]:
        if isinstance(message, str):
            if not self.started:
                return [self._start(message)]
            if message == FINALIZE:
                return [CallFinalize()]
            return [CallNote("text", _parse(message))]
        if not self.started:
            raise ClientError("bad_message", "audio before the metadata text frame")
        try:
            samples = decode_pcm(message, "s16le", self.channels)
        except AudioInputError as e:
            raise ClientError("bad_audio", str(e)) from None
        return [CallAudio(leg, self.rate, channel)
                for leg, channel in enumerate(deinterleave(samples, self.channels))]

    def _start(self, text: str) -> CallStarted:
        metadata = _parse(text)
        call_id = self._default_id
        if isinstance(metadata, dict):
            if "mixType" in metadata:
                self.mix = _mix(metadata["mixType"], "metadata mixType")
            if "sampleRate" in metadata:
                self.rate = _rate(metadata["sampleRate"], "metadata sampleRate")
            call_id = next((str(metadata[k]) for k in ID_KEYS
                            if isinstance(metadata.get(k), (str, int)) and metadata[k] != ""),
                           call_id)
        self.call_id = call_id
        layers = (self.url_settings, settings_layer("metadata", metadata, text=False))
        return CallStarted(call_id, MIX_LEGS[self.mix],
                           {"mix": self.mix, "sample_rate": self.rate, "metadata": metadata},
                           tuple(layer for layer in layers if layer is not None))


def _parse(text: str) -> Any:
    """JSON when the text is JSON, else the text itself (metadata is arbitrary text)."""
    try:
        return jsontext.loads(text)
    except ValueError:
        return text
