"""Scratch: run() against IOBinding for the encoder loop (arena on, patterns off), alternated."""
import json, sys, time, resource
import numpy as np
import onnxruntime as ort

model, K, chunks, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1
o.log_severity_level = 3; o.enable_mem_pattern = False
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
ins = s.get_inputs(); outs = s.get_outputs()
names = [i.name for i in ins]; onames = [x.name for x in outs]
rng = np.random.default_rng(0)
def zero(i):
    shape = [K if not isinstance(d, int) else d for d in i.shape]
    return np.zeros(shape, np.float32 if i.type == "tensor(float)" else np.int64)
feats = [rng.standard_normal([K if not isinstance(d, int) else d for d in ins[0].shape]).astype(np.float32) for _ in range(chunks)]
init = [zero(i) for i in ins[1:]]

def a_run():
    st = init
    for f in feats:
        out = s.run(None, dict(zip(names, [f, *st]))); st = out[1:]
    return float(out[0].sum())

def b_bind_copy():
    st = init
    for f in feats:
        io = s.io_binding()
        for n, v in zip(names, [f, *st]): io.bind_cpu_input(n, v)
        for n in onames: io.bind_output(n, "cpu")
        s.run_with_iobinding(io)
        out = io.copy_outputs_to_cpu(); st = out[1:]
    return float(out[0].sum())

def c_ortvalue():
    st = [ort.OrtValue.ortvalue_from_numpy(x) for x in init]
    for f in feats:
        io = s.io_binding()
        io.bind_cpu_input(names[0], f)
        for n, v in zip(names[1:], st): io.bind_ortvalue_input(n, v)
        for n in onames: io.bind_output(n, "cpu")
        s.run_with_iobinding(io)
        out = io.get_outputs(); st = out[1:]
    return float(out[0].numpy().sum())

fns = {"run": a_run, "bind_copy": b_bind_copy, "ortvalue": c_ortvalue}
res = {k: [] for k in fns}
for k in fns: fns[k]()  # warm
for r in range(runs):
    for k, fn in (fns.items() if r % 2 == 0 else list(fns.items())[::-1]):
        c0 = time.process_time(); sm = fn(); res[k].append(time.process_time() - c0)
base = np.array(res["run"])
for k, v in res.items():
    print(k, "cpu med %.3f" % np.median(v), "ratio to run %.3f" % np.median(base / np.array(v)), "sum", sm)
