import pytest

from streamdec import EndpointConfig, ModelConfig, ModelLoadError, Recognizer, RecognizerConfig, load_model
from decode_utils import decode_in_pieces, finals, key
from model_factory import test_audio


def test_torch_backend_gives_the_onnx_tokens(model_dirs):
    d = str(model_dirs["lstm"])
    torch_model = load_model(ModelConfig(model_dir=d, backend="torch"))
    assert torch_model.meta == load_model(ModelConfig(model_dir=d)).meta
    audio = test_audio(5.0, seed=71)
    results = []
    for backend in ("onnx", "torch"):
        rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=d, backend=backend),
                                          endpoint=EndpointConfig(enabled=False)))
        results.append(finals(decode_in_pieces(rec, audio, 4000)))
    assert results[0][0].token_ids
    assert key(results[0]) == key(results[1])
    assert results[0][0].score == pytest.approx(results[1][0].score, abs=1e-3)


def test_not_torchscript(model_dirs, tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    for f in model_dirs["lstm"].iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    (d / "model.pt").write_bytes(b"garbage")
    with pytest.raises(ModelLoadError, match=r"model\.pt: not a loadable TorchScript model"):
        load_model(ModelConfig(model_dir=str(d), backend="torch"))
