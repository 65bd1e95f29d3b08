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

Gradient compression (MXNet's ``set_gradient_compression``, 2-bit only; the rule and the wire
layout are in :mod:`.compression`): ``set_gradient_compression({'type': '2bit', 'threshold':
t})`` makes every later push of a float32 key send its values quantized to ``+t``, ``-t`` or 0,
the rest carried in a residual to the next push. ``device``: as MXNet's
``CommDevice::ReduceCompressed``, each position ``i`` of a pushed list (each source replica)
keeps its own float32 residual per key, zero at first, on the device of the value it
quantizes; every value is quantized there, even a single pushed value or one already on the
summing device (MXNet: so that training is not biased towards that device's data); the packed
words move to the device of the first value, are dequantized there and summed in list order
into the key's buffer. The sum then replaces the stored value or, with ``set_optimizer``, is
the gradient the update sees. Pulls are not compressed. ``local`` refuses, with MXNet's
message ("Gradient compression is not supported for this type of kvstore"). The
multi-process types are in :mod:`.dist`.

- When: before the store's first push (after ``init`` is fine; Gluon's Trainer and MXNet's
  Module call it before ``init``); later calls raise ValueError. MXNet has no check, but its
  device store sets up the per-source residuals on the first reduce, so compression switched
  on after a push of several values finds none. A second call before the first push replaces
  the first; compression cannot be switched off (MXNet: "no support for unsetting").
