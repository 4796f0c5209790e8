"""A zipformer2 export whose downsampling lost its padding step, repaired when it loads.

icefall's zipformer2 ``SimpleDownsample`` (factor ``ds``) pads a sequence of ``L`` frames
whose length is not a multiple of ``ds`` by repeating its last frame
``pad = ceil(L / ds) * ds - L`` times, then reshapes it into ``(L + pad) / ds`` groups of
``ds`` frames and sums each group with learned weights. An export traced with ``L`` fixed by
the chunk size keeps that padding as constants: ``Concat(x, Slice(x, starts=[L - pad]))``
along the time axis, then ``Reshape`` to ``[(L + pad) / ds, ds, ...]``. Some optimised exports
(k2-fsa's ``-mobile`` int8 encoders of the GigaSpeech keyword-spotting zipformer2, among
others) kept the ``Slice``/``Concat`` with ``starts = [L - 1]`` where ``pad`` is 0: each
chunk appends one frame too many and the ``Reshape`` after it fails in every runtime
(``Input shape {17,1,128}, requested {8,2,1,128}``).

``repair_lost_padding`` finds, in a model whose metadata says ``model_type=zipformer2``
(other families are left alone), every ``Concat(x, Slice(x))`` on axis 0 read by a
``Reshape`` (to a constant ``[groups, ds, ...]`` shape) and proves, from the frame count
``L`` that the graph's own shape inference gives for ``x`` and that the model's metadata
declares (``decode_chunk_len / 2``: the encoder embedding halves the feature rate), what the
padding should be:

- the appended frames equal ``pad`` and ``groups * ds == L + pad``: the graph is as intended,
  left as it is;
- ``pad`` is 0, ``groups * ds == L`` and the ``Slice`` appends the last frame (the one
  icefall repeats, ``x[L - 1:]``) once: the lost step; the
  ``Reshape`` reads ``x`` itself (the ``Concat`` and ``Slice`` go), which is exactly the
  computation the model was trained with for this chunk size;
- anything else (a length shape inference cannot fix, a length other than the declared
  chunk's, a ``Slice`` not on the time axis, a ``Reshape`` shape that is not constant or
  fits neither case): ``ModelLoadError``, naming the node and the numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelLoadError

__all__ = ["repair_lost_padding"]

#: the feature frames of a chunk per frame at a zipformer2 stack's input (the embedding's
#: subsampling)
_EMBED_SUBSAMPLING = 2


def _constants(graph) -> dict[str, np.ndarray]:
    """The values of the graph's initializers and ``Constant`` nodes, by name."""
    from onnx import helper, numpy_helper

    out = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 \
                and node.attribute[0].name == "value":
            out[node.output[0]] = numpy_helper.to_array(
                helper.get_attribute_value(node.attribute[0]))
    return out


def _axis(node) -> int | None:
    from onnx import helper

    for a in node.attribute:
        if a.name == "axis":
            return helper.get_attribute_value(a)
    return None


def _static_dim0(model, name: str) -> int | None:
    """Axis 0 of tensor ``name`` as ONNX shape inference fixes it, or None."""
    for info in [*model.graph.value_info, *model.graph.input]:
        if info.name == name:
            dims = info.type.tensor_type.shape.dim
            if dims and dims[0].HasField("dim_value"):
                return int(dims[0].dim_value)
    return None


def _declared_frames(meta: dict[str, str], where: Path) -> int:
    if "decode_chunk_len" not in meta:
        raise ModelLoadError(
            f"{where}: a downsampling pad step (Concat of a tensor and its own Slice, then "
            "Reshape) in a zipformer2 that does not declare decode_chunk_len: cannot prove "
            "its padding")
    try:
        chunk = int(meta["decode_chunk_len"])
    except ValueError:
        raise ModelLoadError(f"{where}: metadata 'decode_chunk_len' is not an integer: "
                             f"{meta['decode_chunk_len']!r}") from None
    if chunk <= 0 or chunk % _EMBED_SUBSAMPLING:
        raise ModelLoadError(f"{where}: metadata decode_chunk_len={chunk} is not a positive "
                             f"multiple of {_EMBED_SUBSAMPLING}")
    return chunk // _EMBED_SUBSAMPLING


