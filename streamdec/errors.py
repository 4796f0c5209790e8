"""Typed errors of streamdec.

    StreamdecError
    ├── ConfigError            a config value is invalid (raised once, at validation)
    │   └── OptionError        a connection option of the server (HTTP 400 at the handshake)
    ├── ModelLoadError         a model directory or file is missing, not ONNX, or lacks metadata
    ├── ModelDownloadError     ``streamdec models get`` failed: network, size, checksum, archive
    ├── AudioInputError        wrong dtype/shape, NaN/inf or beyond [-1, 1], rate changes mid-stream
    ├── AudioFileError         an audio file is missing, unreadable, empty or damaged partway
    ├── MicrophoneError        no usable input device (PortAudio missing, busy, lost)
    ├── StreamStateError       a call that the stream's state does not allow (audio after end)
    ├── TokenizeError          a phrase cannot be written with the model's units
    ├── DecodeError            decoding a stream failed (the model raised): that stream ends
    ├── ClientError            what a server's client did wrong (or what failed for it): a
    │                          kind with its WebSocket close code (``CLOSE_CODES``)
    ├── EventRefused           a client's event refused in-band (OpenAI Realtime: an ``error``
    │                          event with a code and param; the session goes on)
    ├── UploadError            a file sent for transcription cannot be transcribed (HTTP 400)
    ├── StoreError             the transcript store cannot be opened, read or written
    ├── BatchRewriteRefused    a graph cannot be proven to batch exactly, or its quantization
    │                          made per stream (the network then runs one stream at a time:
    │                          ``models.dynamic_batch``)
    └── Disconnected           a server's client went away (or its socket broke)

Library code raises these; it never calls ``exit()`` and never returns an exception.
"""

#: ClientError kinds and their WebSocket close codes (``streamdec.server.connection`` says
#: when each is sent)
CLOSE_CODES = {
    "bad_audio": 1007, "bad_json": 1007, "bad_message": 1003, "bad_config": 1008,
    "unsupported": 1003, "too_big": 1009, "too_long": 1008, "idle_timeout": 1008,
    "decode_failed": 1011, "replica_lost": 1012,
}
# kinds whose client first gets the results of the audio it sent
_AFTER_RESULTS = ("too_long", "idle_timeout")


class StreamdecError(Exception):
    """Base of every error streamdec raises on purpose."""


class ConfigError(StreamdecError, ValueError):
    """A configuration value is invalid."""


class ModelLoadError(StreamdecError):
    """A model file is missing, unreadable, not a model, or lacks required metadata."""


class ModelDownloadError(StreamdecError):
    """Fetching or installing a model failed (HTTP error, short transfer, wrong size or
    checksum, unreadable or unsafe archive, missing files): nothing was installed."""


class AudioInputError(StreamdecError, ValueError):
    """Audio handed to a stream cannot be used (dtype, shape, NaN/inf, range, rate change)."""


class StreamStateError(StreamdecError):
    """The stream is in a state that does not allow the call (e.g. audio after input_finished)."""


class TokenizeError(StreamdecError, ValueError):
    """Text cannot be expressed with the model's units."""


class DecodeError(StreamdecError):
    """Decoding one stream failed; the stream has ended (``Stream.error``), others go on."""


class OptionError(ConfigError):
    """A connection option is invalid (HTTP 400 at the handshake)."""


class AudioFileError(StreamdecError):
    """An audio input is missing, unreadable, holds no samples or is damaged partway."""


class MicrophoneError(StreamdecError):
    """No usable input device: PortAudio missing, no or unknown device, device busy or lost."""


class ClientError(StreamdecError):
    """What a client did wrong (or what failed for it): a kind with its close code."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        if kind not in CLOSE_CODES:
            raise ValueError(f"unknown client error kind {kind!r}")
        self.kind = kind

    @property
    def code(self) -> int:
        return CLOSE_CODES[self.kind]

    @property
    def after_results(self) -> bool:
        """The client gets the results of the audio it sent before the error."""
        return self.kind in _AFTER_RESULTS


class EventRefused(StreamdecError):
    """A client's event refused in-band: the protocol answers with an error event naming
    ``code`` (and the ``param`` at fault) and the session goes on."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.param = code, param


class UploadError(StreamdecError, ValueError):
    """The request cannot be transcribed (HTTP 400 with this message)."""


class StoreError(StreamdecError):
    """The transcript store cannot be opened, read or written (``streamdec.records``)."""


class BatchRewriteRefused(StreamdecError):
    """A fixed-batch graph cannot be proven to batch exactly, or a dynamic-batch graph's
    quantization made per stream (``streamdec.models.dynamic_batch``); the message names the
    node and why. Caught at load: the network runs one stream at a time."""


class Disconnected(StreamdecError):
    """The client went away (or the socket broke)."""
