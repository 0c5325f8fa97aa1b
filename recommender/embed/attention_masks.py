"""The exported graph's attention masks, made once instead of once a layer.

The TorchScript export of a BERT-style model (transformers' SDPA attention) turns the padding mask
into an additive mask in every layer, each with its own ``Where(mask, 0, -inf)`` over a
[batch, 1, sequence, sequence] tensor, and guards every softmax with ``Where(IsNaN(p), 0, p)``
for rows with no key left. On 2 cores these element-wise passes took 16% of MiniLM's fp32
kernel time, and more of its int8 graphs' (ONNX Runtime's profile; docs/performance.md).
:func:`simplify_attention_masks` gives every layer the first layer's mask (the same inputs make the
same tensor) and drops the guard: the encoder never runs a text without a token, so no softmax
row is empty. The export checks the result against torch, padding included (onnx_encoder).
"""

from __future__ import annotations

from collections import defaultdict


def simplify_attention_masks(model) -> int:
    """Share the per-layer attention masks of the ONNX `model` (a ModelProto, changed in place) and
    remove its softmax NaN guards; return how many nodes were removed (0 for a graph without
    them, left unchanged)."""
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, list] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            readers[name].append(node)

    def constant(name: str) -> bytes | None:
        node = producer.get(name)
        if node is None or node.op_type != "Constant" or len(node.attribute) != 1:
            return None
        return numpy_helper.to_array(node.attribute[0].t).tobytes()

    renamed: dict[str, str] = {}  # a removed node's output -> the tensor read instead
    removed: set[int] = set()
    first_mask: dict[tuple, str] = {}
    for node in graph.node:
        if node.op_type == "Where" and node.name.endswith("/attention/self/Where"):
            values = (constant(node.input[1]), constant(node.input[2]))
            if None in values:
                continue
            key = (node.input[0], *values)
            if key in first_mask:
                renamed[node.output[0]] = first_mask[key]
                removed.add(id(node))
            else:
                first_mask[key] = node.output[0]
        elif node.op_type == "IsNaN" and producer.get(node.input[0], node).op_type == "Softmax":
            guards = readers[node.output[0]]
            if len(guards) == 1 and guards[0].op_type == "Where":
                guard = guards[0]
                if guard.input[0] == node.output[0] and guard.input[2] == node.input[0]:
                    renamed[guard.output[0]] = node.input[0]
                    removed.update((id(node), id(guard)))
    kept = [node for node in graph.node if id(node) not in removed]
    for node in kept:
        for position, name in enumerate(node.input):
            if name in renamed:
                node.input[position] = renamed[name]
    # What only the removed nodes read (the later layers' mask constants) goes too.
    outputs = {output.name for output in graph.output}
    while True:
        read = {name for node in kept for name in node.input} | outputs
        unread = [node for node in kept if not any(name in read for name in node.output)]
        if not unread:
            break
        removed.update(id(node) for node in unread)
        kept = [node for node in kept if id(node) not in removed]
    count = len(graph.node) - len(kept)
    del graph.node[:]
    graph.node.extend(kept)
    onnx.checker.check_model(model)
    return count
