"""Run by tests/kvstore/test_dist_sync.py and test_worker.py under mpiexec: ranks that stop,
stores that must not hang.

Modes (argv[2]):

- ``sync_dead`` (2 ranks): rank 1 exits before the second sum; rank 0 must raise RunStopped
  within the timeout, and keep raising it.
- ``async_dead`` (3 ranks): worker 1 pushes once and exits without close(); worker 0 goes on,
  then its close() and the server must raise RunStopped within the timeout.
- ``async_updater`` (3 ranks): the server's updater raises at its third update; both workers
  get RunStopped with its message at their next pull, and the server re-raises it without
  waiting for a timeout.
- ``async_stop <who>`` (3 ranks): a stop signal (15) is asked for by worker 1 after 7 pushes
  (``worker``), or by the server after 20 requests (``server``); each worker pushes until it
  has learned of it, then asks to stop too, except with ``closed``, where worker 1 asks and
  worker 0 closes on learning of it instead.

Each rank that stays writes ``OUT/rank<r>.npz``: the error it got and the seconds it waited.
"""

import sys
import time

import numpy

from trainer_run import optimizers
from trainer_run.errors import RunStopped
from trainer_run.kvstore.dist_sync import DistSyncKVStore
from trainer_run.kvstore.worker import DistAsyncKVStore

SHORT, LONG = 2.0, 30.0


def waited(call, catch=RunStopped) -> dict:
    start = time.monotonic()
    try:
        call()
    except catch as e:
        return {"error": f"{type(e).__name__}: {e}", "seconds": time.monotonic() - start}
    return {"error": "", "seconds": time.monotonic() - start}


def sync_dead(out_dir: str) -> None:
    kv = DistSyncKVStore(timeout=SHORT)
    kv.init(0, numpy.zeros(10, numpy.float32))
    kv.pushpull(0, numpy.ones(10, numpy.float32))
    if kv.rank == 1:
        sys.exit(0)
    seen = waited(lambda: kv.pushpull(0, numpy.ones(10, numpy.float32)))
    seen["again"] = waited(kv.barrier)["error"]  # the store stays stopped
    numpy.savez(f"{out_dir}/rank{kv.rank}.npz", **seen)


def sgd():
    return optimizers.create("sgd", learning_rate=0.5)


def async_dead(out_dir: str) -> None:
    kv = DistAsyncKVStore(timeout=SHORT)
    if kv.is_server:
        seen = waited(lambda: kv.run_server(optimizers.get_updater(sgd())))
        numpy.savez(f"{out_dir}/rank{kv.server_rank}.npz", **seen)
        return
    kv.init(0, numpy.zeros(10, numpy.float32))
    kv.set_optimizer(sgd())
    kv.push(0, numpy.ones(10, numpy.float32))
    if kv.rank == 1:
        sys.exit(0)
    for _ in range(3):  # worker 0 goes on alone, then closes
        kv.pushpull(0, numpy.ones(10, numpy.float32))
    seen = waited(kv.close)
    numpy.savez(f"{out_dir}/rank{kv.rank}.npz", **seen)


def async_updater(out_dir: str) -> None:
    kv = DistAsyncKVStore(timeout=LONG)
    if kv.is_server:
        calls = []

        def updater(key, grad, weight):
            calls.append(key)
            if len(calls) == 3:
                raise FloatingPointError("the third update blew up")
            weight -= grad

        seen = waited(lambda: kv.run_server(updater), catch=Exception)
        numpy.savez(f"{out_dir}/rank{kv.server_rank}.npz", **seen)
        return
    kv.init(0, numpy.zeros(10, numpy.float32))

    def train():  # the other worker may make the server fail before this one starts
        kv.set_optimizer(sgd())
        for _ in range(5):
            kv.pushpull(0, numpy.ones(10, numpy.float32))

    seen = waited(train)
    seen["close"] = waited(kv.close)["error"]  # a stopped store closes quietly
    numpy.savez(f"{out_dir}/rank{kv.rank}.npz", **seen)


def async_stop(out_dir: str, who: str) -> None:
    kv = DistAsyncKVStore(timeout=LONG)
    if kv.is_server:
        requests = []

        def stop_requested():
            requests.append(1)
            return 15 if who == "server" and len(requests) >= 20 else None

        kv.run_server(optimizers.get_updater(sgd()), stop_requested)
        numpy.savez(f"{out_dir}/rank{kv.server_rank}.npz", stop_signal=kv.stop_signal or 0)
        return
    kv.init(0, numpy.zeros(10, numpy.float32))
    kv.set_optimizer(sgd())
    pushes = 0
    while kv.stop_signal is None and not (who != "server" and kv.rank == 1 and pushes == 7):
        kv.pushpull(0, numpy.ones(10, numpy.float32))
        pushes += 1
    learned = kv.stop_signal or 0
    if who == "closed" and kv.rank == 0:
        after = -2
    else:
        after = kv.stop_at(learned or 15, pushes)
    kv.close()
    numpy.savez(f"{out_dir}/rank{kv.rank}.npz", pushes=pushes, learned=learned,
                after=-1 if after is None else after)


if __name__ == "__main__":
    {"sync_dead": sync_dead, "async_dead": async_dead, "async_updater": async_updater,
     "async_stop": async_stop}[sys.argv[2]](sys.argv[1], *sys.argv[3:])
