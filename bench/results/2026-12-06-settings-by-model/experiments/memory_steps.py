"""RSS of a daemon-like process at each step: imports, model load, warm-up (2026-12-06).

python bench/results/2026-12-06-settings-by-model/experiments/memory_steps.py MODEL_DIR  (its int8 files)
"""
import asyncio
import json
import os
import sys


def rss():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024


out = {"start": rss()}
import numpy  # noqa: E402,F401
import onnxruntime  # noqa: E402,F401

out["numpy+onnxruntime"] = rss()
import streamdec.server.app  # noqa: E402,F401
from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.engine import Engine  # noqa: E402

out["streamdec+server imports"] = rss()
rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=sys.argv[1], int8=True,
                                                  num_threads=1)))
out["model loaded"] = rss()


async def main():
    e = Engine(rec)
    async with e:
        await e.warm_up()
        out["warmed up (%d x %d)" % (e.workers, e.max_batch)] = rss()


asyncio.run(main())
print(json.dumps({k: round(v, 1) for k, v in out.items()}))
