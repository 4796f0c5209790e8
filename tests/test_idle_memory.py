"""The idle daemon's memory: ``allocator.trim`` hands the heaps' free memory back, and the
server, once warmed up on k2-fsa's 3.3 M zipformer2 (read from ``../shared/models/``), holds
no more than the bound below before any client (bench/decode/idle_memory.py says where it
goes). The allocator's effects are checked in fresh processes (per-process settings)."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from server_utils import REPO, UNIT, ServerProcess, run, sherpa_client
from shared_data import REAL_MODEL

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

MODEL = REAL_MODEL
#: the idle server's RSS on this model (2026-12-07): 273-276 MB without the trim, 173-178 MB
#: with it (196-208 MB when the trim ran before the loop dropped the warm-up's results);
#: 240-246 MB with the encoder's batched graph (its session, 18 MB, and the arena its decode
#: threads keep at batches of 8), 158-159 MB since the arenas are handed back after the
#: warm-up (bench/results/2026-12-07-real-model/)
IDLE_BOUND_MB = 175
#: idle again after eight clients: 169-179 MB once the arenas and heaps are handed back,
#: from 205-211 MB before (what the clients' decodes left)
AFTER_LOAD_BOUND_MB = 195

# In a fresh process with the daemon's settings: 128 blocks of 1 MiB (below the 4 MiB mmap
# threshold: from the heap), then every other one freed: 64 holes of 1 MiB between blocks
# in use, which no automatic trim reaches (it only gives back the heap's top), as the
# warm-up's batches leave the heap.
_PROBE = r"""
import ctypes, json
from streamdec import allocator
allocator.configure()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
blocks = [libc.malloc(1 << 20) for _ in range(128)]
for b in blocks:
    ctypes.memset(b, 1, 1 << 20)
for b in blocks[1::2]:
    libc.free(b)
freed = rss()
trimmed = allocator.trim()
print(json.dumps({"trimmed": trimmed, "handed_back_kb": freed - rss()}))
"""


def _probe(**env) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=environ, check=True,
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)


def test_trim_hands_back_free_memory_below_the_heaps_top():
    got = _probe()
    assert got["trimmed"] is True
    assert got["handed_back_kb"] >= 60 * 1024  # of the 64 MiB freed (the holes' edges stay)


def test_trim_does_nothing_with_streamdec_malloc_default():
    got = _probe(STREAMDEC_MALLOC="default")
    assert got == {"trimmed": False, "handed_back_kb": got["handed_back_kb"]}
    assert got["handed_back_kb"] < 4 * 1024


def test_idle_server_on_the_real_model_stays_under_its_bound():
    if not (MODEL / "tokens.txt").is_file():
        pytest.fail(f"{MODEL}: the real model's folder is missing (k2-fsa's "
                    "sherpa-onnx-kws-zipformer-gigaspeech-3.3M-2024-01-01-mobile files)")
    server = ServerProcess("--model", str(MODEL))
    try:
        assert any('"event": "warmed_up"' in line for line in server.log)
        with open(f"/proc/{server.proc.pid}/status") as f:
            rss_mb = next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))
        assert rss_mb < IDLE_BOUND_MB, f"idle RSS {rss_mb:.1f} MB"
    finally:
        server.stop()


def test_the_server_hands_back_its_decode_memory_once_idle_after_load():
    """Eight clients at once (the encoder's batched graph at its largest calls), then none:
    after ``IDLE_RELEASE_SECONDS`` the server logs ``memory_released`` with what it gave
    back, and its resident memory is back near the idle bound."""
    from streamdec.server.context import IDLE_RELEASE_SECONDS

    if not (MODEL / "tokens.txt").is_file():
        pytest.fail(f"{MODEL}: the real model's folder is missing")
    audio, rate = sf.read(str(REPO / "examples" / "hello.wav"), dtype="float32")
    audio = np.concatenate([audio] * 3)
    assert rate == 16000
    server = ServerProcess("--model", str(MODEL))
    try:
        async def clients():
            import asyncio
            return await asyncio.gather(*(sherpa_client(server.url(), audio, 3200)
                                          for _ in range(8)))

        outs = run(clients())
        assert all(o["done"] and o["close"] == 1000 for o in outs), outs
        deadline = time.monotonic() + (IDLE_RELEASE_SECONDS + 10) * UNIT
        while time.monotonic() < deadline and not _released(server):
            time.sleep(0.25)
        (event,) = _released(server)
        with open(f"/proc/{server.proc.pid}/status") as f:
            rss_mb = next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))
        assert rss_mb < AFTER_LOAD_BOUND_MB and event["rss_mb"] < AFTER_LOAD_BOUND_MB, \
            (rss_mb, event)
        assert event["rss_mb_before"] - event["rss_mb"] > 20, event  # the release gave back
    finally:
        server.stop()


def _released(server) -> list[dict]:
    return [json.loads(line[line.index("{"):]) for line in list(server.log)
            if '"event": "memory_released"' in line]
