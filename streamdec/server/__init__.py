"""The daemon behind ``streamdec serve``: an ASGI app (Starlette) over the engine.

==================  ==============================================================
module              what
==================  ==============================================================
``config``          ``ServerConfig``: the ``[server]`` table (listeners, limits, TLS)
``context``         ``ServerContext``: what both listeners share (engine, limits, drain)
``options``         per-connection query options (rate, encoding, channels, search)
``access``          bearer-token check and the connection cap (admission)
``connection``      one WebSocket client: its inbox, audio in, errors and close codes
``sherpa``          the sherpa-onnx protocol: messages (pure) and the session
``vosk``            the Vosk protocol: config, replies (pure) and the session
``transcription``   ``POST /v1/audio/transcriptions`` (OpenAI-compatible)
``metrics``         Prometheus metrics (also the engine's observer)
``app``             ``create_app``: routes and lifespan
``run``             uvicorn listeners, signals and graceful drain
==================  ==============================================================

Nothing here loads a model at import time: build a ``Recognizer``, then
``ServerContext.create(recognizer, config)`` and ``create_app(context)``; the same app is
what another ASGI host (e.g. Ray Serve's ingress) takes. Importing this package needs only
the core; the app modules need the ``server`` extra (starlette, uvicorn, prometheus-client,
python-multipart).
"""

from .config import ServerConfig

__all__ = ["ServerConfig"]
