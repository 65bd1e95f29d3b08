"""Define-by-run reverse-mode differentiation.

Calling a :class:`Function` on :class:`Variable` (or plain array) inputs computes its
output at once and, when any input needs a gradient, records the function as the
output's creator. :func:`backward` then walks the recorded graph from a scalar output
back to the leaves in reverse topological order (highest rank first), summing the
gradients of a variable that feeds several functions.

Gradients of parameters are not returned: they are accumulated into each parameter's
``grad`` buffer (see :mod:`trainer_run.params`), so the flat gradient storage fills in
place while the graph is walked.

Inside :func:`no_grad` (Chainer's ``no_backprop_mode``, PyTorch's ``torch.no_grad``) functions
record nothing: their outputs have no creator, so each function and what it kept for backward
is freed as soon as its output is computed. The mode belongs to the thread that enters it
(Chainer's configuration is per thread too): a prediction in one thread leaves the graph of a
training step in another intact. :func:`is_recording` tells the current thread's mode.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from numbers import Number

from .backend import array_module

_mode = threading.local()
"""``recording``: whether this thread records graphs (absent: True)."""


@contextlib.contextmanager
def no_grad():
    """Within this block the current thread's functions record no graph (evaluation,
    inference); the previous mode is restored after, however the block ends."""
    previous = is_recording()
    _mode.recording = False
    try:
        yield
    finally:
        _mode.recording = previous


def is_recording() -> bool:
    """Whether functions called now, in this thread, record the graph (False inside
    :func:`no_grad`)."""
    return getattr(_mode, "recording", True)


class Variable:
    """An array in the graph: ``data`` plus, after :func:`backward`, its ``grad``.

    ``creator`` is the function that produced it (None for leaves); ``rank`` orders
    the backward walk. A plain Variable leaf does not need a gradient; parameters
    (:class:`trainer_run.params.Parameter`) do.

    ``+ - * / @`` (and their reflected forms) and unary ``-`` call the functions ``add``, ``sub``,
    ``mul`` (``scale`` for a Python scalar), ``div`` (``scale`` by the reciprocal of a Python scalar
    divisor) and ``matmul`` of :mod:`trainer_run.functions`.
    """

    __slots__ = ("data", "grad", "creator", "rank")
    requires_grad = False

    def __init__(self, data, creator=None, rank=0):
        self.data = data
        self.grad = None
        self.creator = creator
        self.rank = rank

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"Variable(shape={self.data.shape}, dtype={self.data.dtype})"

    def backward(self):
        """Back-propagates from this scalar variable; see :func:`backward`."""
        backward(self)

    # Arithmetic operators build the graph through trainer_run.functions. The other operand may be
    # a Variable, an array or a Python scalar; a non-Variable operand is a constant. NumPy and CuPy
    # arrays defer to the reflected operator (``array * v`` calls ``v.__rmul__``) because of this:
    __array_ufunc__ = None

    def __add__(self, other):
        from .functions import add

        return add(self, other)

    def __radd__(self, other):
        from .functions import add

        return add(other, self)

    def __sub__(self, other):
        from .functions import sub

        return sub(self, other)

    def __rsub__(self, other):
        from .functions import sub

        return sub(other, self)

    def __mul__(self, other):
        from .functions import mul, scale

        return scale(self, other) if isinstance(other, Number) else mul(self, other)

    def __rmul__(self, other):
        from .functions import mul, scale

        return scale(self, other) if isinstance(other, Number) else mul(other, self)

    def __truediv__(self, other):
        # By a Python scalar: multiplies by its reciprocal (may differ from ``/`` in the last bit).
        from .functions import div, scale

        return scale(self, 1 / other) if isinstance(other, Number) else div(self, other)

    def __rtruediv__(self, other):
        from .functions import div

        return div(other, self)

    def __matmul__(self, other):
        from .functions import matmul

        return matmul(self, other)

    def __rmatmul__(self, other):
        from .functions import matmul

        return matmul(other, self)

    def __neg__(self):
        from .functions import scale

        return scale(self, -1)


class _Node(Variable):
    """A function output that lies on a path to a parameter."""

    __slots__ = ()
    requires_grad = True


def as_data(x):
    """The array behind ``x`` (a Variable or an array)."""
    return x.data if isinstance(x, Variable) else x


class Function:
    """A differentiable operation with one output.

    Subclasses implement ``forward(*arrays) -> array`` and ``backward(gy) -> tuple``
    with one entry per input: the input's gradient, or None where ``self.needs[i]`` is
    false or where the function already accumulated it into a parameter itself.
    ``self.inputs`` holds the inputs as given (Variables or arrays).
    """

    needs: tuple = ()
    inputs: tuple = ()

    def __call__(self, *inputs):
        arrays, needs, rank = [], [], -1
        for x in inputs:
            if isinstance(x, Variable):
                arrays.append(x.data)
                if x.requires_grad:
                    needs.append(True)
                    if x.rank > rank:
                        rank = x.rank
                    continue
            else:
                arrays.append(x)
            needs.append(False)
        y = self.forward(*arrays)
        if rank < 0 or not getattr(_mode, "recording", True):
            return Variable(y)
        self.inputs = inputs
        self.needs = tuple(needs)
        return _Node(y, creator=self, rank=rank + 1)

    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def backward(self, gy):
        raise NotImplementedError(f"{type(self).__name__} must define backward")


def backward(y: Variable, gy=None) -> None:
    """Computes gradients of ``y`` with respect to every parameter it depends on.

    ``gy`` defaults to one (``y`` must then hold a single element). Parameter gradients
    are accumulated (see :meth:`Parameter.accumulate`); intermediate gradients are
    released once used.
    """
    if y.creator is None:
        return
    if gy is None:
        xp = array_module(y.data)
        gy = xp.ones_like(y.data)
    y.grad = gy
    order = itertools.count()
    heap = [(-y.rank, next(order), y)]
    queued = {id(y)}
    while heap:
        _, _, var = heapq.heappop(heap)
        fn, g = var.creator, var.grad
        var.grad = None
        for x, need, gx in zip(fn.inputs, fn.needs, fn.backward(g)):
            if not need or gx is None:
                continue
            if x.creator is None:
                x.accumulate(gx)
                continue
            x.grad = gx if x.grad is None else x.grad + gx
            if id(x) not in queued:
                queued.add(id(x))
                heapq.heappush(heap, (-x.rank, next(order), x))
        fn.inputs = ()
