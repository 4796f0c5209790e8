"""A process's RSS after loading an int8 model and after decoding one batch of B silent
streams (``Recognizer.silent_batch``, what the engine's warm-up decodes), B growing, with
the daemon's allocator settings: what ONNX Runtime's arena keeps for one batch at a time.

    python bench/results/2026-12-06-sized-models/experiments/batch_memory.py MODEL_DIR 1 8 16 32
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from streamdec import Recognizer, RecognizerConfig, allocator  # noqa: E402
from streamdec.models import ModelConfig  # noqa: E402

allocator.configure()


def rss() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=sys.argv[1], int8=True)))
print("loaded", round(rss()), "MB")
for b in map(int, sys.argv[2:]):
    rec.compute(rec.silent_batch(b))
    print("after a batch of", b, round(rss()), "MB")
