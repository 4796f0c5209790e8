"""A model's ONNX graph rewritten, when its session is opened, into one that gives the same
outputs with faster ONNX Runtime CPU kernels.

Depthwise 1-D convolutions as 2-D ones of height 1 (``depthwise_conv1d_as_2d``). ONNX
Runtime's CPU ``Conv`` computes a 1-D convolution with ``group`` > 1 as one im2col and one
small GEMM per group and per image: the zipformers' and conformers' depthwise convolutions
(a group per channel, 192-512 of them, kernel 8-31) at 16 streams are 3,000-8,000 GEMMs of
a few dozen multiply-adds each. A 2-D depthwise convolution goes to its NCHWc transformer's
blocked depthwise kernel instead. Other grouped convolutions (the decoders' context
convolution: 4 channels a group) stay as they are: as 2-D they were no faster (-1 to +12 %
more time). Measured on this project's 2-vCPU VM (AMD EPYC, Zen 4), ONNX Runtime 1.32, one
node at 16 streams (``bench/results/2026-12-06-sized-models/experiments``): 0.7-1.9 ms as
1-D, 0.04-0.15 ms as 2-D; the 66 M zipformer2 spent 36 % of its encoder time in these
nodes. The output differs only by the order of the float sums (a few 1e-6). The new graph
holds the same weights (their shape gets the extra axis of 1, the bytes are the same) and an
``Unsqueeze``/``Squeeze`` pair around each such convolution. ``ModelConfig.graph_rewrites =
false`` leaves the convolutions as they are.

Before them, always (a model that has it cannot run without it): the downsampling pad step
that some zipformer2 exports lost, repaired (``streamdec.models.repair``).

An encoder whose batch is fixed at 1 gets a second graph beside it (``batched_model``): the
same rewrites after ``streamdec.models.dynamic_batch``, which lets it take any batch with
each stream's outputs those of the original graph run on that stream alone.

A network exported with a dynamic batch whose ``DynamicQuantizeLinear`` nodes scale a whole
batch at once (int8 exports) gets them made per stream, with the speed rewrites
(``rewritten_model(per_stream=True)``; ``dynamic_batch.per_stream_quantization``): each row
then gets what the graph gives it alone. Where that is refused, ``Rewritten.refused`` says
why, and the caller runs such a network one row per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BatchRewriteRefused as Refused
from .dynamic_batch import dynamic_batch, per_stream_quantization, quantizes_across_batch
from .repair import repair_lost_padding

__all__ = ["depthwise_conv1d_as_2d", "rewritten_model", "Rewritten", "batched_model"]

log = logging.getLogger("streamdec")


@dataclass(frozen=True)
class Rewritten:
    """What ``rewritten_model`` did."""

    written: bool  # a rewritten copy was written (False: load the file as it is)
    #: the file's graph quantizes across a dynamic batch
    #: (``dynamic_batch.quantizes_across_batch``)
    across_batch: bool = False
    per_stream: int = 0  # its DynamicQuantizeLinear nodes made per stream in the copy
    refused: str = ""  # why they were not (across_batch only)


def rewritten_model(path: Path, into: Path, speed: bool = True, per_stream: bool = False
                    ) -> Rewritten:
    """Write the model of ``path`` after the rewrites to ``into``: the lost-padding repair,
    with ``speed`` and ``per_stream`` each ``DynamicQuantizeLinear`` of a graph with a
    dynamic batch made per stream (``dynamic_batch.per_stream_quantization``: each row
    then gets what the graph gives it alone), and with ``speed`` the depthwise convolutions
    as 2-D. Nothing written when none applies, nor for a model whose weights are external
    files. (A file, not bytes: an ONNX Runtime session made from bytes keeps them for its
    lifetime, a second copy of the weights.) ModelLoadError for a pad step the repair
    cannot prove safe."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(str(path), load_external_data=False)
    across = per_stream and quantizes_across_batch(model)
    if any(uses_external_data(t) for t in model.graph.initializer):
        return Rewritten(False, across, refused="its weights are in external files")
    repaired = repair_lost_padding(model, path)
    made, refused = 0, ""
    if across and not speed:
        refused = "graph rewrites are off"
    elif across:
        try:
            made = per_stream_quantization(model)
        except Refused as e:
            refused = str(e)
    faster = depthwise_conv1d_as_2d(model) if speed else 0
    if repaired == 0 and faster == 0 and made == 0:
        return Rewritten(False, across, refused=refused)
    onnx.save(model, str(into))
    return Rewritten(True, across, made, refused)


