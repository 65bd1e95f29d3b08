"""ccSGD (optimizers/ccsgd.py) is MXNet's alias of SGD."""

from __future__ import annotations

from trainer_run.optimizers import SGD, create

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_ccsgd_is_sgd():
    assert type(create("ccsgd")).__name__ == "ccSGD"
    assert isinstance(create("ccsgd", momentum=0.5), SGD)
