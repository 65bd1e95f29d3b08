"""Which axes of a traced forward follow the batch's size, and a sequence's length: two traces
of one model compared (:func:`symbolic`).

The exporter traces the forward twice (:mod:`.trace`), on batches of two sizes ``N`` and, for
token ids, two lengths ``T``. Each traced value then has two shapes; each axis's two lengths
are solved for the one :class:`Dim` ``c * N^a * T^b`` (``a``, ``b`` 0 or 1) that gives both
(:func:`solve`): a static length, the batch ``N``, the length ``T``, or their products
(``N*T``, which a linear layer over ``(N, T, C)`` reshapes to). The two traces must be the same
graph: the same functions in the same order on the same inputs, with the same settings (but
a reshape's target and an index's bounds, which may follow ``N`` and ``T``), the same
parameters, and constants that are equal, or of a shape that follows ``N``/``T`` and hold one
value throughout (a zero initial state); otherwise :class:`Mismatch` says where they differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from .. import functions as F
from .trace import Leaf

FOLLOWING = {F.Reshape: "shape", F.GetItem: "key"}
"""The setting of a function that may differ between the two traces (it follows the shapes)."""


class Mismatch(Exception):
    """The two traces are not one graph; the message says where."""


@dataclass(frozen=True)
class Dim:
    """The length ``coef * N**n * T**t`` of an axis (``n`` and ``t`` 0 or 1)."""

    coef: int
    n: int = 0
    t: int = 0

    @property
    def static(self) -> bool:
        return not (self.n or self.t)

    def at(self, point: tuple[int, int]) -> int:
        """The length for the batch and length ``point`` ``(N, T)``."""
        return self.coef * point[0] ** self.n * point[1] ** self.t

    def __str__(self) -> str:
        parts = [] if self.coef == 1 and not self.static else [str(self.coef)]
        return "*".join(parts + ["N"] * self.n + ["T"] * self.t)


BATCH, LENGTH = Dim(1, 1), Dim(1, 0, 1)
KINDS = (Dim(1), BATCH, LENGTH, Dim(1, 1, 1))
"""The monomials tried, in order: static first, so that a length that did not change is static."""


def solve(first: int, second: int, points: tuple) -> Dim | None:
    """The :class:`Dim` whose lengths at ``points`` (two ``(N, T)``) are ``first`` and ``second``;
    None when none is."""
    for kind in KINDS:
        unit = kind.at(points[0])
        if first % unit == 0 and Dim(first // unit, kind.n, kind.t).at(points[1]) == second:
            return Dim(first // unit, kind.n, kind.t)
    return None


@dataclass
class Shapes:
    """The symbolic shape of each value of the first trace (:meth:`of`), the second trace's
    step that matches one of the first's (:meth:`pair`), and the two ``points`` ``(N, T)``."""

    shapes: dict
    pairs: dict
    points: tuple

    def of(self, item) -> tuple:
        """The shape of ``item`` (a step or leaf of the first trace), a tuple of :class:`Dim`."""
        return self.shapes[id(item)]

    def pair(self, step):
        """The second trace's step that matches ``step``."""
        return self.pairs[id(step)]

    def solve(self, first: int, second: int, what: str) -> Dim:
        """The :class:`Dim` a setting ``what`` is, ``first`` in the first trace and ``second``
        in the second; :class:`Mismatch` when it is none."""
        dim = solve(first, second, self.points)
        if dim is None:
            raise Mismatch(f"{what} is {first}, then {second}")
        return dim


def symbolic(a, b, points: tuple) -> Shapes:
    """The :class:`Shapes` of the trace ``a`` (:class:`.trace.Trace`) against ``b``, traced at
    the ``(N, T)`` ``points``; :class:`Mismatch` when they are not one graph."""
    found = Shapes({}, {}, points)
    if len(a.steps) != len(b.steps):
        raise Mismatch(f"{len(a.steps)} functions, then {len(b.steps)}")
    index_a = {id(s): i for i, s in enumerate(a.steps)}
    index_b = {id(s): i for i, s in enumerate(b.steps)}
    for sa, sb in zip(a.steps, b.steps):
        name = type(sa.function).__name__
        if type(sa.function) is not type(sb.function) or len(sa.inputs) != len(sb.inputs):
            raise Mismatch(f"a {name}, then a {type(sb.function).__name__}")
        _same_settings(sa.function, sb.function)
        for ia, ib in zip(sa.inputs, sb.inputs):
            if isinstance(ia, Leaf) and isinstance(ib, Leaf):
                _leaf(found, ia, ib, name)
            elif isinstance(ia, Leaf) or isinstance(ib, Leaf) or index_a[id(ia)] != index_b[id(ib)]:
                raise Mismatch(f"{name} takes other inputs")
        found.shapes[id(sa)] = _shape(found, sa.output.shape, sb.output.shape, name)
        found.pairs[id(sa)] = sb
    found.shapes[id(a.input)] = _shape(found, a.input.shape, b.input.shape, "the input")
    if isinstance(a.output, Leaf):
        _leaf(found, a.output, b.output, "the output")
    return found


def _shape(found: Shapes, first: tuple, second: tuple, what: str) -> tuple:
    if len(first) != len(second):
        raise Mismatch(f"{what} has {len(first)} axes, then {len(second)}")
    return tuple(found.solve(x, y, f"an axis of {what}") for x, y in zip(first, second))


def _leaf(found: Shapes, a: Leaf, b: Leaf, name: str) -> None:
    if a.kind != b.kind or a.name != b.name:
        raise Mismatch(f"{name} takes other inputs")
    shape = _shape(found, numpy.shape(a.value), numpy.shape(b.value), f"a constant of {name}")
    found.shapes[id(a)] = shape
    if a.kind != "constant":
        return
    va, vb = numpy.asarray(a.value), numpy.asarray(b.value)
    if all(d.static for d in shape):
        same = numpy.array_equal(va, vb)
    else:
        same = va.size and vb.size and bool((va == va.flat[0]).all() and (vb == va.flat[0]).all())
    if not same:
        raise Mismatch(f"a constant of {name} holds other values")


def _settings(f) -> dict:
    return {k: v for k, v in vars(f).items()
            if not k.startswith("_") and k not in ("inputs", "needs", FOLLOWING.get(type(f)))}


def _same_settings(fa, fb) -> None:
    sa, sb = _settings(fa), _settings(fb)
    if sa.keys() != sb.keys() or not all(_equal(sa[k], sb[k]) for k in sa):
        raise Mismatch(f"a {type(fa).__name__}'s settings differ")


def _equal(x, y) -> bool:
    try:
        return bool(x == y)
    except ValueError:
        return numpy.array_equal(x, y)
