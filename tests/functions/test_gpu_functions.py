"""Every differentiable function of ``trainer_run.functions`` on CuPy: its forward and the
gradients of ``sum(c * f(inputs))`` (``c`` fixed random weights) equal NumPy's within
float32 rounding, and the repo's gradient check (``trainer_run.check_gradients``, central
differences in float64) passes on either backend. The cases are the table of
``function_cases.py``, which the coverage test holds to the package's public names."""

from __future__ import annotations

import numpy
import pytest
from function_cases import CASES, COVERS, NOT_DIFFERENTIABLE
from gpu_helpers import assert_close, backend, host

import trainer_run
from trainer_run import functions as F
from trainer_run.autograd import backward, no_grad
from trainer_run.params import Parameter

# Values are O(1). On NumPy, float32 against float64 stays within a fifth of these for every
# case (convolutions' sums of ~30 products the most); the GPU rounds once more, in another
# order (cuBLAS, CuPy's reductions, fused multiply-adds), so its distance to NumPy's float32
# is at most about twice that: 2.5 times margin left.
RTOL, ATOL = 2e-5, 3e-6


class Probe:
    """A model of one case: its differentiable inputs are the parameters, its constants the
    batch, its loss ``sum(c * f(inputs))``."""

    def __init__(self, case, b, wrt, c):
        self.case = case
        self._params = {f"in{k}": Parameter(b.asarray(a)) for k, a in enumerate(wrt)}
        self.c = b.asarray(c)

    def params(self):
        return self._params

    def __call__(self, *const):
        return F.sum(F.mul(self.case(*self._params.values(), *const), self.c))


def _weights(case, wrt, const):
    """Fixed random weights ``c`` of the output's shape (from the NumPy forward)."""
    with no_grad():
        shape = numpy.shape(case(*wrt, *const).data)
    return numpy.random.default_rng(99).standard_normal(shape).astype(numpy.float32)


def forward_backward(device: str, name: str) -> list:
    """The output and every input's gradient, on the host."""
    case = CASES[name]
    wrt, const = case.arrays(seed=7)
    b = backend(device)
    probe = Probe(case, b, wrt, _weights(case, wrt, const))
    const = [b.asarray(a) for a in const]
    y = case(*probe.params().values(), *const)
    backward(F.sum(F.mul(y, probe.c)))
    return [host(y.data)] + [host(p.grad) for p in probe.params().values()]


def compare(device: str, name: str) -> None:
    got, expected = forward_backward(device, name), forward_backward("numpy", name)
    assert_close(got, expected, RTOL, ATOL, name)


def gradient_check(device: str, name: str) -> dict:
    case = CASES[name]
    wrt, const = case.arrays(seed=3)
    b = backend(device)
    probe = Probe(case, b, wrt, _weights(case, wrt, const))
    return trainer_run.check_gradients(probe, tuple(b.asarray(a) for a in const))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradients_on_cupy_are_numpys(name):
    compare("cupy", name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_gradient_check_passes(name, xp_backend):
    errors = gradient_check(xp_backend, name)
    assert errors and max(errors.values()) <= 1


def forward_only(device: str) -> list:
    """``accuracy`` and ``sum_to`` (no graph) on the host."""
    b = backend(device)
    rng = numpy.random.default_rng(2)
    y, t = b.asarray(rng.standard_normal((50, 4)).astype(numpy.float32)), b.asarray(
        rng.integers(0, 4, 50))
    g = b.asarray(rng.standard_normal((2, 3, 4)).astype(numpy.float32))
    return [host(F.accuracy(y, t)), host(F.sum_to(g, (3, 1)))]


@pytest.mark.gpu
def test_the_functions_without_a_graph_on_cupy_are_numpys():
    assert_close(forward_only("cupy"), forward_only("numpy"), RTOL, ATOL, "accuracy, sum_to")


def test_every_public_function_has_a_case():
    """A function added to ``trainer_run.functions`` must join the table of function_cases.py."""
    public = {n for n in F.__all__ if n[0].islower() and callable(getattr(F, n))}
    assert public == set(COVERS) | NOT_DIFFERENTIABLE
    assert all(COVERS.values()), [n for n, cases in COVERS.items() if not cases]
