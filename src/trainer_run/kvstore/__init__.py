"""In-process key-value stores with MXNet 1.9's ``kvstore`` interface.

A kvstore keeps one array per key. ``init`` stores a copy of a value; ``push`` takes one
value or a list of values for a key (one per device or replica), sums them, and the sum
replaces the stored value; ``pull`` copies the stored value into one or more arrays in place;
``pushpull`` is a push followed by a pull, ``broadcast`` an init followed by a pull. This is
how Gluon's Trainer keeps data-parallel replicas in step: ``init`` each parameter once, then
every step ``push`` the replicas' gradients and ``pull`` their sum back into each replica.

``create(name)`` builds one of two types, which differ only in where the sum is computed:

- ``local``: in host memory. Values are brought to host NumPy arrays, summed there, and the
  sum is copied back to each output's own device. Stored values live on the host.
- ``device``: on the device holding the first pushed value, with that value's array module
  (NumPy or CuPy); the other values are moved there first. An initial value is stored on the
  device it came from.

Our rule: values are summed in list order, ``v0 + v1 + v2 + ...``, one addition at a time
into one buffer per key, so a sum does not depend on the store's type or on how many values
there are (MXNet's CPU reduction adds up to four values in one expression,
``v0 += v1 + v2 + v3``). The sum has the stored value's dtype: a value of another dtype is
cast to it before it is added, and float16 keys are summed in float16.

As in MXNet, keys are ints or strs (one kind per store), a key is initialised once, a list of
keys takes a list with one value (or one list of values) per key, and a key given twice in
one call has all its values summed (push) or all its outputs written (pull). Unlike MXNet, a
push of a single value stores a copy of it, never the array itself. Every operation runs to
completion before it returns, so ``priority`` is accepted and has no effect, and ``barrier``
returns at once: the process is worker 0 of 1. There are no sparse arrays, so ``pull``'s
``ignore_sparse`` has nothing to ignore.

Updating on the store (MXNet's ``set_optimizer``, what Gluon's Trainer does with
``update_on_kvstore``): once ``set_optimizer(optimizer)`` is called the store owns an
updater, ``trainer_run.optimizers.get_updater(optimizer)``, and a push no longer replaces
the stored value: the pushed values are summed as above into a buffer of their own and
``updater(key, sum, stored)`` updates the stored weight in place, the key (int or str) being
the optimizer's index, as in MXNet's local store. ``pull`` then returns the updated weight and
``pushpull`` is a push with update followed by a pull. As in MXNet, a weight stored on the
host moves to the device where its gradients are summed before its first update (``device``
type); a sum made elsewhere later is copied to the weight. ``save_optimizer_states`` /
``load_optimizer_states`` write and read the updater's states in its safe format (an ``.npz``
archive with a JSON manifest, read with ``allow_pickle=False``): MXNet's pickled states are
refused, never unpickled. Without an optimizer both raise MXNet's ``AssertionError``.
"""

from __future__ import annotations

import contextlib
import numbers
import os

import numpy

from ..backend import array_module
from ..errors import ConfigError
from ..optimizers import get_updater
from ..optimizers.updater import map_state, state_leaves

__all__ = ["DeviceKVStore", "KVStore", "LocalKVStore", "TYPES", "create"]

HOST = None
"""Where a NumPy array lives; a CuPy array lives on its device's integer id."""


