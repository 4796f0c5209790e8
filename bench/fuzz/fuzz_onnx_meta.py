"""Fuzz target: what an encoder file declares (``read_encoder_contract``,
``read_context_size``): its metadata and its state inputs, in a real ONNX file that ONNX
Runtime loads. The input is text, one item a line: ``key<TAB>value`` a metadata entry;
``@name<TAB>type<TAB>dims`` an input (``float``/``int64``/``float16``/``int32``/
``double``/``bool``; dims comma-separated, a name for a symbolic one), the first being
the features; ``-`` drops the last output (each input is otherwise passed through to an
output). Invariants: the only error is ModelLoadError; a contract read has a known family,
whole chunking figures and one state spec per state input, each with a batch axis of 1."""

from __future__ import annotations

from harness import fuzz, instrumented, scratch_file

with instrumented():
    from streamdec.errors import ModelLoadError
    from streamdec.models.config import ModelConfig
    from streamdec.models.onnx_backend import (FAMILIES, open_session, read_context_size,
                                               read_encoder_contract)

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

TYPES = {"float": TensorProto.FLOAT, "int64": TensorProto.INT64,
         "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32,
         "double": TensorProto.DOUBLE, "bool": TensorProto.BOOL}
_FILE = scratch_file("encoder.onnx")
_CONFIG = ModelConfig()


def _dim(text: str):
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 10 else (text or "N")


def model_bytes(text: str) -> bytes:
    """The ONNX file the input describes (``ValueError`` when it describes none)."""
    meta, inputs, drop = {}, [], 0
    for line in text.splitlines()[:64]:
        if line == "-":
            drop += 1
        elif line.startswith("@"):
            name, kind, dims = (line[1:].split("\t") + ["", "", ""])[:3]
            if not name.isidentifier() or name in {i[0] for i in inputs}:
                raise ValueError(f"input name {name!r}")
            inputs.append((name, TYPES.get(kind, TensorProto.FLOAT),
                           [_dim(d) for d in dims.split(",")] if dims else []))
        elif "\t" in line:
            key, value = line.split("\t", 1)
            meta[key] = value
    inputs = inputs or [("x", TensorProto.FLOAT, ["N", 45, 80])]
    values = [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs]
    outputs = [helper.make_tensor_value_info(f"{n}_out", t, d) for n, t, d in inputs]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n, _, _ in inputs]
    keep = max(1, len(outputs) - drop)
    graph = helper.make_graph(nodes[:keep], "encoder", values, outputs[:keep])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


def TestOneInput(data: bytes) -> None:
    try:
        _FILE.write_bytes(model_bytes(data.decode("utf-8", "replace")))
    except ValueError:
        return  # not a model the input format can write
    try:
        session = open_session(_FILE, _CONFIG)
        contract = read_encoder_contract(session, _FILE)
        read_context_size(session, _FILE)
    except ModelLoadError:
        return
    assert contract.model_type in FAMILIES
    assert isinstance(contract.chunk_frames, int) and isinstance(contract.chunk_shift, int)
    assert len(contract.state_layout.specs) == len(session.get_inputs()) - 1
    for spec in contract.state_layout.specs:
        assert spec.shape[spec.batch_axis] == 1


if __name__ == "__main__":
    fuzz(TestOneInput)
