"""Graphs aimed at TVM's rewrite passes: matmul of a sum of weights, parallel matmuls, conv + batch_norm,
transposed matmuls, long float16 contractions (where the accumulation dtype shows)."""

from __future__ import annotations

from . import distributions as dist
from .builder import GraphBuilder, Val
from .conv import conv_input, conv_stage
from .norms import norm_stage
from .shapes import dim, seq_shape
from .sources import activation_input, param_input

LOW = [("float16", 3), ("bfloat16", 1), ("float32", 1)]
WIDTH = [((2, 16), 3), ((17, 64), 1)]
LONG_K = [(1024, 1), (2048, 1), (4096, 2)]


def _weight(b: GraphBuilder, stem: str, k: int, m: int, dtype: str) -> Val:
    return param_input(b, stem, (k, m), dtype, lambda: dist.weight_spec(b.draw, k))


def matmul_of_sum(b: GraphBuilder) -> list[Val]:
    """x @ (W1 + W2) (ExpandMatmulOfSum, a LoRA-style update of a base weight)."""
    dtype = b.draw.weighted(LOW)
    x = activation_input(b, seq_shape(b.draw, b.draw.choice([2, 3])), dtype)
    k, m = x.shape[-1], dim(b.draw, WIDTH)
    w = b.op("add", [_weight(b, "w_base", k, m, dtype), _weight(b, "w_delta", k, m, dtype)], stem="w_sum")
    return [b.op("matmul", [x, w])]


def parallel_matmuls(b: GraphBuilder) -> list[Val]:
    """Two or three matmuls/linears sharing one input (CombineParallelMatmul), outputs kept apart or added."""
    dtype = b.draw.weighted(LOW)
    x = activation_input(b, seq_shape(b.draw, b.draw.choice([2, 3])), dtype)
    k, m = x.shape[-1], dim(b.draw, WIDTH)
    outs = [b.op("matmul", [x, _weight(b, f"w{i}", k, m, dtype)], stem=f"proj{i}") for i in range(b.draw.choice([2, 3]))]
    if b.draw.chance(0.4):
        return [b.op("add", outs[:2], stem="merged")] + outs[2:]
    return outs


def conv_batch_norm(b: GraphBuilder) -> list[Val]:
    """conv2d followed by batch_norm (FoldBatchnormToConv2D, DecomposeOps*, ConvertLayout)."""
    y = conv_stage(b, conv_input(b, rank=4, dtype=b.draw.weighted(LOW)))
    return [norm_stage(b, y, op="batch_norm")]


def transposed_matmul(b: GraphBuilder) -> list[Val]:
    """linear without bias: matmul(x, permute_dims(w)) in Relax (FuseTransposeMatmul), sometimes chained."""
    dtype = b.draw.weighted(LOW)
    x = activation_input(b, seq_shape(b.draw, b.draw.choice([2, 3])), dtype)
    k, m = x.shape[-1], dim(b.draw, WIDTH)
    y = b.op("linear", [x, param_input(b, "w", (m, k), dtype, lambda: dist.weight_spec(b.draw, k)), None])
    if b.draw.chance(0.3):
        y = b.op("linear", [y, param_input(b, "w2", (m, m), dtype, lambda: dist.weight_spec(b.draw, m)), None])
    return [y]


def long_contraction(b: GraphBuilder) -> list[Val]:
    """A float16 product over K in the thousands with tiny M and N: where an accumulator dtype shows."""
    dtype = b.draw.weighted([("float16", 3), ("bfloat16", 1)])
    k = b.draw.weighted(LONG_K)
    x = activation_input(b, (b.draw.choice([1, 2, 4]), k), dtype)
    m = b.draw.choice([1, 4, 8])
    if b.draw.chance(0.5):
        w = b.op("add", [_weight(b, "w_base", k, m, dtype), _weight(b, "w_delta", k, m, dtype)], stem="w_sum")
        return [b.op("matmul", [x, w])]
    return [b.op("matmul", [x, _weight(b, "w", k, m, dtype)])]


TEMPLATES = [(matmul_of_sum, 3), (parallel_matmuls, 3), (conv_batch_norm, 2), (transposed_matmul, 2),
             (long_contraction, 2)]


def tvm_pass_family(b: GraphBuilder) -> list[Val]:
    """One of the pass-targeted templates (weighted)."""
    return b.draw.weighted([(t, w) for t, w in TEMPLATES])(b)


__all__ = ["tvm_pass_family", "TEMPLATES"]
