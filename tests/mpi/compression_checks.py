"""Run by tests/kvstore/test_kvstore_compression.py under ``mpiexec``: 2-bit gradient compression on the
MPI stores. ``sync [threshold]``: dist_sync and dist_device_sync on every rank; ``async``:
dist_async, the last rank serving. Each rank writes what it pushed and pulled (and error messages, as strings)
to ``OUT/rank<r>.npz``; the test recomputes the sums by hand from the pushed values.
"""

import sys

import numpy
from common import error_of

from trainer_run import optimizers
from trainer_run.kvstore.dist_sync import DistDeviceSyncKVStore, DistSyncKVStore
from trainer_run.kvstore.worker import DistAsyncKVStore

THRESHOLD, STEPS = 0.5, 5  # sync: the threshold may be given after the mode
SHAPES = {0: (37,), 1: (3, 5)}  # 37: the last packed word is partly padding


def local_lists(rank: int, step: int) -> list:
    """Per key, this rank's local list of 2 values: multiples of 1/16 in [-0.5, 0.5]."""
    rng = numpy.random.default_rng([rank, step])
    return [[(rng.integers(-8, 9, size=s) / 16).astype(numpy.float32) for _ in range(2)]
            for s in SHAPES.values()]


def compressed_steps(kv, seen: dict, prefix: str) -> None:
    """STEPS pushes of every key's local list: key 0 by push + pull, key 1 by pushpull."""
    outs = [numpy.zeros(s, numpy.float32) for s in SHAPES.values()]
    pushed, pulled = [], []
    for step in range(STEPS):
        lists = local_lists(kv.rank, step)
        kv.push(0, lists[0])
        kv.pull(0, out=outs[0])
        kv.pushpull(1, lists[1], out=outs[1])
        pushed.append(numpy.concatenate([v.ravel() for values in lists for v in values]))
        pulled.append(numpy.concatenate([o.ravel() for o in outs]))
    seen[f"{prefix}.pushed"], seen[f"{prefix}.pulled"] = numpy.stack(pushed), numpy.stack(pulled)


def sync_checks(cls, seen: dict, threshold: float) -> None:
    kv = cls(timeout=30)
    r, t = kv.rank, kv.type
    seen["rank"] = r
    kv.init(list(SHAPES), [numpy.zeros(s, numpy.float32) for s in SHAPES.values()])
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})  # after init: allowed
    compressed_steps(kv, seen, t)

    # in-place pushpull of one array (the uncompressed fast path must not be taken)
    kv.init(2, numpy.zeros(20, numpy.float32))
    x = numpy.full(20, 0.25 * (r + 1), numpy.float32)
    kv.pushpull(2, x)
    seen[f"{t}.in_place"] = x
    # a float64 key is summed exactly; float16 and float64 values of a float32 key are refused
    kv.init([3, 4], [numpy.zeros(4, numpy.float64), numpy.zeros(4, numpy.float16)])
    y = numpy.full(4, 0.125 * (r + 1))  # compressed, it would sum to 0 (below the threshold)
    kv.pushpull(3, y)
    seen[f"{t}.float64"] = y
    seen[f"{t}.float16"] = error_of(lambda: kv.push(4, numpy.zeros(4, numpy.float16)))
    seen[f"{t}.value_dtype"] = error_of(lambda: kv.push(2, numpy.zeros(20)))
    seen[f"{t}.after_push"] = error_of(lambda: kv.set_gradient_compression({"type": "2bit"}))


def sync_agreement(seen: dict) -> None:
    """Every rank must set the same params: a mismatch or a refusal raises on every rank."""
    kv = DistSyncKVStore(timeout=30)
    r = kv.rank
    seen["mismatch"] = error_of(lambda: kv.set_gradient_compression(
        {"type": "2bit", "threshold": 0.5 if r == 0 else 0.25}))
    seen["refused"] = error_of(lambda: kv.set_gradient_compression(
        {"type": "2bit", "threshold": 0.5 if r == 0 else -1}))


def sync_blocking_and_optimizer(seen: dict, threshold: float) -> None:
    """timeout=None (blocking Allgather), and update on the store: SGD with learning rate 1."""
    kv = DistSyncKVStore(timeout=None)
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})  # before init, as Gluon
    kv.init(0, numpy.full(37, 2.0, numpy.float32))
    kv.set_optimizer(optimizers.create("sgd", learning_rate=1.0))
    out = numpy.zeros(37, numpy.float32)
    weights = []
    for step in range(STEPS):
        kv.push(0, local_lists(kv.rank, step)[0])
        kv.pull(0, out=out)
        weights.append(out.copy())
    kv.barrier()
    seen["sgd.weights"] = numpy.stack(weights)


def run_sync(out_dir: str, threshold: str = str(THRESHOLD)) -> None:
    seen: dict = {}
    for cls in (DistSyncKVStore, DistDeviceSyncKVStore):
        sync_checks(cls, seen, float(threshold))
    sync_agreement(seen)
    sync_blocking_and_optimizer(seen, float(threshold))
    numpy.savez(f"{out_dir}/rank{seen['rank']}.npz", **seen)


def initial() -> list:
    return [(numpy.arange(numpy.prod(s)).reshape(s) % 9 / 8).astype(numpy.float32)
            for s in SHAPES.values()]


def async_worker(kv, seen: dict) -> None:
    kv.set_gradient_compression({"type": "2bit", "threshold": THRESHOLD})  # before init, as Gluon
    kv.init(list(SHAPES), initial())
    kv.set_optimizer(optimizers.create("sgd", learning_rate=1.0))
    pushed = []
    for step in range(STEPS):
        lists = local_lists(kv.rank, step)
        kv.push(list(SHAPES), lists)
        pushed.append(numpy.concatenate([v.ravel() for values in lists for v in values]))
    seen["pushed"] = numpy.stack(pushed)
    seen["after_push"] = error_of(lambda: kv.set_gradient_compression({"type": "2bit"}))
    kv.barrier()  # every worker's pushes have been applied
    outs = [numpy.zeros(s, numpy.float32) for s in SHAPES.values()]
    kv.pull(list(SHAPES), out=outs)
    seen["final"] = numpy.concatenate([o.ravel() for o in outs])
    kv.close()


def async_mismatch(kv, seen: dict) -> None:
    """Worker 1 sets another threshold than worker 0: its next barrier raises the refusal."""
    if kv.is_server:
        kv.run_server()
        return
    if kv.rank == 0:
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.barrier()  # the server has worker 0's threshold
    if kv.rank == 1:
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.25})
    seen["mismatch"] = error_of(kv.barrier)
    kv.close()


def run_async(out_dir: str) -> None:
    kv = DistAsyncKVStore(timeout=30)
    seen: dict = {}
    if kv.is_server:
        seen["server_call"] = error_of(lambda: kv.set_gradient_compression({"type": "2bit"}))
        final = kv.run_server(optimizers.get_updater(optimizers.create("sgd", learning_rate=1.0)))
        seen["final"] = numpy.concatenate([final[k].ravel() for k in SHAPES])
        seen["initial"] = numpy.concatenate([v.ravel() for v in initial()])
    else:
        async_worker(kv, seen)
    async_mismatch(DistAsyncKVStore(timeout=30), seen)
    rank = kv.server_rank if kv.is_server else kv.rank
    numpy.savez(f"{out_dir}/rank{rank}.npz", **seen)


if __name__ == "__main__":
    {"sync": run_sync, "async": run_async}[sys.argv[2]](sys.argv[1], *sys.argv[3:])
