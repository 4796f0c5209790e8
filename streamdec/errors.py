"""Typed errors of streamdec.

::

    StreamdecError
    ├── ConfigError            a config value is invalid (raised once, at validation)
    ├── ModelLoadError         a model directory or file is missing, not ONNX, or lacks metadata
    ├── ModelDownloadError     ``streamdec models get`` failed: network, size, checksum, archive
    ├── AudioInputError        wrong dtype/shape, NaN/inf or beyond [-1, 1], rate changes mid-stream
    ├── StreamStateError       a call that the stream's state does not allow (audio after end)
    ├── TokenizeError          a phrase cannot be written with the model's units
    └── DecodeError            decoding a stream failed (the model raised): that stream ends

Library code raises these; it never calls ``exit()`` and never returns an exception.
"""


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
