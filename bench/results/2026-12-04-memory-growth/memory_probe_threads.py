"""Ad hoc probe (2026-12-04, kept as evidence): three decode threads computing batches at once
in process (``python memory_probe_threads.py ROUNDS``), glibc's heap after every 10th round:
ONNX Runtime's arena (mmapped blocks) grows with concurrent large batches, then stays.
"""
import sys, random, numpy as np, time, ctypes, threading
sys.path.insert(0, "main")
from streamdec import allocator
allocator.configure()
from streamdec.recognizer import Recognizer
class MI2(ctypes.Structure):
    _fields_=[(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = MI2
def mi():
    m = libc.mallinfo2(); M=2**20
    return f"heap {m.arena/M:.1f} mmap {m.hblkhd/M:.1f} ({m.hblks}) inuse {m.uordblks/M:.1f} free {m.fordblks/M:.1f}"
rec = Recognizer()
print("start", mi())
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(3)
for rnd in range(int(sys.argv[1])):
    sizes = [random.randint(1, 32) for _ in range(3)] if rnd % 2 else [32, 32, 32]
    bs = [rec.silent_batch(n) for n in sizes]
    list(pool.map(rec.compute, bs))
    if rnd % 10 == 0: print(rnd, sizes, mi(), flush=True)
print("end", mi())
