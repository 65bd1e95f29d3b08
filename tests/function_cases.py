"""The differentiable functions of ``trainer_run.functions`` as a table the GPU tests run:
each case names a function, its inputs' shapes and kinds, and its keyword arguments.

An input is ``(kind, shape)``: ``normal`` (standard normal values), ``positive`` (in [0.5,
2]: a logarithm's, a divisor's, a variance's), ``ids`` (integers in ``[0, high)``, with
``high`` third) or ``binary`` (labels 0 and 1). The differentiable inputs (``wrt``) become
parameters; the others are constants of the call. :data:`COVERS` maps each public function
of the package to the cases of it, so that a new function fails the coverage test until it
has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy

from trainer_run import functions as F


@dataclass(frozen=True)
class Case:
    fn: Callable
    wrt: tuple
    const: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def __call__(self, *inputs):
        return self.fn(*inputs, **self.kwargs)

    def arrays(self, seed: int) -> tuple[list, list]:
        """``(wrt arrays, constant arrays)``, float32 and int64, drawn with ``seed``."""
        rng = numpy.random.default_rng(seed)
        return [_draw(rng, s) for s in self.wrt], [_draw(rng, s) for s in self.const]


def _draw(rng, spec):
    kind, shape = spec[0], spec[1]
    if kind == "normal":
        return rng.standard_normal(shape).astype(numpy.float32)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape).astype(numpy.float32)
    if kind == "ids":
        return rng.integers(0, spec[2], shape, dtype=numpy.int64)
    if kind == "binary":
        return rng.integers(0, 2, shape, dtype=numpy.int64)
    raise ValueError(kind)


def N(*shape):
    return ("normal", shape)


def P(*shape):
    return ("positive", shape)


def _dropout(x):
    return F.dropout(x, 0.3, rng=numpy.random.default_rng(0))  # the same mask at every call


def _conv_bn_pool(x, W, gamma, beta):
    """A convolution's output (batch-innermost layout) through batch norm, ReLU and pooling."""
    h = F.batch_normalization(F.convolution_2d(x, W, pad=1), gamma, beta)
    return F.max_pooling_2d(F.relu(h), 2)


def _lstm_outputs(*inputs):
    return F.lstm(*inputs)[0]


def _embed_scaled(ids, W):
    return F.embed_id(ids, F.scale(W, 2.0))  # W not a leaf: the dense gradient path


