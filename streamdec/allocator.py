"""The C allocator's settings for a process that decodes audio for a long time (glibc).

numpy's temporaries of a feature block (the fbank of a few chunks: 0.1-1 MB each) and of
a decode batch come from ``malloc``. glibc's defaults give memory back to the system as
soon as more than ``M_TRIM_THRESHOLD`` lies free at the top of the heap (128 KiB at
first, then twice the largest block mapped so far), so a loop that allocates and frees
the same blocks many times a second maps them afresh every time and pays a page fault per
4 KiB touched (the fbank of 128 frames alone took twice as long as with the memory kept,
on one VM), and the process's memory goes up and down with the load's largest blocks: in
a 10-minute soak at 100 streams its RSS grew 7.85 % after the first minute, in steps, and
1.37 % with these settings, for the same CPU (bench/results/2026-12-02-allocator/README.md).
Each thread that calls ``malloc`` may also get an arena of its own (up to 8 per core),
which is memory held per decode thread.

``configure()`` sets, through ``mallopt``, once per process:

=====================  ===========  ======================================================
parameter              value        why
=====================  ===========  ======================================================
``M_MMAP_THRESHOLD``   4 MiB        blocks below it come from the heap (and are reused)
``M_TRIM_THRESHOLD``   8 MiB        free memory at the top of a heap is kept up to this...
``M_TOP_PAD``          4 MiB        ...and a trim keeps this much of it
``M_ARENA_MAX``        2            the loop thread and the decode threads share 2 arenas
=====================  ===========  ======================================================

The process's memory then rises to the working set of its load and stays there instead of
going up and down with every block; the top of a heap that a rare peak left free (a burst
of load: 6 MB once in a 10-minute soak at 200 streams) goes back to the system instead of
being kept for good (the threshold was 64 MiB before 2026-12-04:
bench/results/2026-12-04-memory-growth).

``trim()`` hands back to the system, once, the free memory inside the heaps (not only at
their top): what loading a model (its graph parsed and rewritten by ``onnx``) and the
warm-up's batches (``Engine.warm_up``: states and features of ``workers`` x ``max_batch``
streams, freed between thousands of small blocks still in use) left free. The server calls
it once warmed up, before any client: with k2-fsa's 3.3 M zipformer2 (run one stream at a
time) the warmed-up process held 266 MB, 98 MB of them free (once the loop has dropped the
warm-up's results) in holes that the automatic trim (the top of a heap only) never
reaches; 169 MB after it (bench/results/2026-12-07-real-model/idle-memory.json). Load
brings the working set back.

A parameter whose glibc environment variable is set (``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_``, ``MALLOC_ARENA_MAX``), or any when
``GLIBC_TUNABLES`` names ``glibc.malloc``, is left as the user set it;
``STREAMDEC_MALLOC=default`` leaves all of them (and ``trim()`` does nothing). Elsewhere (musl,
macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Mapping

__all__ = ["configure", "trim", "rss_mb", "wanted", "SETTINGS"]

# glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

#: (name, mallopt parameter, value, the environment variable that overrides it)
SETTINGS = (
    ("mmap_threshold", _M_MMAP_THRESHOLD, 4 << 20, "MALLOC_MMAP_THRESHOLD_"),
    ("trim_threshold", _M_TRIM_THRESHOLD, 8 << 20, "MALLOC_TRIM_THRESHOLD_"),
    ("top_pad", _M_TOP_PAD, 4 << 20, "MALLOC_TOP_PAD_"),
    ("arena_max", _M_ARENA_MAX, 2, "MALLOC_ARENA_MAX"),
)

_applied: dict[str, int] | None = None


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # glibc only (musl has no mallopt parameters like these)
        return libc
    except (OSError, AttributeError):
        return None


def wanted(environ: Mapping[str, str]) -> list[tuple[str, int, int]]:
    """The ``(name, mallopt parameter, value)`` of ``SETTINGS`` that ``environ`` leaves to
    us (none with ``STREAMDEC_MALLOC=default`` or a ``glibc.malloc`` tunable)."""
    if environ.get("STREAMDEC_MALLOC", "") == "default" or \
            "glibc.malloc" in environ.get("GLIBC_TUNABLES", ""):
        return []
    return [(name, param, value) for name, param, value, variable in SETTINGS
            if variable not in environ]


def configure() -> dict[str, int]:
    """Apply what ``wanted`` leaves of this process's environment (once per process; later
    calls return the first outcome): the parameters set, by name ({} where not glibc)."""
    global _applied
    if _applied is None:
        libc = _libc()
        _applied = {}
        for name, param, value in [] if libc is None else wanted(os.environ):
            if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) == 1:
                _applied[name] = value
    return _applied


def rss_mb() -> float | None:
    """This process's resident memory in MB (``/proc/self/status``; None elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def trim() -> bool:
    """``malloc_trim(0)``: give the heaps' free pages back to the system (glibc; nothing
    elsewhere or with ``STREAMDEC_MALLOC=default``). True when memory was handed back.
    Costs a walk over the heaps (a few ms): call it after a one-off burst (the model's
    load, the warm-up), never per decode."""
    if os.environ.get("STREAMDEC_MALLOC", "") == "default":
        return False
    libc = _libc()
    return libc is not None and libc.malloc_trim(ctypes.c_size_t(0)) == 1
