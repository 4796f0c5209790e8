"""The peer the benchmarks compare with: sherpa-onnx (``OnlineRecognizer``) on the same model
files, with the same search and ONNX Runtime thread count."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SHERPA_METHODS", "sherpa_recognizer"]

#: streamdec search method -> sherpa-onnx decoding_method
SHERPA_METHODS = {"greedy": "greedy_search", "modified_beam": "modified_beam_search"}


def sherpa_recognizer(model_dir: Path, model_type: str, method: str, beam: int,
                      threads: int = 1, endpoint: bool = False):
    """A sherpa-onnx recognizer; ``method`` is sherpa-onnx's name (``greedy_search``,
    ``modified_beam_search``); ``endpoint``: its default endpoint rules (the same three
    rules as streamdec's defaults)."""
    import sherpa_onnx

    return sherpa_onnx.OnlineRecognizer.from_transducer(
        tokens=str(model_dir / "tokens.txt"), encoder=str(model_dir / "encoder.onnx"),
        decoder=str(model_dir / "decoder.onnx"), joiner=str(model_dir / "joiner.onnx"),
        num_threads=threads, sample_rate=16000, feature_dim=80, decoding_method=method,
        max_active_paths=beam, model_type=model_type, enable_endpoint_detection=endpoint)