CASES = {
    "relu": Case(F.relu, (N(4, 5),)),
    "tanh": Case(F.tanh, (N(4, 5),)),
    "sigmoid": Case(F.sigmoid, (N(4, 5),)),
    "leaky_relu": Case(F.leaky_relu, (N(4, 5),)),
    "leaky_relu_slope": Case(F.leaky_relu, (N(4, 5),), kwargs={"slope": 0.05}),
    "gelu": Case(F.gelu, (N(4, 5),)),
    "softmax": Case(F.softmax, (N(4, 5),)),
    "softmax_axis0": Case(F.softmax, (N(4, 5),), kwargs={"axis": 0}),
    "log_softmax": Case(F.log_softmax, (N(4, 5),)),
    "log_softmax_3d": Case(F.log_softmax, (N(2, 3, 4),), kwargs={"axis": -1}),
    "add_broadcast": Case(F.add, (N(3, 4), N(4))),
    "sub_broadcast": Case(F.sub, (N(3, 1), N(1, 4))),
    "mul_broadcast": Case(F.mul, (N(2, 3, 4), N(3, 1))),
    "div": Case(F.div, (N(3, 4), P(3, 4))),
    "div_broadcast": Case(F.div, (N(3, 4), P(4))),
    "scale": Case(F.scale, (N(3, 4),), kwargs={"factor": 2.5}),
    "exp": Case(F.exp, (N(3, 4),)),
    "log": Case(F.log, (P(3, 4),)),
    "sum": Case(F.sum, (N(3, 4),)),
    "sum_axes_keepdims": Case(F.sum, (N(2, 3, 4),), kwargs={"axis": (0, 2), "keepdims": True}),
    "mean": Case(F.mean, (N(3, 4),)),
    "mean_axis": Case(F.mean, (N(2, 3, 4),), kwargs={"axis": 1}),
    "matmul": Case(F.matmul, (N(3, 4), N(4, 5))),
    "matmul_batched": Case(F.matmul, (N(2, 3, 4), N(4, 5))),
    "reshape": Case(F.reshape, (N(3, 4),), kwargs={"shape": (2, -1)}),
    "flatten": Case(F.flatten, (N(2, 3, 2, 2),)),
    "concat": Case(lambda a, b: F.concat([a, b]), (N(3, 2), N(3, 4))),
    "concat_axis0": Case(lambda a, b: F.concat([a, b], axis=0), (N(2, 4), N(3, 4))),
    "transpose": Case(F.transpose, (N(2, 3, 4),)),
    "transpose_axes": Case(F.transpose, (N(2, 3, 4),), kwargs={"axes": (1, 0, 2)}),
    "get_item": Case(F.get_item, (N(2, 3, 6),), kwargs={"key": (..., slice(2, 4))}),
    "get_item_int": Case(F.get_item, (N(2, 3, 6),), kwargs={"key": (1, slice(None), slice(0, 6, 2))}),
    "linear": Case(F.linear, (N(4, 6), N(3, 6), N(3))),
    "linear_no_bias": Case(F.linear, (N(4, 6), N(3, 6))),
    "linear_images": Case(F.linear, (N(2, 2, 2, 2), N(3, 8), N(3))),
    "convolution_2d": Case(F.convolution_2d, (N(2, 3, 5, 5), N(4, 3, 3, 3), N(4)), kwargs={"pad": 1}),
    "convolution_2d_stride": Case(F.convolution_2d, (N(2, 3, 7, 7), N(4, 3, 3, 3)),
                                  kwargs={"stride": 2}),
    "convolution_2d_dilate": Case(F.convolution_2d, (N(2, 2, 7, 7), N(3, 2, 3, 3), N(3)),
                                  kwargs={"dilate": 2, "pad": 2}),
    "convolution_2d_groups": Case(F.convolution_2d, (N(2, 4, 5, 5), N(6, 2, 3, 3), N(6)),
                                  kwargs={"groups": 2, "pad": 1}),
    "convolution_2d_1x1": Case(F.convolution_2d, (N(2, 3, 4, 4), N(5, 3, 1, 1), N(5))),
    "convolution_2d_rect": Case(F.convolution_2d, (N(2, 2, 5, 6), N(3, 2, 2, 3)),
                                kwargs={"stride": (1, 2), "pad": (1, 0)}),
    "max_pooling_2d": Case(F.max_pooling_2d, (N(2, 3, 4, 4),), kwargs={"ksize": 2}),
    "max_pooling_2d_overlap": Case(F.max_pooling_2d, (N(2, 3, 5, 5),),
                                   kwargs={"ksize": 3, "stride": 2, "pad": 1}),
    "average_pooling_2d": Case(F.average_pooling_2d, (N(2, 3, 4, 4),), kwargs={"ksize": 2}),
    "average_pooling_2d_pad": Case(F.average_pooling_2d, (N(2, 3, 5, 5),),
                                   kwargs={"ksize": 3, "stride": 1, "pad": 1}),
    "global_average_pooling_2d": Case(F.global_average_pooling_2d, (N(2, 3, 4, 5),)),
    "embed_id": Case(lambda W, ids: F.embed_id(ids, W), (N(6, 5),), (("ids", (3, 4), 6),)),
    "embed_id_dense": Case(lambda W, ids: _embed_scaled(ids, W), (N(6, 5),), (("ids", (7,), 6),)),
    "batch_normalization": Case(F.batch_normalization, (N(6, 4), P(4), N(4))),
    "batch_normalization_4d": Case(F.batch_normalization, (N(3, 4, 3, 3), P(4), N(4))),
    "conv_batch_norm_pool": Case(_conv_bn_pool, (N(2, 3, 4, 4), N(4, 3, 3, 3), P(4), N(4))),
    "fixed_batch_normalization": Case(F.fixed_batch_normalization,
                                      (N(3, 4, 2, 2), P(4), N(4), N(4), P(4))),
    "layer_normalization": Case(F.layer_normalization, (N(4, 6), P(6), N(6))),
    "layer_normalization_3d": Case(F.layer_normalization, (N(2, 3, 5), P(5), N(5))),
    "softmax_cross_entropy": Case(F.softmax_cross_entropy, (N(5, 4),), (("ids", (5,), 4),)),
    "sigmoid_cross_entropy": Case(F.sigmoid_cross_entropy, (N(5, 4),), (("binary", (5, 4)),)),
    "sigmoid_cross_entropy_batch": Case(F.sigmoid_cross_entropy, (N(5, 4),), (("binary", (5, 4)),),
                                        kwargs={"normalize": False}),
    "mean_squared_error": Case(F.mean_squared_error, (N(4, 3), N(4, 3))),
    "dropout": Case(_dropout, (N(4, 5),)),
    "scaled_dot_product_attention": Case(F.scaled_dot_product_attention, (N(2, 2, 5, 4), N(2, 2, 5, 4),
                                                                          N(2, 2, 5, 3))),
    "scaled_dot_product_attention_full": Case(F.scaled_dot_product_attention,
                                              (N(2, 2, 3, 4), N(2, 2, 5, 4), N(2, 2, 5, 3)),
                                              kwargs={"causal": False}),
    "lstm": Case(_lstm_outputs, (N(2, 4, 3), N(2, 5), N(2, 5), N(20, 3), N(20, 5), N(20))),
    "gru": Case(F.gru, (N(2, 4, 3), N(2, 5), N(15, 3), N(15, 5), N(15), N(15))),
}

COVERS = {
    name: [k for k in CASES if k == name or k.startswith(name + "_")] for name in (
        "relu", "tanh", "sigmoid", "leaky_relu", "gelu", "softmax", "log_softmax", "add", "sub",
        "mul", "div", "scale", "exp", "log", "sum", "mean", "matmul", "reshape", "flatten",
        "concat", "transpose", "get_item", "linear", "convolution_2d", "max_pooling_2d",
        "average_pooling_2d", "global_average_pooling_2d", "embed_id", "batch_normalization",
        "fixed_batch_normalization", "layer_normalization", "softmax_cross_entropy",
        "sigmoid_cross_entropy", "mean_squared_error", "dropout", "scaled_dot_product_attention",
        "lstm", "gru")
}
NOT_DIFFERENTIABLE = {"accuracy", "sum_to"}
"""Public functions that make no graph node: compared forward only (test_gpu_functions)."""
