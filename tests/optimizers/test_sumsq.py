"""LAMB's and LARS's per-tensor norms: the fused step's result does not depend on the number
of threads numba runs (bit for bit), and the sums of squares match a float64 sum."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trainer_run import jit
from trainer_run.optimizers.sumsq import SUM_CHUNK, chunk_table, sum_of_squares

STEP = """
import sys, numpy as np
from trainer_run import jit
from trainer_run.optimizers import create, get_updater
from trainer_run.params import Parameter, ParamStore
jit.PARALLEL_MIN = 1                                   # every launch uses all threads
rng = np.random.default_rng(5)
shapes = [(300, 200), (7,), (50_000,), (3, 3)]
store = ParamStore({f"p{i}": Parameter(rng.standard_normal(s).astype(np.float32))
                    for i, s in enumerate(shapes)})
name = sys.argv[1]
updater = get_updater(create(name, momentum=0.9) if name == "lars" else create(name))
updater.attach(store)
for _ in range(3):
    for p in store:
        p.grad[...] = rng.standard_normal(p.data.shape).astype(np.float32)
    updater.step()
sys.stdout.write(np.concatenate([p.data.ravel() for p in store]).tobytes().hex())
"""


def _weights_after_steps(name: str, threads: int) -> str:
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
    return subprocess.run([sys.executable, "-c", STEP, name], capture_output=True, text=True,
                          check=True, env=env).stdout


@pytest.mark.skipif(not jit.ENABLED, reason="needs numba")
@pytest.mark.parametrize("name", ["lamb", "lars"])
def test_fused_step_is_the_same_on_one_and_two_threads(name):
    one = _weights_after_steps(name, 1)
    assert len(one) > 0
    assert one == _weights_after_steps(name, 2)


@pytest.mark.parametrize("size", [0, 5, SUM_CHUNK, 3 * SUM_CHUNK + 11])
def test_sum_of_squares_is_a_float64_sum(size):
    x = np.random.default_rng(size).standard_normal(size).astype(np.float32)
    expected = float(np.sum(x.astype(np.float64) ** 2))
    assert sum_of_squares(x) == pytest.approx(expected, rel=1e-12, abs=0)


def test_chunk_table_splits_segments_into_chunks_and_blocks():
    c = SUM_CHUNK
    segments = [slice(0, c + 3), slice(c + 3, c + 5), slice(c + 5, 3 * c)]
    lo, hi, first, blocks = chunk_table(segments, block=SUM_CHUNK)
    assert lo.tolist() == [0, SUM_CHUNK, SUM_CHUNK + 3, SUM_CHUNK + 5, 2 * SUM_CHUNK + 5]
    assert hi.tolist() == [SUM_CHUNK, SUM_CHUNK + 3, SUM_CHUNK + 5, 2 * SUM_CHUNK + 5, 3 * SUM_CHUNK]
    assert first.tolist() == [0, 2, 3, 5]
    assert blocks.tolist() == [0, 1, 3]                  # the first segment fills a block