def batched_model(path: Path, into: Path, speed: bool = True) -> bool:
    """Write to ``into`` the encoder of ``path`` (its batch fixed at 1) rewritten to take any
    batch, each stream's outputs those of the original run on that stream alone
    (``streamdec.models.dynamic_batch``), after the lost-padding repair and, with ``speed``,
    the depthwise convolutions as 2-D. False (nothing written) where the graph cannot be
    proven to batch exactly (logged at debug, with the reason) or its weights are external
    files. ModelLoadError for a pad step the repair cannot prove safe."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(str(path), load_external_data=False)
    if any(uses_external_data(t) for t in model.graph.initializer):
        return False
    repair_lost_padding(model, path)
    try:
        dynamic_batch(model)
    except Refused as e:
        log.debug("%s: runs one stream at a time (no batched graph: %s)", path, e)
        return False
    if speed:
        depthwise_conv1d_as_2d(model)
    onnx.save(model, str(into))
    return True


def _opset(model) -> int:
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            return op.version
    return 1


def _subgraph_reads(graph) -> set[str]:
    """The names the subgraphs of ``graph``'s nodes (If, Loop, Scan bodies) read, at any
    depth."""
    from onnx import AttributeProto

    out: set[str] = set()
    for node in graph.node:
        for a in node.attribute:
            subs = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)
            for sub in subs:
                for inner in sub.node:
                    out.update(inner.input)
                out |= _subgraph_reads(sub)
    return out


def depthwise_conv1d_as_2d(model) -> int:
    """Rewrite, in ``model`` (an onnx ModelProto), each depthwise 1-D ``Conv`` of the main
    graph (``group`` > 1 output channels, one input channel each) whose weight is a rank-3
    initializer read by such convolutions only, as
    ``Unsqueeze`` (height 1) -> 2-D ``Conv`` -> ``Squeeze``. Returns how many were
    rewritten."""
    from onnx import helper, numpy_helper

    graph = model.graph
    # a weight that is also a graph input (older exports: an overridable default) or that a
    # subgraph reads keeps its shape
    kept = {i.name for i in graph.input} | _subgraph_reads(graph)
    weights = {t.name: t for t in graph.initializer if t.name not in kept}
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)

    def attr(node, name: str, default):
        for a in node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def fits(node) -> bool:
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            return False
        weight = weights.get(node.input[1])
        group = attr(node, "group", 1)
        return (weight is not None and len(weight.dims) == 3 and group > 1
                and weight.dims[0] == group and weight.dims[1] == 1 and len(node.output) == 1)

    convs = [n for n in graph.node if fits(n)]
    convs = [n for n in convs if all(fits(r) and r.input[1] == n.input[1]
                                     for r in readers[n.input[1]])]
    if not convs:
        return 0
    taken = {v for n in graph.node for v in list(n.input) + list(n.output)}
    taken |= {t.name for t in graph.initializer} | kept | {n.name for n in graph.node}

    def fresh(base: str) -> str:
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        return name

    axes_input = None
    if _opset(model) >= 13:  # Unsqueeze/Squeeze take their axes as an input from opset 13
        axes_input = fresh("streamdec_conv2d_axes")
        graph.initializer.append(numpy_helper.from_array(
            np.array([2], dtype=np.int64), axes_input))

    def around(op: str, src: str, dst: str, base: str):
        if axes_input is not None:
            return helper.make_node(op, [src, axes_input], [dst], name=fresh(base))
        return helper.make_node(op, [src], [dst], name=fresh(base), axes=[2])

    reshaped: set[str] = set()
    rewritten = set(id(n) for n in convs)
    nodes = []
    for node in graph.node:
        if id(node) not in rewritten:
            nodes.append(node)
            continue
        weight = weights[node.input[1]]
        if weight.name not in reshaped:
            dims = list(weight.dims)
            del weight.dims[:]
            weight.dims.extend(dims[:2] + [1, dims[2]])
            reshaped.add(weight.name)
        base = node.name or node.output[0]
        x4, y4 = fresh(f"{base}/as2d_in"), fresh(f"{base}/as2d_out")
        attrs = {"group": attr(node, "group", 1)}
        kernel = attr(node, "kernel_shape", None)
        if kernel is not None:
            attrs["kernel_shape"] = [1, *kernel]
        for name in ("strides", "dilations"):
            value = attr(node, name, None)
            if value is not None:
                attrs[name] = [1, *value]
        pads = attr(node, "pads", None)
        if pads is not None:
            attrs["pads"] = [0, pads[0], 0, pads[1]]
        auto_pad = attr(node, "auto_pad", None)
        if auto_pad is not None:
            attrs["auto_pad"] = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        nodes.append(around("Unsqueeze", node.input[0], x4, f"{base}/as2d_unsqueeze"))
        nodes.append(helper.make_node("Conv", [x4, *node.input[1:]], [y4],
                                      name=fresh(f"{base}/as2d"), **attrs))
        nodes.append(around("Squeeze", y4, node.output[0], f"{base}/as2d_squeeze"))
    del graph.node[:]
    graph.node.extend(nodes)
    return len(convs)
