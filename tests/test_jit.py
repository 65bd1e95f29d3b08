"""numba is imported only when a compiled kernel first runs, never by importing optimizers."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy

from trainer_run import jit


def _python(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env={**os.environ, **env})
    return result.stdout.strip()


def test_importing_the_optimizers_leaves_numba_unimported():
    code = ("import sys, trainer_run.optimizers as o; o.create('adam'); "
            "print('numba' in sys.modules)")
    assert _python(code) == "False"


def test_a_fused_step_imports_numba_only_when_enabled():
    code = ("import sys, numpy; from trainer_run import optimizers as o\n"
            "from trainer_run import jit; n = jit.COMPILED_MIN\n"
            "u = o.get_updater(o.create('adam'))\n"
            "u([0], [numpy.ones(n, numpy.float32)], [numpy.ones(n, numpy.float32)])\n"
            "print('numba' in sys.modules)")
    assert _python(code, TRAINER_RUN_JIT="0") == "False"
    assert _python(code, TRAINER_RUN_JIT="1") == str(jit.AVAILABLE)


def test_a_run_of_small_groups_never_imports_numba():
    step = ("import sys, numpy; from trainer_run import optimizers as o; from trainer_run.params "
            "import Parameter, ParamStore; from trainer_run import jit\n"
            "store = ParamStore({'w': Parameter(numpy.ones(jit.COMPILED_MIN + {n}, numpy.float32))})\n"
            "u = o.get_updater(o.create('adam')); u.attach(store); u.step()\n"
            "print('numba' in sys.modules, float(store.params['w'].data[0]))")
    small = _python(step.replace("{n}", "-1"))
    large = _python(step.replace("{n}", "0"))
    assert small.split()[0] == "False"
    assert large.split()[0] == str(jit.AVAILABLE)
    assert small.split()[1] == large.split()[1]  # the same step either way (a zero gradient)


def _scaled_sum(x, s):
    total = 0.0
    for i in range(x.size):
        total += _square(x[i]) * s
    return total


def _square_loop(v):
    return v * v


_square = jit.kernel(_square_loop, parallel=False)


def test_a_kernel_calls_another_kernel_and_agrees_with_python():
    x = numpy.arange(5, dtype=numpy.float64)
    compiled = jit.kernel(_scaled_sum, parallel=False)
    assert _scaled_sum(x, 2.0) == 60.0                  # as plain Python, the inner kernel too
    if jit.AVAILABLE:
        assert compiled(x, 2.0) == 60.0
        assert compiled.compiled is compiled.compiled   # compiled once
