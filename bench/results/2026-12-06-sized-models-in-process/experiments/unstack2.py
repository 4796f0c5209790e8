from pathlib import Path
import sys, time, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
from streamdec import RecognizerConfig
from streamdec.models import load_model
from streamdec.models.config import ModelConfig
d = sys.argv[1]; K = int(sys.argv[2])
cfg = RecognizerConfig(model=ModelConfig(model_dir=d, int8=True))
m = load_model(cfg.model, cfg.features)
L = m.state_layout
rng = np.random.default_rng(0)
per = [[rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.kind == 'f' else np.zeros(s.shape, s.dtype) for s in L.specs] for _ in range(K)]
b = L.stack(per)
pres = [(slice(None),) * s.batch_axis for s in L.specs]
def alt(batched, n):
    out = [[] for _ in range(n)]
    for pre, t in zip(pres, batched):
        for i, row in enumerate(out):
            row.append(np.ascontiguousarray(t[pre + (slice(i, i + 1),)]))
    return out
u0 = L.unstack(b, K); u1 = alt(b, K)
assert all(np.array_equal(x, y) and x.shape == y.shape and x.flags.c_contiguous == y.flags.c_contiguous and (x.base is None) == (y.base is None) for r0, r1 in zip(u0, u1) for x, y in zip(r0, r1))
for rep in range(5):
    res = []
    for f in (lambda: L.unstack(b, K), lambda: alt(b, K)):
        t0 = time.process_time()
        for _ in range(10): f()
        res.append(1000 * (time.process_time() - t0) / 10)
    print("unstack cur %.2f  direct slices %.2f ms" % tuple(res))
