"""Scratch: RSS of an encoder session under random batch sizes 1..KMAX after a warm-up at KMAX."""
from pathlib import Path
import json, sys, time, numpy as np, onnxruntime as ort
model, variant, kmax, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
from streamdec import allocator
allocator.configure()
o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1; o.log_severity_level = 3
o.enable_cpu_mem_arena = variant.startswith("pow")
o.enable_mem_pattern = not variant.endswith("nopat")
if variant.startswith("same"):
    mi = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(mi, ort.OrtArenaCfg(0, 1, -1, -1))
    o.add_session_config_entry("session.use_env_allocators", "1")
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
ins = s.get_inputs(); names = [i.name for i in ins]
def rss(key="VmRSS"):
    for line in open("/proc/self/status"):
        if line.startswith(key): return int(line.split()[1]) >> 10
def feeds(k, rng):
    out = []
    for i in ins:
        shape = [k if not isinstance(d, int) else d for d in i.shape]
        out.append(rng.standard_normal(shape).astype(np.float32) if i.type == "tensor(float)" else np.zeros(shape, np.int64))
    return dict(zip(names, out))
rng = np.random.default_rng(1)
loaded = rss()
s.run(None, feeds(kmax, rng))
warm = rss()
series = []
t0 = time.process_time()
for c in range(calls):
    k = int(rng.integers(1, kmax + 1))
    s.run(None, feeds(k, rng)); series.append(rss())
    if c in (calls // 4, calls // 2): print("  at", c, rss(), file=sys.stderr)
print(json.dumps({"variant": variant, "kmax": kmax, "loaded": loaded, "after_warmup": warm,
                  "end": series[-1], "max": max(series), "hwm": rss("VmHWM"), "cpu": time.process_time() - t0}))
