"""Run by tests/kvstore/test_dist_sync.py under ``mpiexec -n N``: dist_sync and dist_device_sync.

Each rank writes what it saw to ``OUT/rank<r>.npz`` (arrays, and error messages as strings).
"""

import hashlib
import sys
import time

import numpy
from common import error_of

from trainer_run.kvstore.dist_sync import DistDeviceSyncKVStore, DistSyncKVStore


def checks(kv, seen: dict) -> None:
    r, t = kv.rank, kv.type
    seen[f"{t}.rank"], seen[f"{t}.num_workers"] = r, kv.num_workers

    # init keeps rank 0's value, on every rank
    kv.init(0, numpy.full((2, 3), r + 1, dtype=numpy.float32))
    out = numpy.zeros((2, 3), numpy.float32)
    kv.pull(0, out=out)
    seen[f"{t}.init"] = out.copy()

    # push a local list, pull the sum over the list and over the ranks
    a = numpy.arange(6, dtype=numpy.float32).reshape(2, 3) * (r + 1)
    kv.push(0, [a, 10 * a])
    kv.pull(0, out=out)
    seen[f"{t}.push_pull"] = out.copy()
    kv.pushpull(0, a, out=out)
    seen[f"{t}.pushpull"] = out.copy()
    b = a.copy()
    kv.pushpull(0, b)  # in place
    seen[f"{t}.pushpull_inplace"] = b

    # several keys of different sizes (and a float16 key) in one call
    sizes = {1: 1, 2: 1000, 3: 100_003}
    kv.init(list(sizes), [numpy.zeros(n, numpy.float32) for n in sizes.values()])
    values = [numpy.arange(n, dtype=numpy.float32) % 7 + r for n in sizes.values()]
    outs = [numpy.zeros_like(v) for v in values]
    kv.pushpull(list(sizes), values, out=outs)
    for k, o in zip(sizes, outs):
        seen[f"{t}.key{k}"] = o
    kv.init(4, numpy.zeros(513, numpy.float16))
    h = (numpy.arange(513) % 11 - 5 + r).astype(numpy.float16)
    kv.pushpull(4, h)
    seen[f"{t}.float16"] = h

    # random float32: every rank must receive the same bytes
    kv.init(5, numpy.zeros(300_001, numpy.float32))
    rng = numpy.random.default_rng(1000 + r)
    x = (rng.standard_normal(300_001) * 10 ** rng.uniform(-3, 3, 300_001)).astype(numpy.float32)
    kv.pushpull(5, x)
    seen[f"{t}.digest"] = hashlib.sha256(x.tobytes()).hexdigest()

    # barrier: nobody leaves before the last one arrives
    if r == 1:
        time.sleep(0.3)
    seen[f"{t}.barrier_in"] = time.time()
    kv.barrier()
    seen[f"{t}.barrier_out"] = time.time()

    # MXNet's refusals
    seen[f"{t}.ignore_sparse"] = error_of(lambda: kv.pull(0, out=out, ignore_sparse=False))
    seen[f"{t}.dtype"] = error_of(lambda: kv.pushpull(0, a, out=numpy.zeros((2, 3))))
    seen[f"{t}.before_init"] = error_of(lambda: kv.pull(6, out=out))
    seen[f"{t}.twice"] = error_of(lambda: kv.init(0, a))
    seen[f"{t}.mismatch"] = error_of(lambda: kv.init(7, numpy.zeros(3 if r == 0 else 4)))
    kv.init(8, numpy.zeros(3, numpy.float32))  # the store still works after the refusals
    kv.pushpull(8, numpy.ones(3, numpy.float32), out=out[0])
    seen[f"{t}.after"] = out[0].copy()


def main(out_dir: str) -> None:
    seen: dict = {}
    for cls in (DistSyncKVStore, DistDeviceSyncKVStore):
        checks(cls(timeout=30), seen)
    blocking = DistSyncKVStore(timeout=None)  # MPI_Allreduce / MPI_Bcast / MPI_Barrier
    blocking.init("w", numpy.full(5, blocking.rank + 7, dtype=numpy.float32))
    w = numpy.zeros(5, numpy.float32)
    blocking.pull("w", out=w)
    seen["blocking.init"] = w.copy()
    blocking.pushpull("w", numpy.full(5, blocking.rank + 1, dtype=numpy.float32), out=w)
    blocking.barrier()
    seen["blocking.sum"] = w
    numpy.savez(f"{out_dir}/rank{blocking.rank}.npz", **seen)


if __name__ == "__main__":
    main(sys.argv[1])
