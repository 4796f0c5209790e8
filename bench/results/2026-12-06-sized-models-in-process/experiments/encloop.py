"""Scratch: the encoder alone, batch K, chunk after chunk with its own states fed back,
through ONNX Runtime sessions made with different options; variants alternated in process.

variant spec: name:key=val;key=val  keys: arena(0/1) pattern(0/1) spin(0/1) strategy(same/pow)
  dbb(int) shrink(0/1: run option memory.enable_memory_arena_shrinkage=cpu:0 each run)
  opt(all/ext/basic) prepack(0/1: session.disable_prepacking=1 when 0)
"""
from pathlib import Path
import argparse, json, os, resource, sys, time
import numpy as np
import onnxruntime as ort

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--k", type=int, default=16)
ap.add_argument("--chunks", type=int, default=20)
ap.add_argument("--warm", type=int, default=3)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--variants", default="base:arena=0")
ap.add_argument("--malloc", default="default", help="default or streamdec")
args = ap.parse_args()

if args.malloc == "streamdec":
    sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
    from streamdec import allocator
    allocator.configure()


def parse(spec):
    name, _, rest = spec.partition(":")
    kv = dict(p.split("=") for p in rest.split(";") if p)
    return name, kv


_env_alloc = None


def session(kv):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                  "ext": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                  "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}[kv.get("opt", "all")]
    o.log_severity_level = 3
    o.enable_cpu_mem_arena = kv.get("arena", "0") == "1"
    o.enable_mem_pattern = kv.get("pattern", "1") == "1"
    if "spin" in kv:
        o.add_session_config_entry("session.intra_op.allow_spinning", kv["spin"])
    if "dbb" in kv:
        o.add_session_config_entry("session.dynamic_block_base", kv["dbb"])
    if kv.get("prepack", "1") == "0":
        o.add_session_config_entry("session.disable_prepacking", "1")
    providers = ["CPUExecutionProvider"]
    if kv.get("strategy") in ("same", "pow"):
        global _env_alloc
        if not _env_alloc:
            mi = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                   ort.OrtMemType.DEFAULT)
            cfg = ort.OrtArenaCfg(0, 1 if kv["strategy"] == "same" else 0, -1, -1)
            ort.create_and_register_allocator(mi, cfg)
            _env_alloc = kv["strategy"]
        assert _env_alloc == kv["strategy"]
        o.add_session_config_entry("session.use_env_allocators", "1")
    return ort.InferenceSession(args.model, sess_options=o, providers=providers)


variants = [parse(v) for v in args.variants.split(",")]
sessions = [(n, kv, session(kv)) for n, kv in variants]
s0 = sessions[0][2]
inputs = s0.get_inputs()
rng = np.random.default_rng(0)

def zero(inp):
    shape = [args.k if not isinstance(d, int) else d for d in inp.shape]
    dt = {"tensor(float)": np.float32, "tensor(int64)": np.int64}[inp.type]
    return np.zeros(shape, dtype=dt)

x_shape = [args.k if not isinstance(d, int) else d for d in inputs[0].shape]
feats = [rng.standard_normal(x_shape).astype(np.float32) for _ in range(args.warm + args.chunks)]
init = [zero(i) for i in inputs[1:]]
names = [i.name for i in inputs]


def loop(sess, kv):
    ro = None
    if kv.get("shrink") == "1":
        ro = ort.RunOptions()
        ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    states = init
    times = []
    c0 = time.process_time(); w0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
    for i, f in enumerate(feats):
        if i == args.warm:
            c0 = time.process_time(); w0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
        out = sess.run(None, dict(zip(names, [f, *states])), ro)
        states = out[1:]
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    loop.extra = (r1.ru_minflt - r0.ru_minflt, r1.ru_stime - r0.ru_stime)
    return time.perf_counter() - w0, time.process_time() - c0, float(np.sum(out[0]))


def rss(key="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024


rss_loaded = rss()
res = {n: {"wall": [], "cpu": [], "sum": None} for n, _, _ in sessions}
for r in range(args.runs):
    order = sessions if r % 2 == 0 else sessions[::-1]
    for n, kv, s in order:
        w, c, sm = loop(s, kv)
        res[n]["wall"].append(w); res[n]["cpu"].append(c); res[n]["sum"] = sm; res[n]["faults"] = loop.extra[0]; res[n]["sys"] = loop.extra[1]
base = sessions[0][0]
out = {"ort": ort.__version__, "k": args.k, "chunks": args.chunks, "model": args.model,
       "rss": rss(), "rss_loaded": rss_loaded, "hwm": rss("VmHWM"), "variants": {}}
for n, kv, _ in sessions:
    d = res[n]
    out["variants"][n] = {"spec": kv, "wall_med": float(np.median(d["wall"])),
                          "cpu_med": float(np.median(d["cpu"])), "cpu": d["cpu"],
                          "cpu_ratio_to_base": float(np.median(np.array(res[base]["cpu"]) / np.array(d["cpu"]))),
                          "sum": d["sum"], "faults_last": d["faults"], "sys_last": d["sys"]}
print(json.dumps(out))
