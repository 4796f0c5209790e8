"""The recognizer, free of I/O: samples in, events out.

- ``stream``: per-stream state (audio, features, encoder and search states, events);
- ``recognizer``: shared by all streams, the one batched decode (gather, compute, commit);
- ``endpoint``: the endpoint rules, pure functions of counts;
- ``segments``: segment and endpoint bookkeeping after each chunk, a pure function;
- ``results``: the frozen results (the one place frame indices become seconds);
- ``resources``: the store of per-configuration search resources;
- ``drive``: the one synchronous loop (accept, decode while ready, pop events).

Nothing here imports the engine, the server or the command line.
"""
