"""Ad hoc probe (2026-12-04, kept as evidence, not a tool): ``streamdec serve`` in this process
with a thread that writes, every 5 s, RSS, glibc's heap (mallinfo2: heap size, mmapped,
in use, free) and Python's object and block counts to $PROBE_OUT. PROBE_NOARENA=1 turns
ONNX Runtime's CPU arena off; PROBE_TRIM=S calls malloc_trim(0) every S seconds.

    python memory_probe_server.py serve --port 36001 --max-connections 2000 \
        --model streamdec/assets/synthetic-en --search greedy --num-threads 1 --max-batch 32
    python bench/load.py --url ws://127.0.0.1:36001/ --pid PID --streams 200 --seconds 300 \
        --warmup 30 --spread chunk --out probe.json
"""
import sys, threading, time, ctypes, runpy, os, gc
class MI2(ctypes.Structure):
    _fields_=[(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = MI2
out = open(os.environ.get("PROBE_OUT", "/tmp/probe/mem.log"), "w")
def rss():
    d = {}
    for l in open("/proc/self/status"):
        if l.startswith(("VmRSS", "RssAnon", "RssFile")): d[l.split(":")[0]] = int(l.split()[1]) / 1024
    return d
libc.malloc_trim.argtypes=[ctypes.c_size_t]
TRIM = float(os.environ.get("PROBE_TRIM", "0"))
if os.environ.get("PROBE_NOARENA"):
    import onnxruntime as ort
    class SO(ort.SessionOptions):
        def __init__(self):
            super().__init__(); self.enable_cpu_mem_arena = False
    ort.SessionOptions = SO
def loop():
    t0 = time.time(); last = t0
    while True:
        if TRIM and time.time() - last >= TRIM:
            a = time.perf_counter(); libc.malloc_trim(0); d = time.perf_counter() - a; last = time.time()
            out.write(f"trim {d*1000:.2f} ms\n")
        m = libc.mallinfo2(); M = 2**20
        r = rss()
        out.write(f"{time.time()-t0:.0f} rss {r['VmRSS']:.1f} anon {r['RssAnon']:.1f} heap {m.arena/M:.1f} mmap {m.hblkhd/M:.1f} inuse {m.uordblks/M:.1f} free {m.fordblks/M:.1f} topfree {m.keepcost/M:.1f} objs {len(gc.get_objects())} blocks {sys.getallocatedblocks()}\n")
        out.flush()
        time.sleep(5)
threading.Thread(target=loop, daemon=True).start()
sys.path.insert(0, "main")
sys.argv = ["streamdec"] + sys.argv[1:]
runpy.run_module("streamdec", run_name="__main__", alter_sys=True)
