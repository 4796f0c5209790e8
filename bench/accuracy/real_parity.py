"""Parity on real speech: streamdec against sherpa-onnx (``OnlineRecognizer``) on the same
model files and the real dev set's 16 kHz recordings (bench/accuracy/realvoice.py: the
pocketsphinx test data; the alsa-utils phrases are 48 kHz and each side would resample them
its own way, so they are left out), greedy and modified beam (4 paths), endpoints off.

For a model whose files need the lost-padding repair (k2-fsa's ``-mobile`` zipformer2
exports), streamdec loads the directory as published and sherpa-onnx gets the copy that
``streamdec models repair`` writes (made here in a temporary folder).

Reported per method: files whose tokens are identical (and their tokens), the tokens of
those that differ in timestamp and by how much at most, and each side's WER (the recipe's
normalisation).

    python bench/accuracy/real_parity.py --model-dir DIR --out parity.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.accuracy.realvoice import real_dev_set  # noqa: E402
from bench.common.devset import error_rates  # noqa: E402
from bench.common.peer import SHERPA_METHODS, sherpa_recognizer  # noqa: E402
from streamdec import EndpointConfig, ModelConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.core.drive import decode_audio  # noqa: E402
from streamdec.models.files import find_model_files  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402


def sherpa_tokens(rec, audio: np.ndarray, tail: int) -> tuple[list[str], list[float]]:
    s = rec.create_stream()
    s.accept_waveform(16000, np.concatenate([audio, np.zeros(tail, np.float32)]))
    s.input_finished()
    while rec.is_ready(s):
        rec.decode_stream(s)
    r = rec.get_result_all(s)
    return [t.replace(" ", "\u2581") for t in r.tokens], list(r.timestamps)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True, help="the model folder, as published")
    p.add_argument("--out", type=Path, required=True, help="JSON report")
    args = p.parse_args()
    utts = [u for u in real_dev_set() if u.rate == 16000]
    ours = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=args.model_dir),
                                       endpoint=EndpointConfig(enabled=False)))
    with tempfile.TemporaryDirectory() as tmp:
        fixed = Path(tmp) / "fixed"
        subprocess.run([sys.executable, "-m", "streamdec", "models", "repair",
                        args.model_dir, str(fixed)], check=True)
        files = find_model_files(ModelConfig(model_dir=str(fixed)))
        report = {"model_dir": args.model_dir, "files": len(utts),
                  "audio_seconds": round(sum(u.seconds for u in utts), 2), "methods": {}}
        for method, search in (("greedy", SearchConfig()),
                               ("modified_beam", SearchConfig(method="modified_beam", beam=4))):
            theirs_rec = sherpa_recognizer(files, ours.meta.model_type, SHERPA_METHODS[method], 4)
            same, moved, total, worst, hyps_ours, hyps_theirs = 0, 0, 0, 0.0, {}, {}
            for u in utts:
                got = [e for e in decode_audio(ours, ours.create_stream(search=search), 16000,
                                               [u.samples]) if e.is_final]
                tokens = [t for e in got for t in e.tokens]
                times = [e.start_time + t for e in got for t in e.timestamps]
                their_tokens, their_times = sherpa_tokens(theirs_rec, u.samples,
                                                          ours.meta.chunk_frames * 160)
                hyps_ours[u.utt] = " ".join(e.text for e in got if e.text)
                hyps_theirs[u.utt] = "".join(their_tokens).replace("\u2581", " ").strip()
                if tokens == their_tokens:
                    same += 1
                    total += len(tokens)
                    apart = np.abs(np.subtract(times, their_times))
                    moved += int((apart > 0.006).sum())
                    worst = max(worst, float(apart.max()) if len(apart) else 0.0)
            refs = {u.utt: u.text for u in utts}
            report["methods"][method] = {
                "identical_tokens": same, "tokens": total, "tokens_moved": moved,
                "max_time_apart_s": round(worst, 3),
                "wer_streamdec": round(error_rates(refs, hyps_ours)["wer"], 4),
                "wer_sherpa_onnx": round(error_rates(refs, hyps_theirs)["wer"], 4)}
            print(method, report["methods"][method], file=sys.stderr)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
