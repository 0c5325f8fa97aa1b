"""An ONNX graph written to one file with its weights, a tensor at a time.

The export (onnx_encoder) traces the model's graph without its weights, which stay in the torch
model; :func:`save_with_weights` writes the graph and then each weight straight into the file,
so no whole serialised model is ever in memory. torch's own exporter held the model, its
constant-folded weights, the protobuf message and its serialised bytes at once: 2.2 GB for the
quality tier's 0.44 GB of weights, against 1.2 GB this way (docs/measured-encoding.md).

The file is an ordinary ONNX model: the protobuf wire format lets a message's fields come in any
order, so the graph's initializers are written after its other fields, and the graph after the
model's other fields, each with its length worked out beforehand.

Build time only (onnx, numpy).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO

import numpy as np

from ..files import open_exclusive

_LENGTH_DELIMITED = 2  # the protobuf wire type of a message, bytes or string field


def save_with_weights(model, weights: Mapping[str, np.ndarray], target: Path) -> None:
    """Write to `target` the ONNX `model` (a ModelProto, left unchanged) with the graph inputs named
    in `weights` made initializers of those values.

    A Transpose of a weight (how a linear layer's weight reaches its MatMul when traced without
    constant folding) becomes an initializer holding the transposed weight, as constant folding
    would make it; int8 quantisation finds a MatMul's weight only as an initializer. A weight
    nothing else reads is left out. `target` must not exist."""
    import onnx

    model_copy = onnx.ModelProto()
    model_copy.CopyFrom(model)
    graph = model_copy.graph
    tensors = _fold_transposes(graph, weights)
    read = {name for node in graph.node for name in node.input}
    read |= {output.name for output in graph.output}
    tensors = {name: value for name, value in tensors.items() if name in read}
    kept_inputs = [port for port in graph.input if port.name not in weights]
    del graph.input[:]
    graph.input.extend(kept_inputs)

    entries = [_initializer_head(name, value) for name, value in tensors.items()]
    graph_head = graph.SerializeToString()
    graph_bytes = len(graph_head) + sum(
        _field_size(onnx.GraphProto.INITIALIZER_FIELD_NUMBER, len(head) + _raw_size(value))
        for head, value in zip(entries, tensors.values())
    )
    model_copy.ClearField("graph")
    with open_exclusive(target, "wb") as stream:
        stream.write(model_copy.SerializeToString())
        _write_key(stream, onnx.ModelProto.GRAPH_FIELD_NUMBER, graph_bytes)
        stream.write(graph_head)
        for head, value in zip(entries, tensors.values()):
            size = len(head) + _raw_size(value)
            _write_key(stream, onnx.GraphProto.INITIALIZER_FIELD_NUMBER, size)
            stream.write(head)
            _write_key(stream, onnx.TensorProto.RAW_DATA_FIELD_NUMBER, value.nbytes)
            # a transposed weight is copied here, one at a time
            stream.write(_plain(value).reshape(-1).view(np.uint8).data)


def _fold_transposes(graph, weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The initializers the graph gets: `weights`, and each Transpose of one (removed from the
    graph) as its transposed value under the Transpose's output name (a view: no copy yet)."""
    from onnx import helper

    tensors = {name: np.asarray(value) for name, value in weights.items()}
    kept = []
    for node in graph.node:
        if node.op_type == "Transpose" and node.input[0] in weights:
            value = tensors[node.input[0]]
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            perm = attributes.get("perm") or list(reversed(range(value.ndim)))
            tensors[node.output[0]] = np.transpose(value, perm)
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    return tensors


def _plain(value: np.ndarray) -> np.ndarray:
    """`value` as an ONNX tensor's raw data holds it: C order, little-endian."""
    value = np.asarray(value)
    return np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))


def _initializer_head(name: str, value: np.ndarray) -> bytes:
    """The serialised TensorProto of `value` without its data (raw_data follows it)."""
    import onnx
    from onnx import helper

    data_type = helper.np_dtype_to_tensor_dtype(value.dtype.newbyteorder("="))
    head = onnx.TensorProto(name=name, data_type=data_type)
    head.dims.extend(value.shape)
    return head.SerializeToString()


def _raw_size(value: np.ndarray) -> int:
    """The bytes of a TensorProto's raw_data field holding `value`, its key and length included."""
    import onnx

    return _field_size(onnx.TensorProto.RAW_DATA_FIELD_NUMBER, value.nbytes)


def _field_size(number: int, length: int) -> int:
    return len(_varint(number << 3 | _LENGTH_DELIMITED)) + len(_varint(length)) + length


def _write_key(stream: IO[bytes], number: int, length: int) -> None:
    """The key and length of a length-delimited field `number` of `length` bytes."""
    stream.write(_varint(number << 3 | _LENGTH_DELIMITED) + _varint(length))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