- Which keys: float32 keys are compressed, and every value pushed to them must be float32
  (MXNet's kernels read float32 only). A push to a float16 key is refused with a
  :class:`~trainer_run.errors.ConfigError` naming the key (MXNet: "Gradient compression is
  only supported for float32 type of parameters"): half-precision gradients would otherwise go
  uncompressed without a word. Keys of other dtypes (float64, integers) are summed exactly, as
  without compression, where MXNet refuses them too: our updaters sum their float64 metrics
  through the same store as the gradients.
- Cost: per key and source a float32 residual and ``ceil(n / 16)`` packed words, allocated on
  the first compressed push of the key; none per push after that.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path

import numpy

from .. import files
from ..backend import array_module
from ..errors import ConfigError
from ..optimizers import get_updater
from ..states import check_state, map_state
from .compression import GradientCompression
from .placement import HOST, copy_into, empty_on, on_device, place_of, zeros_on

__all__ = ["DeviceKVStore", "KVStore", "LocalKVStore", "TYPES", "create"]

class KVStore:
    """The key handling shared by every store: argument forms, checks and the reduction.

    A subclass sets :attr:`type` and says, through :meth:`_place`, on which device an
    initial value is stored and a pushed list is summed.
    """

    type = ""
    rank = 0
    num_workers = 1
    _updater = None  # set by set_optimizer: pushes then update the stored weights
    _compression = None  # set by set_gradient_compression: pushes of float32 keys are quantized
    _pushed = False  # whether a push has been accepted (compression must be set before)

    def __init__(self):
        self._store: dict = {}  # key -> stored value
        self._merge: dict = {}  # key -> reduction buffer; the stored value after a push
        self._stage: dict = {}  # key -> buffer for addends that live elsewhere or differ in dtype
        self._residuals: dict = {}  # key -> [(residual, packed words)], one pair per source
        self._inbox: dict = {}  # key -> packed words received from other devices or ranks
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
            place_of(v)
        for k, v in pairs:
            self._store[k] = copy_into(empty_on(self._place(v), v.shape, v.dtype), v)

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

    def close(self) -> None:
        """Ends this worker's use of the store (``dist_async``: the server stops once every
        worker has closed); nothing to do in one process."""

    def abort(self, reason: str) -> None:
        """This process stops with an error: the other processes raise
        :class:`~trainer_run.errors.RunStopped` with ``reason`` at their next or current
        exchange instead of waiting for it; nothing to tell in one process."""

    # -- updating on the store ------------------------------------------------------------
    def set_optimizer(self, optimizer) -> None:
        """Registers ``optimizer``: from now on a push updates the stored weight with the
        summed values as gradient, through ``trainer_run.optimizers.get_updater(optimizer)``
        with the key as index (MXNet's local store). A new call replaces the updater, and
        with it the optimizer states."""
        self._updater = get_updater(optimizer)

    # -- gradient compression -------------------------------------------------------------
    def set_gradient_compression(self, compression_params) -> None:
        """Quantizes every later push of a float32 key with MXNet's 2-bit compression (module
        docstring): ``compression_params`` is ``{'type': '2bit', 'threshold': t}`` (threshold
        0.5 when left out). Call it before the first push; a second call before then replaces
        the first.

        Raises:
            ConfigError: params that are not MXNet's 2-bit compression.
            ValueError: after a push.
        """
        self._compression = self._new_compression(compression_params)

    def _new_compression(self, compression_params) -> GradientCompression:
        """The compression of ``compression_params``, once this store may still take it."""
        if self._pushed:
            raise ValueError(f"kvstore {self.type}: set_gradient_compression after a push; call it "
                             f"before the first push (after init is fine), as Gluon's Trainer "
                             f"does, so that every push of a key is compressed with its residual")
        return GradientCompression(compression_params)

    def _compresses(self, key) -> bool:
        """Whether pushes to ``key`` are compressed: compression is set and the key is float32."""
        return self._compression is not None and self._store[key].dtype == numpy.float32

    def _check_compressible(self, key, arrays) -> None:
        """Refuses a push that compression cannot take: to a float16 key, or of a value that
        is not float32 to a float32 key."""
        dtype = self._store[key].dtype
        if dtype == numpy.float16:
            raise ConfigError(f"kvstore key {key!r} holds float16 values: gradient compression "
                              f"works on float32 keys only (MXNet: \"Gradient compression is only "
                              f"supported for float32 type of parameters\"); train in float32 "
                              f"(precision=fp32) or turn compression off")
        if dtype != numpy.float32:
            return
        for a in arrays:
            if a.dtype != numpy.float32:
                raise ConfigError(f"kvstore key {key!r}: a {a.dtype} value pushed to a compressed "
                                  f"float32 key; with gradient compression every pushed value "
                                  f"must be float32 (MXNet's kernels read float32 only)")

    def _quantized(self, key, value, source: int = 0):
        """``value`` quantized with the residual of ``source`` for ``key``, on ``value``'s
        device: the packed words, in a buffer of ``source`` that the next push reuses."""
        residual, packed = self._sender(key, source, value)
        with on_device(place_of(value)):
            return self._compression.quantize(value, residual, out=packed)

    def _sender(self, key, source: int, value) -> tuple:
        """The residual (zero at first) and packed-word buffer of ``source`` for ``key``, on
        ``value``'s device; a residual whose source moved to another device moves with it."""
        pairs = self._residuals.setdefault(key, [])
        pairs.extend([None] * (source + 1 - len(pairs)))
        place, n = place_of(value), value.size
        pair = pairs[source]
        if pair is None or place_of(pair[0]) != place:
            words = self._compression.get_compressed_size(n)
            residual = (zeros_on(place, (n,), numpy.float32) if pair is None else
                        copy_into(empty_on(place, (n,), numpy.float32), pair[0]))
            pair = pairs[source] = (residual, empty_on(place, (words,), numpy.uint32))
        return pair

    def save_optimizer_states(self, fname, dump_optimizer: bool = False) -> None:
        """Writes :meth:`get_optimizer_states` to ``fname``, replacing it atomically
        (:func:`trainer_run.files.write_atomic`: a refused write raises StorageError naming
        the file and leaves it as it was)."""
        files.write_atomic(Path(fname), self.get_optimizer_states(dump_optimizer))

    def load_optimizer_states(self, fname) -> None:
        """Reads a file written by :meth:`save_optimizer_states` into
        :meth:`set_optimizer_states`. A file that is not such an archive, a pickle for one,
        is refused before anything is read from it."""
        self._need_updater("load")
        with open(fname, "rb") as fin:
            blob = fin.read()
        if not blob.startswith(_ZIP_MAGIC):
            raise ConfigError(f"{os.fspath(fname)!r} is not an optimizer-states file written by "
                              f"save_optimizer_states (an .npz archive); pickled states, "
                              f"MXNet's format, are refused because unpickling can run code")
        self.set_optimizer_states(blob)

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The updater's states in the safe format (an ``.npz`` archive with a JSON manifest,
        no pickle); with ``dump_optimizer`` also the optimizer's hyper-parameters, counters and
        scheduler state."""
        self._need_updater("save")
        return self._updater.get_states(dump_optimizer)

    def set_optimizer_states(self, blob: bytes) -> None:
        """Restores :meth:`get_optimizer_states` output (and, if dumped, the optimizer's
        settings and counters): every state is checked against the existing one before any is
        written, and each is placed where its key's weight lives."""
        self._need_updater("load")
        reader = get_updater(self._updater.optimizer)  # the same optimizer: settings load into it
        reader.set_states(blob)  # numpy.load(allow_pickle=False): object arrays are refused too
        states = self._updater.states
        loaded = {str(i) if self._key_type is str else i: s for i, s in reader.states.items()}
        pairs = {key: check_state(f"kvstore key {key!r}", states[key], state)  # all, then write
                 for key, state in loaded.items() if key in states}
        for key, state in loaded.items():
            if key in states:
                for dst, src in zip(*pairs[key]):
                    copy_into(dst, src)
            elif key in self._store and place_of(self._store[key]) is not HOST:
                place = place_of(self._store[key])
                states[key] = map_state(state, lambda a, p=place: copy_into(
                    empty_on(p, a.shape, a.dtype), a))
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
        weight, place = self._store[key], place_of(merged)
        if place_of(weight) != place:
            if place_of(weight) is HOST and key not in self._updater.states:
                weight = self._store[key] = copy_into(empty_on(place, weight.shape, weight.dtype),
                                                       weight)
            else:
                merged = copy_into(self._staging(key, weight), merged)
        with on_device(place_of(weight)):
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
                place_of(a)
                if tuple(a.shape) != shape:
                    raise ValueError(f"kvstore key {k!r}: {what} shape {tuple(a.shape)} does "
                                     f"not match the stored shape {shape}")
        if what == "value":  # a push: the last checks, then it counts as made
            if self._compression is not None:
                for k, group in groups.items():
                    self._check_compressible(k, group)
            self._pushed = True
        return groups

    def _copy_out(self, groups: dict) -> None:
        for k, outs in groups.items():
            for o in outs:
                copy_into(o, self._store[k])

    def _reduce(self, key, arrays):
        """``arrays[0] + arrays[1] + ...`` into the key's buffer, at ``_place(arrays[0])``."""
        place = self._place(arrays[0])
        buf = self._merge_buffer(key, place)
        copy_into(buf, arrays[0])
        xp = array_module(buf)
        with on_device(place):
            for a in arrays[1:]:
                if place_of(a) != place or a.dtype != buf.dtype:
                    a = copy_into(self._staging(key, buf), a)
                xp.add(buf, a, out=buf)
        return buf

    def _merge_buffer(self, key, place):
        """The key's reduction buffer at ``place`` (a new one when it lives elsewhere)."""
        stored, buf = self._store[key], self._merge.get(key)
        if buf is None or place_of(buf) != place:
            buf = self._merge[key] = empty_on(place, stored.shape, stored.dtype)
        return buf

    def _staging(self, key, buf):
        stage = self._stage.get(key)
        if stage is None or place_of(stage) != place_of(buf) or stage.dtype != buf.dtype:
            stage = self._stage[key] = empty_on(place_of(buf), buf.shape, buf.dtype)
        return stage


class LocalKVStore(KVStore):
    """``local``: values are stored and summed in host memory, with NumPy."""

    type = "local"

    def _place(self, value):
        return HOST

    def set_gradient_compression(self, compression_params) -> None:
        """Refused, as in MXNet: only ``device`` and the dist types compress."""
        raise ConfigError("Gradient compression is not supported for this type of kvstore: "
                          "local sums in host memory; use kvstore device (or a dist type)")


class DeviceKVStore(KVStore):
    """``device``: a list is summed on the device of its first value, with its array module;
    with gradient compression each value is quantized first (MXNet's ReduceCompressed)."""

    type = "device"

    def _place(self, value):
        return place_of(value)

    def _reduce(self, key, arrays):
        if not self._compresses(key):
            return super()._reduce(key, arrays)
        return self._reduce_compressed(key, arrays)

    def _reduce_compressed(self, key, arrays):
        """Each value quantized with its position's residual on its own device, the words
        moved to ``_place(arrays[0])``, dequantized there and summed in list order into the
        key's buffer."""
        place = self._place(arrays[0])
        buf = self._merge_buffer(key, place)
        gc, n = self._compression, buf.size
        xp = array_module(buf)
        for i, a in enumerate(arrays):
            packed = self._quantized(key, a, i)
            if place_of(packed) != place:
                packed = copy_into(self._received(key, i, place, packed.size), packed)
            with on_device(place):
                if i == 0:
                    gc.dequantize(packed, n, out=buf)
                else:
                    addend = gc.dequantize(packed, n, out=self._staging(key, buf))
                    xp.add(buf, addend, out=buf)
        return buf

    def _received(self, key, source: int, place, words: int):
        """The buffer at ``place`` for the packed words of ``source`` (on another device)."""
        boxes = self._inbox.setdefault(key, [])
        boxes.extend([None] * (source + 1 - len(boxes)))
        box = boxes[source]
        if box is None or place_of(box) != place:
            box = boxes[source] = empty_on(place, (words,), numpy.uint32)
        return box


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
