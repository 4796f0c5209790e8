"""Scratch: streamdec's greedy decode at K = 16 (60 s of the espeak dev set) with the
encoder session as streamdec makes it (arena, patterns off) and with memory patterns on,
alternated 4 times; audio seconds per CPU second."""
import sys, time
from pathlib import Path
REPO = Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(REPO)); sys.path.insert(0, str(REPO / "bench"))
import numpy as np, onnxruntime as ort
from abtest import alternate, workload
from batch_decode import decode_streamdec
from streamdec import EndpointConfig, Recognizer, RecognizerConfig
from streamdec.models import ModelConfig
from streamdec.search import SearchConfig
d, int8 = sys.argv[1], sys.argv[2] == "int8"
utts = workload("espeak", 60)
audio = sum(u.seconds for u in utts)
def rec():
    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=d, int8=int8), endpoint=EndpointConfig(enabled=False)))
a, b = rec(), rec()
o = b.model.encoder.get_session_options(); o.enable_mem_pattern = True
b.model.encoder = ort.InferenceSession(str(b.model.files.encoder), sess_options=o, providers=["CPUExecutionProvider"])
s = SearchConfig(method="greedy")
runs = alternate(4, lambda: decode_streamdec(a, utts, 16, s), lambda: decode_streamdec(b, utts, 16, s))
ca = [audio / r.cpu_seconds for r in runs[0]]; cb = [audio / r.cpu_seconds for r in runs[1]]
print("arena", np.round(ca, 2), "arena+patterns", np.round(cb, 2), "ratio of medians", round(np.median(cb) / np.median(ca), 3), "same", runs[0][0].transcripts == runs[1][0].transcripts)
