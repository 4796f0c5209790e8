from pathlib import Path
import sys, time, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
from streamdec.search.beam_utils import top_k_stable
rng = np.random.default_rng(0)
bad = 0
for trial in range(3000):
    n = int(rng.integers(1, 20)); m = int(rng.integers(1, 60)); k = int(rng.integers(1, 8))
    kind = trial % 5
    if kind == 0: a = rng.standard_normal((n, m))
    elif kind == 1: a = rng.integers(-3, 3, (n, m)).astype(float)      # many ties
    elif kind == 2: a = rng.integers(-2, 2, (n, m)).astype(float); a[a < 0] = -np.inf
    elif kind == 3: a = np.full((n, m), -np.inf); a[:, :1] = 0.0
    else: a = rng.standard_normal((n, m)); a[rng.random((n, m)) < 0.3] = np.nan; a[rng.random((n, m)) < 0.2] = -np.inf
    ref = np.argsort(-a, axis=1, kind="stable")[:, :k].tolist()
    got = top_k_stable(a, k)
    if ref != got:
        bad += 1
        if bad < 3: print("MISMATCH", kind, a, k, ref, got)
print("mismatches", bad)
a = rng.standard_normal((16, 2000)) - 1000
for rep in range(3):
    t0 = time.process_time()
    for _ in range(50): np.argsort(-a, axis=1, kind="stable")[:, :4].tolist()
    t1 = time.process_time()
    for _ in range(50): top_k_stable(a, 4)
    t2 = time.process_time()
    print("argsort %.3f ms  top_k_stable %.3f ms" % ((t1 - t0) * 20, (t2 - t1) * 20))
