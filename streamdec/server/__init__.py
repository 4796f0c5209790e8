"""The daemon behind ``streamdec serve``: an ASGI app (Starlette) over the engine.

==================  ==============================================================
module              what
==================  ==============================================================
``config``          ``ServerConfig``: the ``[server]`` table (listeners, limits, TLS)
``context``         ``ServerContext``: what both listeners share (engine, limits, drain)
``options``         per-connection query options (rate, encoding, channels, search)
``access``          bearer-token check and the connection cap (admission)
``connection``      one WebSocket client: its inbox, audio in, errors and close codes
``session``         the commands a protocol session (no I/O) gives the connection
``display``         finals for people: formatted off the loop, ``display`` fields
``sherpa``          the sherpa-onnx protocol: messages (pure) and the session
``vosk``            the Vosk protocol: config, replies (pure) and the session
``twilio``          Twilio Media Streams: the protocol as a state machine (no I/O)
``audiofork``       FreeSWITCH mod_audio_fork: the protocol as a state machine (no I/O)
``audiosocket``     Asterisk AudioSocket: the protocol as a state machine (no I/O)
``call_events``     what those protocols say about a call; a call's messages (pure)
``calls``           calls: the session around those protocols, their routes, AudioSocket
``subscribers``     ``CallHub``: a call's subscribers (``/calls/{id}``) and the webhook
``webhook``         the webhook with the store off: a bounded queue in memory, POSTs with retries
``transcription``   ``POST /v1/audio/transcriptions`` (OpenAI-compatible)
``recording``       what goes into the transcript store: sessions, finals, their end
``transcripts``     stored transcripts over HTTP: by call or stream id, the listing
``deliveries``      the webhook's outbox over HTTP: the listing (dead letters), replay
``redaction``       the server's redaction rules, a connection's or call's on top
``metrics``         Prometheus metrics (also the engine's observer)
``app``             ``create_app``: routes and lifespan
``run``             uvicorn listeners, signals and graceful drain
``workers``         ``serve --workers N``: processes on one port, their supervisor
``share``           ``ServerShare``: what the workers count together (shared memory)
``call_relay``      the workers' call hubs linked (Unix sockets): one server's calls
==================  ==============================================================

Nothing here loads a model at import time: build a ``Recognizer``, then
``ServerContext.create(recognizer, config)`` and ``create_app(context)``; the same app is
what another ASGI host (e.g. Ray Serve's ingress) takes. Importing this package needs only
the core; the app modules need the ``server`` extra (starlette, uvicorn, prometheus-client,
python-multipart).
"""

from .config import ServerConfig

__all__ = ["ServerConfig"]
