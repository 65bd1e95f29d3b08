"""Differentiable functions, by kind (Chainer's layout): ``connection`` (linear),
``convolution`` (convolution_2d), ``pooling`` (max, average, global average),
``activation``, ``loss`` (and metrics), ``math`` (arithmetic, reductions, matmul), ``array``
(reshape, flatten, concat, transpose, get_item), ``attention`` (scaled dot-product attention),
``embedding`` (embed_id), ``normalization`` (batch and layer normalization), ``noise`` (dropout),
``recurrent`` (lstm and gru over a sequence).

Each function takes Variables or arrays and returns a Variable; losses average over the batch
(the first axis). Every one is written once against the array module of its inputs
(:func:`trainer_run.backend.array_module`), so it runs on NumPy and CuPy arrays alike.
"""

from .activation import (
    ACTIVATIONS,
    GELU,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    sigmoid,
    softmax,
    tanh,
)
from .array import Concat, GetItem, Reshape, Transpose, concat, flatten, get_item, reshape, transpose
from .attention import ScaledDotProductAttention, scaled_dot_product_attention
from .connection import Linear, linear
from .convolution import Convolution2D, convolution_2d
from .embedding import EmbedID, embed_id
from .loss import (
    MeanSquaredError,
    SigmoidCrossEntropy,
    SoftmaxCrossEntropy,
    accuracy,
    mean_squared_error,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
)
from .math import (
    Add,
    Div,
    Exp,
    Log,
    MatMul,
    Mean,
    Mul,
    Scale,
    Sub,
    Sum,
    add,
    div,
    exp,
    log,
    matmul,
    mean,
    mul,
    scale,
    sub,
    sum,
    sum_to,
)
from .noise import Dropout, dropout
from .normalization import (
    BatchNormalization,
    FixedBatchNormalization,
    LayerNormalization,
    batch_normalization,
    fixed_batch_normalization,
    layer_normalization,
)
from .pooling import (
    AveragePooling2D,
    GlobalAveragePooling2D,
    MaxPooling2D,
    average_pooling_2d,
    global_average_pooling_2d,
    max_pooling_2d,
)
from .recurrent import gru, lstm

__all__ = ["AveragePooling2D", "Convolution2D", "GlobalAveragePooling2D", "MaxPooling2D",
           "average_pooling_2d", "convolution_2d", "global_average_pooling_2d", "max_pooling_2d",
           "BatchNormalization", "Dropout", "FixedBatchNormalization", "LayerNormalization",
           "batch_normalization", "dropout", "fixed_batch_normalization", "layer_normalization",
           "GetItem", "ScaledDotProductAttention", "get_item", "gru", "lstm",
           "scaled_dot_product_attention",
           "ACTIVATIONS", "Add", "Concat", "Div", "EmbedID", "Exp", "GELU", "LeakyReLU", "Linear", "Log",
           "LogSoftmax", "MatMul", "Mean", "MeanSquaredError", "Mul", "ReLU", "Reshape", "Scale", "Sigmoid",
           "SigmoidCrossEntropy", "Softmax", "SoftmaxCrossEntropy", "Sub", "Sum", "Tanh", "Transpose",
           "accuracy", "add", "concat", "div", "embed_id", "exp", "flatten", "gelu", "leaky_relu", "linear",
           "log", "log_softmax", "matmul", "mean", "mean_squared_error", "mul", "relu", "reshape", "scale",
           "sigmoid", "sigmoid_cross_entropy", "softmax", "softmax_cross_entropy", "sub", "sum", "sum_to",
           "tanh", "transpose"]
