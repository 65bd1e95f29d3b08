"""Differentiable functions, by kind (Chainer's layout): ``connection`` (linear),
``activation``, ``loss`` (and metrics), ``math`` (arithmetic).

Each function takes Variables or arrays and returns a Variable; losses average over the batch
(the first axis). Every one is written once against the array module of its inputs
(:func:`trainer_run.backend.array_module`), so it runs on NumPy and CuPy arrays alike.
"""

from .activation import ACTIVATIONS, ReLU, Sigmoid, Tanh, relu, sigmoid, tanh
from .connection import Linear, linear
from .loss import MeanSquaredError, SoftmaxCrossEntropy, accuracy, mean_squared_error, softmax_cross_entropy
from .math import Add, Scale, add, scale, sum_to

__all__ = ["ACTIVATIONS", "Add", "Linear", "MeanSquaredError", "ReLU", "Scale", "Sigmoid",
           "SoftmaxCrossEntropy", "Tanh", "accuracy", "add", "linear", "mean_squared_error", "relu",
           "scale", "sigmoid", "softmax_cross_entropy", "sum_to", "tanh"]
