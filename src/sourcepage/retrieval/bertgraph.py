"""A BERT sentence encoder as an ONNX graph, written from the packaged weights with
``onnx.helper`` — no torch.

Why by hand: the one library route to ONNX (``torch.onnx.export``, also under optimum)
imports torch and transformers and traces the model: 9–10 s on this machine, paid by the
first search on a machine whose export cache is empty (a fresh sandbox, a new user). This
graph is the same computation written as ONNX operators — BERT's embeddings (word +
position + token type, LayerNorm), ``layers`` × (multi-head self-attention with the
padding mask, residual + LayerNorm, GELU feed-forward (exact, with ``Erf``), residual +
LayerNorm), then sentence-transformers' mean pooling over the mask and L2 normalisation
— and is built in well under a second from the safetensors file. Its vectors match the
traced export's to float32 rounding (2.4e-7); ``tests/test_speed.py`` checks it against torch.

Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, batch × tokens),
output ``embedding`` (batch × hidden, float32), as the traced export has them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BertShape:
    """The few numbers of a BERT config the graph needs."""

    layers: int
    heads: int
    hidden: int
    eps: float = 1e-12

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> BertShape:
        """From a Hugging Face ``config.json`` mapping."""
        return cls(
            int(config["num_hidden_layers"]),
            int(config["num_attention_heads"]),
            int(config["hidden_size"]),
            float(config.get("layer_norm_eps", 1e-12)),
        )


class _Builder:
    """Nodes and initialisers of one graph, with fresh names."""

    def __init__(self, weights: Mapping[str, np.ndarray]):
        from onnx import helper, numpy_helper

        self.h, self.nh = helper, numpy_helper
        self.w = weights
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        name = name or f"c{len(self.inits)}"
        self.inits.append(self.nh.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        """A weight of the safetensors file (a Linear's weight transposed for MatMul)."""
        a = self.w[key].astype(np.float32)
        return self.const(a.T if transpose else a, key + (".T" if transpose else ""))

    def op(self, kind: str, *inputs: str, **attrs: object) -> str:
        self.n += 1
        out = f"{kind.lower()}{self.n}"
        self.nodes.append(self.h.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        return self.op(
            "Add", self.op("MatMul", x, self.weight(prefix + ".weight", True)), self.weight(prefix + ".bias")
        )

    def norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(prefix + ".weight"),
            self.weight(prefix + ".bias"),
            axis=-1,
            epsilon=eps,
        )


def build(weights: Mapping[str, np.ndarray], shape: BertShape, name: str = "bert") -> Any:
    """The ``onnx.ModelProto`` of BERT + mean pooling + L2 normalisation over ``weights``
    (a BertModel's state dict as numpy arrays, keys without the "bert." prefix)."""
    from onnx import TensorProto, helper

    b = _Builder(weights)
    d = shape.hidden // shape.heads
    i64 = lambda *v: b.const(np.array(v, dtype=np.int64))  # noqa: E731
    f32 = lambda v: b.const(np.array(v, dtype=np.float32))  # noqa: E731
    # embeddings: word + position (0 … tokens−1) + token type, then LayerNorm
    tokens = b.op("Slice", b.op("Shape", "input_ids"), i64(1), i64(2))  # [tokens], 1-D
    positions = b.op("Slice", b.weight("embeddings.position_embeddings.weight"), i64(0), tokens, i64(0))
    x = b.op("Add", b.op("Gather", b.weight("embeddings.word_embeddings.weight"), "input_ids"), positions)
    x = b.op("Add", x, b.op("Gather", b.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"))
    x = b.norm(x, "embeddings.LayerNorm", shape.eps)
    # padding mask as BERT adds it to the attention scores: (1 − mask) · float32 min
    maskf = b.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    blocked = b.op("Mul", b.op("Sub", f32(1.0), maskf), f32(np.finfo(np.float32).min))
    blocked = b.op("Unsqueeze", blocked, i64(1, 2))  # batch × 1 × 1 × tokens
    heads = i64(0, 0, shape.heads, d)
    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        q, k, v = (
            b.op("Reshape", b.linear(x, f"{p}.attention.self.{n}"), heads) for n in ("query", "key", "value")
        )
        scores = b.op(
            "MatMul", b.op("Transpose", q, perm=[0, 2, 1, 3]), b.op("Transpose", k, perm=[0, 2, 3, 1])
        )
        scores = b.op("Add", b.op("Div", scores, f32(math.sqrt(d))), blocked)
        ctx = b.op("MatMul", b.op("Softmax", scores, axis=-1), b.op("Transpose", v, perm=[0, 2, 1, 3]))
        ctx = b.op("Reshape", b.op("Transpose", ctx, perm=[0, 2, 1, 3]), i64(0, 0, shape.hidden))
        x = b.norm(
            b.op("Add", b.linear(ctx, f"{p}.attention.output.dense"), x),
            f"{p}.attention.output.LayerNorm",
            shape.eps,
        )
        h = b.linear(x, f"{p}.intermediate.dense")
        gelu = b.op(
            "Mul",
            b.op("Mul", h, f32(0.5)),
            b.op("Add", f32(1.0), b.op("Erf", b.op("Div", h, f32(math.sqrt(2.0))))),
        )
        x = b.norm(b.op("Add", b.linear(gelu, f"{p}.output.dense"), x), f"{p}.output.LayerNorm", shape.eps)
    # mean over the unmasked tokens, then L2 (sentence-transformers' Pooling + Normalize)
    m = b.op("Unsqueeze", maskf, i64(2))
    total = b.op("ReduceSum", b.op("Mul", x, m), i64(1), keepdims=0)
    count = b.op("Max", b.op("ReduceSum", m, i64(1), keepdims=0), f32(1e-9))
    mean = b.op("Div", total, count)
    norm = b.op("Max", b.op("ReduceL2", mean, i64(1), keepdims=1), f32(1e-12))
    b.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))
    ints = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    out = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", shape.hidden])]
    graph = helper.make_graph(b.nodes, name, ints, out, b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="sourcepage")
