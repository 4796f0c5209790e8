"""streamdec.allocator: glibc's malloc kept from handing memory back and forth (what a
decode loop allocates and frees many times a second) and its arenas capped; the user's
own MALLOC_* settings win. The effects are checked in fresh processes (the settings are
per process, and this one's are set already or not)."""

import json
import os
import subprocess
import sys

import pytest

from streamdec import allocator

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

# In a fresh process: N threads each malloc (and keep) a block, so each may get an arena
# of its own; then 16 blocks of 1 MiB are freed and the RSS before and after is read.
_PROBE = r"""
import ctypes, json, sys, threading
from streamdec import allocator
applied = allocator.configure() if sys.argv[1] == "on" else {}
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
held, start = [], threading.Barrier(8)
def grab():
    start.wait()  # all at once: contention is what makes glibc open another arena
    for _ in range(200):
        held.append(libc.malloc(4096))
threads = [threading.Thread(target=grab) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
blocks = [libc.malloc(1 << 20) for _ in range(16)]
for b in blocks:
    ctypes.memset(b, 1, 1 << 20)
before = rss()
for b in reversed(blocks):
    libc.free(b)
after = rss()
buf = ctypes.c_char_p()
size = ctypes.c_size_t()
libc.open_memstream.restype = ctypes.c_void_p
stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
heaps = buf.value.decode().count("<heap nr=")
print(json.dumps({"applied": applied, "heaps": heaps, "freed_kb": before - after}))
"""


def _probe(mode: str, **env) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env=environ, check=True,
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)


def test_every_setting_is_wanted_in_a_plain_environment():
    assert allocator.wanted({}) == [(name, param, value)
                                    for name, param, value, _ in allocator.SETTINGS]
    assert [name for name, _, _ in allocator.wanted({})] == ["mmap_threshold",
                                                             "trim_threshold", "top_pad",
                                                             "arena_max"]


def test_the_users_own_settings_win():
    names = [n for n, _, _ in allocator.wanted({"MALLOC_ARENA_MAX": "8"})]
    assert names == ["mmap_threshold", "trim_threshold", "top_pad"]
    assert allocator.wanted({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}) == []
    assert allocator.wanted({"STREAMDEC_MALLOC": "default"}) == []


def test_configured_memory_stays_with_the_process_and_threads_share_two_arenas():
    off, on = _probe("off"), _probe("on")
    assert on["applied"] == {"mmap_threshold": 4 << 20, "trim_threshold": 8 << 20,
                             "top_pad": 4 << 20, "arena_max": 2}
    assert off["applied"] == {}
    # glibc's defaults: 1 MiB blocks are mapped and unmapped one by one (16 MiB go back);
    # configured, they come from the heap, and what lies free at its top goes back only
    # past 8 MiB, down to 4 MiB: about 4-8 of the 16 MiB stay (give or take the pages
    # that lay free at the top before the blocks: one fresh-check freed 12 MiB + 4 KiB)
    assert off["freed_kb"] >= 15 * 1024
    assert 8 * 1024 <= on["freed_kb"] <= 13 * 1024
    assert on["heaps"] <= 2 < off["heaps"]


def test_a_users_malloc_variable_is_left_alone():
    probe = _probe("on", MALLOC_ARENA_MAX="4")
    assert probe["applied"] == {"mmap_threshold": 4 << 20, "trim_threshold": 8 << 20,
                                "top_pad": 4 << 20}


def test_the_command_line_configures_its_process():
    code = ("import json; from streamdec import allocator; from streamdec.cli.main import main; "
            "main(['models', 'list']); print(json.dumps(allocator._applied))")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", code], env=environ, check=True,
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "mmap_threshold": 4 << 20, "trim_threshold": 8 << 20, "top_pad": 4 << 20,
        "arena_max": 2}
