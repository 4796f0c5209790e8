"""How many weights an ONNX file holds, read from its bytes without loading it.

The engine chooses its batch size and decode threads by the model's weight count
(``streamdec.engine.sizes_for``): a measure of its cost that is the same for fp32 and int8
files and on every machine. ``onnx.load`` would parse every weight's bytes (0.5 s and the
file's size in memory for the 66 M zipformer2 in fp32); this walks the protobuf wire format
instead (a ``ModelProto``'s ``graph``, field 7; a ``GraphProto``'s ``initializer``, field 5;
a ``TensorProto``'s ``dims``, field 1, packed or not), skipping each field by its length, on
a memory map, so a weight's bytes are never read.
"""

from __future__ import annotations

import mmap
from pathlib import Path

from ..errors import ModelLoadError

__all__ = ["onnx_weight_count"]

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_DIMS = 7, 5, 1
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def onnx_weight_count(path: Path) -> int:
    """The number of values of the initializers of ``path``'s main graph (its weights; 0
    for an empty file). ModelLoadError for bytes that are not a protobuf message."""
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                return sum(_elements(buf, start, end)
                           for graph in _fields(buf, 0, len(buf), _MODEL_GRAPH)
                           for start, end in _fields(buf, *graph, _GRAPH_INITIALIZER))
            except (IndexError, ValueError) as e:
                raise ModelLoadError(f"{path}: not an ONNX model ({e})") from None
            finally:
                buf.release()


def _elements(buf, start: int, end: int) -> int:
    """The product of a TensorProto's dims (1 for a scalar)."""
    count = 1
    for field, wire, value in _walk(buf, start, end):
        if field != _TENSOR_DIMS:
            continue
        if wire == _VARINT:
            count *= value
        elif wire == _LEN:  # packed
            i, stop = value
            while i < stop:
                dim, i = _varint(buf, i)
                count *= dim
    return count


def _fields(buf, start: int, end: int, wanted: int):
    """(start, end) of each length-delimited field numbered ``wanted`` in the message."""
    for field, wire, value in _walk(buf, start, end):
        if field == wanted and wire == _LEN:
            yield value


def _walk(buf, i: int, end: int):
    """(field number, wire type, value) of each field of the message in ``buf[i:end]``: an
    int for a varint, (start, end) for a length-delimited field, None for a fixed one."""
    while i < end:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _LEN:
            size, i = _varint(buf, i)
            value, i = (i, i + size), i + size
        elif wire in (_I64, _I32):
            value, i = None, i + (8 if wire == _I64 else 4)
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
        if i > end:
            raise ValueError(f"field {field} runs past its message")
        yield field, wire, value


def _varint(buf, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError(f"varint too long at byte {i}")