class KVStore:
    """The key handling shared by every store: argument forms, checks and the reduction.

    A subclass sets :attr:`type` and says, through :meth:`_place`, on which device an
    initial value is stored and a pushed list is summed.
    """

    type = ""
    rank = 0
    num_workers = 1
    _updater = None  # set by set_optimizer: pushes then update the stored weights

    def __init__(self):
        self._store: dict = {}  # key -> stored value
        self._merge: dict = {}  # key -> reduction buffer; the stored value after a push
        self._stage: dict = {}  # key -> buffer for addends that live elsewhere or differ in dtype
        self._key_type: type | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(type={self.type!r}, keys={len(self._store)})"

    def _place(self, value):
        """The place (:data:`HOST` or a CuPy device id) where ``value`` is stored or summed."""
        raise NotImplementedError

    # -- the interface --------------------------------------------------------------------
    def init(self, key, value) -> None:
        """Stores a copy of ``value`` under ``key`` (or of each value under each key).

        Args:
            key: an int or str, or a list of them.
            value: an array, or a list with one array per key.
        """
        pairs = [(k, v) for k, arrays in self._pairs(key, value, "values") for v in arrays]
        seen = set(self._store)
        for k, v in pairs:
            if k in seen:
                raise ValueError(f"duplicate init of kvstore key {k!r}: init (or broadcast) "
                                 f"each key once")
            seen.add(k)
            _place_of(v)
        for k, v in pairs:
            self._store[k] = _copy_into(_empty(self._place(v), v.shape, v.dtype), v)

    def push(self, key, value, priority: int = 0) -> None:
        """Sums the values pushed to each key (in list order); the sum replaces the stored value.

        Args:
            key: an int or str, or a list of them.
            value: an array or a list of arrays (one per replica); for a list of keys, a list
                with one array or one list of arrays per key.
            priority: accepted for MXNet compatibility; operations run in call order.
        """
        for k, arrays in self._checked(key, value, "value").items():
            self._push_one(k, arrays)

    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copies the stored value of each key into ``out`` in place.

        Args:
            key: an int or str, or a list of them.
            out: an array or a list of arrays; for a list of keys, a list with one array or
                one list of arrays per key. Each may live on any device.
            priority: accepted for MXNet compatibility; operations run in call order.
            ignore_sparse: accepted for MXNet compatibility; every array here is dense.
        """
        if out is None:
            raise ValueError("kvstore pull needs out=: the array(s) to copy the value into")
        self._copy_out(self._checked(key, out, "out"))

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """Pushes ``value`` then pulls the result into ``out``, or back into ``value`` when
        ``out`` is None (MXNet's in-place form). Both are checked before anything is written.
        """
        values = self._checked(key, value, "value")
        outs = values if out is None else self._checked(key, out, "out")
        for k, arrays in values.items():
            self._push_one(k, arrays)
        self._copy_out(outs)

    def broadcast(self, key, value, out, priority: int = 0) -> None:
        """Initialises ``key`` with ``value`` and pulls it into ``out`` (MXNet 1.9: the key
        must not have been initialised before)."""
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def barrier(self) -> None:
        """Waits for every worker; a no-op, as this process is the only one."""

    # -- updating on the store ------------------------------------------------------------
    def set_optimizer(self, optimizer) -> None:
        """Registers ``optimizer``: from now on a push updates the stored weight with the
        summed values as gradient, through ``trainer_run.optimizers.get_updater(optimizer)``
        with the key as index (MXNet's local store). A new call replaces the updater, and
        with it the optimizer states."""
        self._updater = get_updater(optimizer)

    def save_optimizer_states(self, fname, dump_optimizer: bool = False) -> None:
        """Writes the updater's states to ``fname`` (safe format, no pickle); with
        ``dump_optimizer`` also the optimizer's hyper-parameters, counters and scheduler
        state. The file is replaced atomically."""
        self._need_updater("save")
        blob = self._updater.get_states(dump_optimizer)
        tmp = f"{os.fspath(fname)}.tmp"
        with open(tmp, "wb") as fout:
            fout.write(blob)
        os.replace(tmp, fname)

    def load_optimizer_states(self, fname) -> None:
        """Reads states written by :meth:`save_optimizer_states` (and, if dumped, the
        optimizer's settings and counters). A file that is not such an archive, a pickle
        for one, is refused before anything is read from it; each state is placed where its
        key's weight lives."""
        self._need_updater("load")
        with open(fname, "rb") as fin:
            blob = fin.read()
        if not blob.startswith(_ZIP_MAGIC):
            raise ConfigError(f"{os.fspath(fname)!r} is not an optimizer-states file written by "
                              f"save_optimizer_states (an .npz archive); pickled states, "
                              f"MXNet's format, are refused because unpickling can run code")
        reader = get_updater(self._updater.optimizer)  # the same optimizer: settings load into it
        reader.set_states(blob)  # numpy.load(allow_pickle=False): object arrays are refused too
        states = self._updater.states
        loaded = {str(i) if self._key_type is str else i: s for i, s in reader.states.items()}
        for key, state in loaded.items():  # every existing state is checked before any is written
            if key in states:
                _check_state(key, states[key], state)
        for key, state in loaded.items():
            if key in states:
                for dst, src in zip(state_leaves(states[key]), state_leaves(state)):
                    _copy_into(dst, src)
            elif key in self._store and _place_of(self._store[key]) is not HOST:
                place = _place_of(self._store[key])
                states[key] = map_state(state, lambda a, p=place: _copy_into(
                    _empty(p, a.shape, a.dtype), a))
            else:
                states[key] = state

    def _need_updater(self, verb: str) -> None:
        if self._updater is None:
            # MXNet's assertion text, whatever the store's type
            raise AssertionError(f"Cannot {verb} states for distributed training: this "
                                 f"{self.type or 'kvstore'} store has no optimizer; call "
                                 f"set_optimizer(optimizer) first")

    def _push_one(self, key, arrays) -> None:
        """A push to one key: the sum replaces the stored value or, with an optimizer,
        updates it."""
        if self._updater is None:
            self._store[key] = self._reduce(key, arrays)
            return
        if self._merge.get(key) is self._store[key]:
            del self._merge[key]  # the weight is an earlier push's sum: sum into a new buffer
        merged = self._reduce(key, arrays)
        weight, place = self._store[key], _place_of(merged)
        if _place_of(weight) != place:
            if _place_of(weight) is HOST and key not in self._updater.states:
                weight = self._store[key] = _copy_into(_empty(place, weight.shape, weight.dtype),
                                                       weight)
            else:
                merged = _copy_into(self._staging(key, weight), merged)
        with _on(_place_of(weight)):
            self._updater(key, merged, weight)

    # -- shared machinery -----------------------------------------------------------------
    def _pairs(self, keys, values, what: str) -> list:
        """``[(key, [array, ...]), ...]`` in call order, following MXNet's argument forms."""
        if isinstance(keys, (list, tuple)):
            if not isinstance(values, (list, tuple)) or len(values) != len(keys):
                count = len(values) if isinstance(values, (list, tuple)) else "no list"
                raise ValueError(f"{len(keys)} kvstore keys need a list of {len(keys)} "
                                 f"{what}s, one per key; got {count}")
            return [pair for k, v in zip(keys, values) for pair in self._pairs(k, v, what)]
        key = self._check_key(keys)
        arrays = list(values) if isinstance(values, (list, tuple)) else [values]
        if not arrays:
            raise ValueError(f"kvstore key {key!r}: an empty list of {what}s")
        return [(key, arrays)]

    def _check_key(self, key):
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            key = int(key)
        elif not isinstance(key, str):
            raise TypeError(f"kvstore keys are ints or strs, got {key!r}")
        if self._key_type is None:
            self._key_type = type(key)
        elif type(key) is not self._key_type:
            raise TypeError(f"kvstore key {key!r}: mixed key types are not allowed, this "
                            f"store's keys are {self._key_type.__name__}s")
        return key

    def _checked(self, key, arrays, what: str) -> dict:
        """The arrays grouped by key, each key initialised and each shape its stored one's."""
        groups: dict = {}
        for k, group in self._pairs(key, arrays, what):
            groups.setdefault(k, []).extend(group)
        for k, group in groups.items():
            if k not in self._store:
                raise ValueError(f"kvstore key {k!r} has not been inited: call init({k!r}, "
                                 f"value) first")
            shape = self._store[k].shape
            for a in group:
                _place_of(a)
                if tuple(a.shape) != shape:
                    raise ValueError(f"kvstore key {k!r}: {what} shape {tuple(a.shape)} does "
                                     f"not match the stored shape {shape}")
        return groups

    def _copy_out(self, groups: dict) -> None:
        for k, outs in groups.items():
            for o in outs:
                _copy_into(o, self._store[k])

    def _reduce(self, key, arrays):
        """``arrays[0] + arrays[1] + ...`` into the key's buffer, at ``_place(arrays[0])``."""
        stored = self._store[key]
        place = self._place(arrays[0])
        buf = self._merge.get(key)
        if buf is None or _place_of(buf) != place:
            buf = self._merge[key] = _empty(place, stored.shape, stored.dtype)
        _copy_into(buf, arrays[0])
        xp = array_module(buf)
        with _on(place):
            for a in arrays[1:]:
                if _place_of(a) != place or a.dtype != buf.dtype:
                    a = _copy_into(self._staging(key, buf), a)
                xp.add(buf, a, out=buf)
        return buf

    def _staging(self, key, buf):
        stage = self._stage.get(key)
        if stage is None or _place_of(stage) != _place_of(buf) or stage.dtype != buf.dtype:
            stage = self._stage[key] = _empty(_place_of(buf), buf.shape, buf.dtype)
        return stage


class LocalKVStore(KVStore):
    """``local``: values are stored and summed in host memory, with NumPy."""

    type = "local"

    def _place(self, value):
        return HOST


class DeviceKVStore(KVStore):
    """``device``: a list is summed on the device of its first value, with its array module."""

    type = "device"

    def _place(self, value):
        return _place_of(value)


TYPES = {"local": LocalKVStore, "device": DeviceKVStore}


DIST_TYPES = ("dist_sync", "dist_device_sync", "dist_async")
"""The multi-process types (:mod:`.dist`, over MPI; imported only when asked for)."""


def create(name: str = "local", **options) -> KVStore:
    """Builds the kvstore type ``name`` (case-insensitive, as in MXNet): ``local``, ``device``,
    or one of :data:`DIST_TYPES`; ``options`` go to the store's constructor (e.g. ``timeout``)."""
    if not isinstance(name, str):
        raise ConfigError(f"kvstore type must be a string, got {name!r}")
    key = name.lower()
    if key in DIST_TYPES:
        from . import dist

        return dist.TYPES[key](**options)
    klass = TYPES.get(key)
    if klass is None:
        raise ConfigError(f"kvstore type {name!r} is unknown; choose one of "
                          f"{', '.join([*TYPES, *DIST_TYPES])}")
    return klass(**options)


_ZIP_MAGIC = b"PK\x03\x04"  # how every .npz archive (a zip file) begins


def _check_state(key, existing, loaded) -> None:
    """Raises unless a loaded state has the arrays and shapes of the existing one."""
    existing, loaded = state_leaves(existing), state_leaves(loaded)
    if len(existing) != len(loaded):
        raise ValueError(f"optimizer state for kvstore key {key!r} has {len(loaded)} arrays, "
                         f"expected {len(existing)}")
    for d, s in zip(existing, loaded):
        if tuple(d.shape) != tuple(s.shape):
            raise ValueError(f"optimizer state for kvstore key {key!r} has shape "
                             f"{tuple(s.shape)}, expected {tuple(d.shape)}")


# -- moving data between host and devices ---------------------------------------------------
def _cupy():
    import cupy  # only reached with a CuPy array in hand, so CuPy is installed

    return cupy


def _place_of(a):
    """:data:`HOST` for a NumPy array, the device id for a CuPy array."""
    if isinstance(a, numpy.ndarray):
        return HOST
    if type(a).__module__.split(".")[0] == "cupy" and hasattr(a, "device"):
        return a.device.id
    raise TypeError(f"kvstore values are NumPy or CuPy arrays, got {type(a).__name__}")


def _on(place):
    return contextlib.nullcontext() if place is HOST else _cupy().cuda.Device(place)


def _empty(place, shape, dtype):
    if place is HOST:
        return numpy.empty(shape, dtype)
    cupy = _cupy()
    with cupy.cuda.Device(place):
        return cupy.empty(shape, dtype)


def _copy_into(dst, src):
    """Copies ``src`` into ``dst`` in place, across host and devices, casting to ``dst``'s
    dtype; returns ``dst``."""
    dst_at, src_at = _place_of(dst), _place_of(src)
    direct = (dst.dtype == src.dtype and dst.flags.c_contiguous and src.flags.c_contiguous)
    if dst_at is HOST:
        if src_at is HOST:
            numpy.copyto(dst, src, casting="unsafe")
        elif direct:
            src.get(out=dst)
        else:
            numpy.copyto(dst, src.get(), casting="unsafe")
        return dst
    cupy = _cupy()
    with cupy.cuda.Device(dst_at):
        if src_at is HOST:
            if direct:
                dst.set(src)
            else:
                cupy.copyto(dst, cupy.asarray(src), casting="unsafe")
        elif src_at == dst_at:
            cupy.copyto(dst, src, casting="unsafe")
        elif direct:
            dst.data.copy_from_device(src.data, src.nbytes)
        else:
            cupy.copyto(dst, cupy.copy(src), casting="unsafe")  # cupy.copy: onto the current device
    return dst
