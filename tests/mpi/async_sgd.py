"""Run by tests/kvstore/test_worker.py under ``mpiexec -n 3``: dist_async, 1 server + 2 workers.

The server (the last rank) applies plain SGD, ``w -= lr * g``, to every push as it arrives.
Worker 1 starts pushing only after a pause, so worker 0's pulls in between must show its own
pushes alone, and come without waiting for worker 1. The steps alternate a push of a local list
then a pull, and a ``pushpull`` (one round trip) of lone arrays into the outputs and into a
strided copy (first or second of a key's outputs), its gradients carrying a loss scale that
the server's optimizer step divides out (exactly: a power of two). Each rank writes ``OUT/rank<r>.npz``.
"""

import pickle
import sys
import tempfile
import time

import numpy
from common import error_of

from trainer_run import optimizers
from trainer_run.kvstore.worker import DistAsyncKVStore

LR, STEPS, PAUSE, SCALE = 0.5, 8, 1.0, 4.0
SHAPES = {0: (2, 3), 1: (1000,), 2: (7,)}


def initial(rank: int) -> list:
    # worker 0's values are kept; the others' are only checked for shape and dtype
    return [numpy.arange(numpy.prod(s), dtype=numpy.float32).reshape(s) % 5 + 100 * rank
            for s in SHAPES.values()]


def worker(kv, seen: dict) -> None:
    r = kv.rank
    kv.init(list(SHAPES), initial(r))
    outs = [numpy.zeros(s, numpy.float32) for s in SHAPES.values()]
    kv.pull(list(SHAPES), out=outs)
    seen["pulled_init"] = numpy.concatenate([o.ravel() for o in outs])
    kv.barrier()  # both have pulled before anyone pushes
    seen["before_optimizer"] = error_of(lambda: kv.push(0, outs[0]))
    kv.set_optimizer(optimizers.create("sgd", learning_rate=LR))
    if r == 1:
        time.sleep(PAUSE)
    rng = numpy.random.default_rng(r)
    pushed, pulls = [], []
    start = time.monotonic()
    strided = [numpy.zeros((*s[:-1], 2 * s[-1]), numpy.float32)[..., ::2] for s in SHAPES.values()]
    for step in range(STEPS):
        grads = [rng.integers(-4, 5, size=s).astype(numpy.float32) for s in SHAPES.values()]
        if step % 2:
            pairs = [[o, s] if k % 2 else [s, o] for k, o, s in zip(SHAPES, outs, strided)]
            scaled = [g * SCALE for g in grads]  # the server's step divides the scale out
            kv.pushpull(list(SHAPES), scaled, out=pairs, scale=SCALE)
            seen["strided_copy"] = seen.get("strided_copy", True) and all(
                numpy.array_equal(o, s) for o, s in zip(outs, strided))
        else:
            halves = [[g - 1, numpy.ones_like(g)] for g in grads]  # a local list, summed first
            kv.push(list(SHAPES), halves)
            kv.pull(list(SHAPES), out=outs)
        pushed.append(numpy.concatenate([g.ravel() for g in grads]))
        pulls.append(numpy.concatenate([o.ravel() for o in outs]))
    seen["seconds"] = time.monotonic() - start
    seen["pushed"], seen["pulls"] = numpy.stack(pushed), numpy.stack(pulls)
    seen["ignore_sparse"] = error_of(lambda: kv.pull(0, out=outs[0], ignore_sparse=False))
    seen["dtype"] = error_of(lambda: kv.pushpull(0, outs[0], out=numpy.zeros(SHAPES[0])))
    kv.barrier()  # both workers have pushed everything
    kv.pull(list(SHAPES), out=outs)
    seen["final"] = numpy.concatenate([o.ravel() for o in outs])
    seen["num_update"] = kv.num_update
    states(kv, seen)
    kv.close()
    seen["after_close"] = error_of(lambda: kv.pull(0, out=outs[0]))


def states(kv, seen: dict) -> None:
    """The server's optimizer states, through the store (get, save, load) and refused."""
    reader = optimizers.get_updater(optimizers.create("sgd", learning_rate=LR))
    reader.set_states(kv.get_optimizer_states(dump_optimizer=True))
    seen["states_num_update"] = reader.optimizer.num_update
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/states.npz"
        seen["save_load"] = error_of(lambda: (kv.save_optimizer_states(path, dump_optimizer=True),
                                              kv.load_optimizer_states(path)))
    seen["load_pickle"] = error_of(lambda: kv.set_optimizer_states(pickle.dumps({"a": 1})))


def no_updater(kv, seen: dict) -> None:
    """A second store whose server has no updater: set_optimizer is refused."""
    if kv.is_server:
        kv.run_server()
        return
    seen["no_updater"] = error_of(lambda: kv.set_optimizer(optimizers.create("sgd")))
    seen["pull_before_init"] = error_of(lambda: kv.pull(3, out=numpy.zeros(3)))
    kv.close()


def main(out_dir: str) -> None:
    kv = DistAsyncKVStore(timeout=30)
    seen = {"num_workers": kv.num_workers, "is_server": kv.is_server}
    if kv.is_server:
        seen["worker_call"] = error_of(lambda: kv.init(0, numpy.zeros(3)))
        final = kv.run_server(optimizers.get_updater(optimizers.create("sgd", learning_rate=LR)))
        seen["final"] = numpy.concatenate([final[k].ravel() for k in SHAPES])
        seen["initial"] = numpy.concatenate([v.ravel() for v in initial(0)])
    else:
        seen["rank"] = kv.rank
        worker(kv, seen)
    no_updater(DistAsyncKVStore(timeout=30), seen)
    rank = kv.server_rank if kv.is_server else kv.rank
    numpy.savez(f"{out_dir}/rank{rank}.npz", **seen)


if __name__ == "__main__":
    main(sys.argv[1])
