"""``DynamicQuantizeLinear`` made per stream, for ``streamdec.models.dynamic_batch``.

``DynamicQuantizeLinear`` computes one scale and zero point per tensor from its minimum and
maximum: batched as it is, a stream's codes would depend on its batch mates. Each one is
replaced by the same formulas (ONNX's and ONNX Runtime's: range widened to include 0,
``scale = (max - min) / 255`` (1 where max = min), ``zp = round(-min / scale)``,
``q = clip(round(x / scale) + zp, 0, 255)``, rounding half to even) over each stream's own
elements: the tensor viewed as ``[O, B, rows, K]`` (min/max over axes 0, 2 and 3; the codes
by ``QuantizeLinear`` per axis 1, ONNX Runtime's DynamicQuantizeLinear kernel). Its
``MatMulInteger`` readers get a zero point of 0 and subtract ``zp_b * sum_k(W - W_zp)`` per
stream afterwards, in int32: the same integers as ``sum_k (q - zp)(W - W_zp)`` through the
same integer kernel; the ``Cast`` and the scale product that follow are taken per stream.
A ``DynamicQuantizeLinear`` read by anything but that pattern refuses the rewrite.
"""

from __future__ import annotations

import numpy as np

from ..errors import BatchRewriteRefused as Refused
from .batch_layout import Batch

__all__ = ["PerStreamQuantization"]


class _Quantized:
    """A tensor x's codes with a scale and zero point per stream: the codes viewed as
    ``[O, B, rows, K]`` (K: x's last axis, the one a product sums over), the scales and zero
    points as [B]; and the other forms its readers take, made once when first asked for."""

    def __init__(self, rewrite: "PerStreamQuantization", batch: Batch, dims: list[int], codes4: str,
                 step: str, zp: str) -> None:
        self.rewrite, self.b, self.dims = rewrite, batch, dims
        self.codes4, self.step, self.zp = codes4, step, zp
        self.made: dict[str, str] = {}

    def _made(self, what: str, make) -> str:
        if what not in self.made:
            self.made[what] = make()
        return self.made[what]

    def codes(self) -> str:
        """uint8 codes, shaped as x."""
        r = self.rewrite
        return self._made("codes", lambda: r.emit(
            "Reshape", [self.codes4, r.shape_with_batch(self.dims, self.b)], "dql_codes"))

    def zp_int(self) -> str:
        """int32 zero points, [B, 1, 1]."""
        r = self.rewrite
        return self._made("zp", lambda: r.emit("Reshape", [
            r.emit("Cast", [self.zp], "dql_zp", to=6), r.const(np.array([-1, 1, 1]))],
            "dql_zp"))

    def step3(self) -> str:
        """float scales, [B, 1, 1]."""
        r = self.rewrite
        return self._made("step", lambda: r.emit(
            "Reshape", [self.step, r.const(np.array([-1, 1, 1]))], "dql_scale"))