def _slice_frames(where: Path, node, consts, length: int) -> int:
    """How many frames ``Slice`` ``node`` keeps of a tensor of ``length`` frames on axis 0;
    ModelLoadError unless its starts/ends/axes/steps are constants on axis 0, step 1."""
    args = list(node.input[1:]) + [""] * (4 - len(node.input[1:]))
    starts, ends, axes, steps = (consts.get(a) if a else None for a in args)
    if starts is None or ends is None or (args[2] and axes is None) \
            or (args[3] and steps is None):
        raise ModelLoadError(f"{where}: Slice {node.name!r} of a downsampling pad step has "
                             "inputs that are not constants: cannot prove its padding")
    axes = np.zeros(1, np.int64) if axes is None else axes.reshape(-1)
    steps = np.ones(1, np.int64) if steps is None else steps.reshape(-1)
    if starts.size != 1 or ends.size != 1 or axes.tolist() != [0] or steps.tolist() != [1]:
        raise ModelLoadError(f"{where}: Slice {node.name!r} of a downsampling pad step is not "
                             f"a step-1 slice of axis 0 (starts {starts.tolist()}, ends "
                             f"{ends.tolist()}, axes {axes.tolist()}, steps {steps.tolist()})")
    start, end = int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])
    start = min(max(start + length if start < 0 else start, 0), length)
    end = min(max(end + length if end < 0 else end, 0), length)
    return max(end - start, 0)


def repair_lost_padding(model, where: Path) -> int:
    """Rewrite, in ``model`` (an onnx ModelProto), each downsampling pad step that appends
    frames where the declared chunk needs none so that its ``Reshape`` reads the unpadded
    tensor; ``where`` names the file in errors. Returns how many were repaired (0: none found,
    or all as intended). ModelLoadError for a pad step whose shape it cannot prove (see the
    module docstring)."""
    import onnx

    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("model_type") != "zipformer2":  # SimpleDownsample is zipformer2's
        return 0
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    steps = []
    for node in graph.node:
        if node.op_type != "Concat" or node.domain not in ("", "ai.onnx") \
                or len(node.input) != 2 or _axis(node) != 0:
            continue
        cut = producer.get(node.input[1])
        if cut is None or cut.op_type != "Slice" or cut.input[0] != node.input[0] \
                or not any(r.op_type == "Reshape" for r in readers.get(node.output[0], [])):
            continue
        steps.append((node, cut))
    if not steps:
        return 0
    consts = _constants(graph)
    inferred = onnx.shape_inference.infer_shapes(model)
    declared = _declared_frames(meta, where)
    outputs = {o.name for o in graph.output}
    dropped: set[int] = set()
    for concat, cut in steps:
        x = concat.input[0]
        length = _static_dim0(inferred, x)
        if length is None:
            raise ModelLoadError(f"{where}: the frames entering {concat.name!r} are not fixed "
                                 "by the graph's shapes: cannot prove its padding")
        if length != declared:
            raise ModelLoadError(f"{where}: {concat.name!r} pads {length} frames but the "
                                 f"declared chunk gives {declared} at a stack's input: cannot "
                                 "prove its padding")
        appended = _slice_frames(where, cut, consts, length)
        users = readers.get(concat.output[0], [])
        shapes = [consts.get(u.input[1]) if u.op_type == "Reshape" else None for u in users]
        if not users or concat.output[0] in outputs or any(s is None or s.ndim != 1
                                                         or s.size < 2 for s in shapes) \
                or len({tuple(s.tolist()) for s in shapes}) != 1:
            raise ModelLoadError(f"{where}: {concat.name!r} is not read by Reshapes to one "
                                 "constant [groups, factor, ...] shape: cannot prove its "
                                 "padding")
        groups, factor = (int(v) for v in shapes[0][:2])
        if groups <= 0 or factor <= 0:
            raise ModelLoadError(f"{where}: Reshape after {concat.name!r} to "
                                 f"{shapes[0].tolist()}: groups and factor must be stated")
        pad = -(-length // factor) * factor - length
        if appended == pad and groups * factor == length + pad:
            continue  # as icefall computes it
        if pad != 0 or groups * factor != length or appended != 1:
            raise ModelLoadError(
                f"{where}: {concat.name!r} appends {appended} frame(s) to {length} before a "
                f"Reshape to {shapes[0].tolist()}; downsampling by {factor} needs {pad}: "
                "cannot prove a repair")
        for user in users:
            user.input[0] = x
        dropped.add(id(concat))
        if all(id(r) == id(concat) for r in readers.get(cut.output[0], [])) \
                and cut.output[0] not in outputs:
            dropped.add(id(cut))
    kept = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    return sum(1 for n, _ in steps if id(n) in dropped)
