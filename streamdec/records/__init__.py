"""Records: the transcript store (SQLite embedded, PostgreSQL by URL), below the server
and above the core: every final of every stream and call is written here before it is
sent, and the server reads transcripts back from it.

==============  ==============================================================================
module          what
==============  ==============================================================================
``config``      ``StoreConfig``: the ``[store]`` table
``schema``      the tables and their versioned migrations
``store``       ``Store``: blocking reads and writes over SQLite or PostgreSQL (psycopg 3)
``recorder``    ``Recorder``: the store for the event loop: one thread, group commit, writes
                kept and retried while the database fails
``delivery``    ``Deliverer``: the outbox posted to the webhook, at least once, in order per
                call, leased across processes, retried until a retention, then dead letters
``transcript``  a stored transcript as JSON, text, SRT or WebVTT (pure)
==============  ==============================================================================
"""

from .config import StoreConfig
from .recorder import Recorder
from .store import FinalRecord, Query, SessionRecord, Store

__all__ = ["StoreConfig", "Recorder", "Store", "SessionRecord", "FinalRecord", "Query"]