class PerStreamQuantization:
    """The rule for ``DynamicQuantizeLinear`` (and the MatMulInteger chains that read it) of
    ``_Rewrite``, the pass it is mixed into (which provides ``emit``, ``const``, ``shape``,
    ``batch``, ``readers``, ``consts``, ``skip``, ``cache``, ``shape_with_batch``,
    ``batch_size``, ``over_batch``, ``attr``, ``opset`` and ``_matmul_batch``)."""

    def _DynamicQuantizeLinear(self, node) -> None:
        x, (q, scale, zp) = node.input[0], node.output
        b, dims = self.batch[x], self.shape(x)
        users = self.readers.get(q, [])
        if not users or any(u.op_type != "MatMulInteger" or u.input[0] != q
                            or len(u.input) < 4 or u.input[2] != zp for u in users) \
                or any(r.op_type != "MatMulInteger" for r in self.readers.get(zp, [])):
            raise Refused(f"DynamicQuantizeLinear {node.name!r}: read by other than "
                          "MatMulInteger (codes, zero point)")
        chains = [self._chain(u, scale) for u in users]
        scale_users = {id(n) for n in self.readers.get(scale, [])}
        if scale_users != {id(c[2]) for c in chains}:
            raise Refused(f"DynamicQuantizeLinear {node.name!r}: its scale is read by other "
                          "than the scale products of its MatMulIntegers")
        outs = {id(c[1]) for c in chains}
        if any(id(r) not in outs for c in chains for r in self.readers[c[2].output[0]]):
            raise Refused(f"DynamicQuantizeLinear {node.name!r}: a scale product is read by "
                          "other than its MatMulIntegers' outputs")
        if b.k == len(dims) - 1:
            raise Refused(f"DynamicQuantizeLinear {node.name!r}: the batch in the axis its "
                          "products sum over")
        outer, inner = b.flat(dims)
        f32 = lambda v: self.const(np.array(v, np.float32))  # noqa: E731
        # x as [O, B, rows, K]: each stream's elements are [:, b], and a product over K
        # takes the view as it is
        x4 = self.emit("Reshape", [x, self.const(np.array(
            [outer, -1, inner // dims[-1], dims[-1]]))], "dql_rows")
        low = self.reduce("ReduceMin", x4, [0, 2, 3])
        high = self.reduce("ReduceMax", x4, [0, 2, 3])
        low = self.emit("Min", [low, f32(0.0)], "dql_min")
        high = self.emit("Max", [high, f32(0.0)], "dql_max")
        step = self.emit("Div", [self.emit("Sub", [high, low], "dql_range"), f32(255.0)],
                         "dql_scale")
        same = self.emit("Equal", [high, low], "dql_flat")
        step = self.emit("Where", [same, f32(1.0), step], "dql_scale")
        zpf = self.emit("Neg", [self.emit("Div", [low, step], "dql_zp")], "dql_zp")
        zpf = self.emit("Round", [self.emit("Clip", [zpf, f32(0.0), f32(255.0)], "dql_zp")],
                        "dql_zp")
        zp_u8 = self.emit("Cast", [zpf], "dql_zp", to=2)
        # ONNX Runtime quantizes per axis with the kernel its DynamicQuantizeLinear uses
        codes4 = self.emit("QuantizeLinear", [x4, step, zp_u8], "dql_codes", axis=1)
        quantized = _Quantized(self, b, dims, codes4, step, zpf)
        self.batch[q] = b  # (no longer made: its readers are rewritten below)
        for chain in chains:
            self._per_stream_matmul(chain, quantized)
        self.per_stream += 1

    def reduce(self, op: str, x: str, axes: list[int]) -> str:
        if self.opset >= 18:
            return self.emit(op, [x, self.const(np.array(axes))], "dql_reduce", keepdims=0)
        return self.emit(op, [x], "dql_reduce", axes=axes, keepdims=0)

    def _chain(self, mmi, scale: str) -> tuple:
        """MatMulInteger -> Cast(float) -> Mul(., Mul(scale, weight scale)): its nodes and
        the weight scale; Refused for anything else."""
        def only_reader(name: str, op: str):
            readers = self.readers.get(name, [])
            if len(readers) != 1 or readers[0].op_type != op:
                raise Refused(f"{mmi.name!r}: {name!r} is not read by one {op}")
            return readers[0]

        cast = only_reader(mmi.output[0], "Cast")
        if self.attr(cast, "to") != 1:
            raise Refused(f"{cast.name!r} does not cast to float")
        out = only_reader(cast.output[0], "Mul")
        other = out.input[1] if out.input[0] == cast.output[0] else out.input[0]
        product = next((n for n in self.readers.get(scale, []) if n.output[0] == other), None)
        if product is None or product.op_type != "Mul":
            raise Refused(f"{out.name!r} is not multiplied by its quantization scale product")
        w_scale = product.input[1] if product.input[0] == scale else product.input[0]
        if w_scale not in self.consts or mmi.input[1] not in self.consts \
                or mmi.input[3] not in self.consts:
            raise Refused(f"{mmi.name!r}: weights, weight scale and zero point must be "
                          "constants")
        for n in (mmi, cast, out, product):
            self.skip.add(id(n))
        return mmi, out, product, w_scale

    def spread(self, per_stream: str, dims: list[int], b: Batch, to: int | None = None
               ) -> str:
        """A per-stream value (B values; cast ``to`` an ONNX type) as a tensor of ``dims``
        batched at ``b``."""
        key = ("spread", per_stream, tuple(dims), b, to)
        if key not in self.cache:
            if to is not None:
                per_stream = self.emit("Cast", [per_stream], "per_stream", to=to)
            rows = self.emit("Reshape", [per_stream, self.const(np.array([1, -1, 1]))],
                             "per_stream")
            self.cache[key] = self.over_batch(rows, dims, b, "per_stream")
        return self.cache[key]

    def _per_stream_matmul(self, chain, quantized: "_Quantized") -> None:
        """The chain's output from the codes of ``quantized`` (each stream's own scale and
        zero point), the same numbers as the original chain gives each stream alone."""
        mmi, out, product, w_scale = chain
        weights, w_zp = self.consts[mmi.input[1]], self.consts[mmi.input[3]]
        ws = self.consts[w_scale]
        n = weights.shape[-1] if weights.ndim >= 2 else 0
        per_column = weights.ndim == 2
        if n == 0 or not all(v.size == 1 or (per_column and v.shape == (n,))
                             for v in (w_zp, ws)):
            raise Refused(f"{mmi.name!r}: weights {weights.shape}, zero point {w_zp.shape}, "
                          f"scale {ws.shape}: neither per tensor nor per column")
        b = self._matmul_batch(mmi)
        out_dims = self.shape(mmi.output[0])
        centred = weights.astype(np.int64) - w_zp.astype(np.int64).reshape(-1)
        column_sums = centred.sum(axis=-2, keepdims=True)
        if np.abs(column_sums).max(initial=0) * 255 >= 2 ** 31:
            raise Refused(f"{mmi.name!r}: the zero-point correction could overflow int32")
        # The codes go to the same integer kernel (ONNX Runtime's MatMulInteger) with a zero
        # point of 0: sum_k q (W - W_zp); minus zp * sum_k (W - W_zp), in int32, is
        # sum_k (q - zp)(W - W_zp), the original's integers (the kernel's own arithmetic
        # kept: a float product would differ where the kernel saturates, as ONNX Runtime's
        # AVX2 u8s8 kernel does).
        zero = self.const(np.array(0, np.uint8), "zero_point")
        sums = self.const(column_sums.astype(np.int32), "column_sums")
        if weights.ndim == 2:  # on the [O, B, rows, K] view: [O, B, rows, N], [B, 1, 1] apiece
            codes, zp, step = quantized.codes4, quantized.zp_int(), quantized.step3()
        else:  # a batched product of constant matrices: per-stream values spread out
            codes = quantized.codes()
            zp = self.spread(quantized.zp, out_dims, b, to=6)
            step = self.spread(quantized.step, out_dims, b)
        raw = self.emit("MatMulInteger", [codes, mmi.input[1], zero, mmi.input[3]], "mmi")
        exact = self.emit("Sub", [raw, self.emit("Mul", [zp, sums], "mmi_zp")], "mmi_exact")
        exact = self.emit("Cast", [exact], "mmi_float", to=1)
        scales = self.emit("Mul", [step, w_scale], "mmi_scales")
        if weights.ndim == 2:
            scaled = self.emit("Mul", [exact, scales], "mmi_scaled")
            self.emit("Reshape", [scaled, self.shape_with_batch(out_dims, b)], "mmi_out",
                      out=out.output[0])
        else:
            self.emit("Mul", [exact, scales], "mmi_scaled", out=out.output[0])
        self.batch[out.output[0]] = b
