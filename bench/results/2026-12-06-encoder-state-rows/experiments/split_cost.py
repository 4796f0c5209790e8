"""CPU milliseconds of the encoder-state handling around one chunk of K = 16 streams on the
sized models (zero states, int8 encoders' layouts): before (split out per stream, then
concatenated: PerStreamStates), shared rows fed back whole, and shared rows with one
stream left out. Run from the repository root: PYTHONPATH=. python THIS_FILE
"""
import sys, time
sys.path.insert(0, "bench")
import numpy as np
from streamdec.models.onnx_backend import read_encoder_contract, open_session
from streamdec import ModelConfig
from throughput import PerStreamStates
for name in ["sherpa-onnx-streaming-zipformer-en-2023-06-26", "sherpa-onnx-streaming-zipformer-en-20M-2023-02-17"]:
    import glob
    from pathlib import Path; enc = Path(sorted(glob.glob(f"sized-models/{name}/encoder*.int8.onnx"))[0])
    L = read_encoder_contract(open_session(enc, ModelConfig(model_dir="sized-models/"+name)), enc).state_layout
    K = 16
    per = [L.initial() for _ in range(K)]
    batched = L.stack(per)
    old = PerStreamStates(L.specs)
    nbytes = sum(t.nbytes for t in batched)
    def bench(f, n=30):
        best = 1e9
        for _ in range(5):
            t0 = time.process_time()
            for _ in range(n): f()
            best = min(best, (time.process_time() - t0) / n)
        return best * 1e3
    def before():
        rows = old.share(batched, K); old.stack(rows)
    def after():
        rows = L.share(batched, K); L.stack(rows)
    rows = L.share(batched, K)
    def after_changed():  # one stream left: the fallback from rows
        r = L.share(batched, K); L.stack(r[:-1])
    print(name, len(L.specs), "tensors", nbytes / K / 1024, "KiB/stream",
          f"before {bench(before):.2f} ms, shared {bench(after):.3f} ms, one left {bench(after_changed):.2f} ms per batch of {K}")
