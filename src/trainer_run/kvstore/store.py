"""The key/value semantics every kvstore shares, MXNet 1.9's ``kvstore`` interface.

A kvstore keeps one array per key. ``init`` stores a copy of a value; ``push`` takes one
value or a list of values for a key (one per device or replica), sums them, and the sum
replaces the stored value; ``pull`` copies the stored value into one or more arrays in place;
``pushpull`` is a push followed by a pull, ``broadcast`` an init followed by a pull. This is
how Gluon's Trainer keeps data-parallel replicas in step: ``init`` each parameter once, then
every step ``push`` the replicas' gradients and ``pull`` their sum back into each replica.

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
applier, ``trainer_run.optimizers.get_updater(optimizer)``, and a push no longer replaces
the stored value: the pushed values are summed as above into a buffer of their own and
``applier(key, sum, stored)`` updates the stored weight in place, the key (int or str) being
the optimizer's index, as in MXNet's local store. ``pull`` then returns the updated weight and
``pushpull`` is a push with update followed by a pull. As in MXNet, a weight stored on the
host moves to the device where its gradients are summed before its first update (``device``
type); a sum made elsewhere later is copied to the weight. ``save_optimizer_states`` /
``load_optimizer_states`` write and read the applier's states as :mod:`.state_files` says.
Without an optimizer both raise MXNet's ``AssertionError``.

Gradient compression (``set_gradient_compression``): when it may be called and which pushes it
takes are :mod:`.push_compression`'s; where the values are quantized and summed is each type's.
"""

from __future__ import annotations

import numbers

import numpy

from ..backend import array_module
from ..optimizers import get_updater
from ..optimizers.optimizer import index_key
from . import state_files
from .compression import GradientCompression
from .placement import HOST, copy_into, empty_on, on_device, place_of
from .push_compression import SourceResiduals, check_compressible

__all__ = ["KVStore", "check_out_dtype"]


class KVStore:
    """The key handling shared by every store: argument forms, checks and the reduction.

    A subclass sets :attr:`type` and says, through :meth:`_place`, on which device an
    initial value is stored and a pushed list is summed.
    """

    type = ""
    rank = 0
    num_workers = 1
    _applier = None  # set by set_optimizer: pushes then update the stored weights
    _compression = None  # set by set_gradient_compression: pushes of float32 keys are quantized
    _pushed = False  # whether a push has been accepted (compression must be set before)

    def __init__(self):
        self._store: dict = {}  # key -> stored value
        self._merge: dict = {}  # key -> reduction buffer; the stored value after a push
        self._stage: dict = {}  # key -> buffer for addends that live elsewhere or differ in dtype
        self._residuals = SourceResiduals()  # each source's residual per compressed key
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

    def push(self, key, value, priority: int = 0, scale: float = 1.0) -> None:
        """Sums the values pushed to each key (in list order); the sum replaces the stored value.

        Args:
            key: an int or str, or a list of them.
            value: an array or a list of arrays (one per replica); for a list of keys, a list
                with one array or one list of arrays per key.
            priority: accepted for MXNet compatibility; operations run in call order.
            scale: a factor the pushed gradients carry (a loss scale), for a store that
                updates with an optimizer: the optimizer step divides it out (its gradient
                factor is ``rescale_grad / scale``), as every other update does. Not MXNet's.
        """
        self._check_scale(scale)
        for k, arrays in self._checked(key, value, "value").items():
            self._push_one(k, arrays, scale)

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

    def pushpull(self, key, value, out=None, priority: int = 0, scale: float = 1.0) -> None:
        """Pushes ``value`` then pulls the result into ``out``, or back into ``value`` when
        ``out`` is None (MXNet's in-place form). Both are checked before anything is written.
        ``scale``: see :meth:`push`.
        """
        self._check_scale(scale)
        values = self._checked(key, value, "value")
        outs = values if out is None else self._checked(key, out, "out")
        for k, arrays in values.items():
            self._push_one(k, arrays, scale)
        self._copy_out(outs)

    def _check_scale(self, scale: float) -> None:
        if scale != 1.0 and self._applier is None:
            raise ValueError(f"kvstore push with scale={scale!r}: only a store that updates with "
                             f"an optimizer divides a scale out; call set_optimizer first")

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
        with the key as index (MXNet's local store). A new call replaces the applier, and
        with it the optimizer states."""
        self._applier = get_updater(optimizer)

    # -- gradient compression -------------------------------------------------------------
    def set_gradient_compression(self, compression_params) -> None:
        """Quantizes every later push of a float32 key with MXNet's 2-bit compression
        (:mod:`.push_compression`): ``compression_params`` is ``{'type': '2bit', 'threshold':
        t}`` (threshold 0.5 when left out). Call it before the first push; a second call before
        then replaces the first.

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

    def _quantized(self, key, value, source: int = 0):
        """``value`` quantized with the residual of ``source`` for ``key``, on ``value``'s
        device: the packed words, in a buffer of ``source`` that the next push reuses."""
        return self._residuals.quantized(self._compression, key, value, source)

    def save_optimizer_states(self, fname, dump_optimizer: bool = False) -> None:
        """Writes :meth:`get_optimizer_states` to ``fname``, replacing it atomically
        (:func:`trainer_run.storage.files.write_atomic`: a refused write raises StorageError naming
        the file and leaves it as it was)."""
        state_files.write(fname, self.get_optimizer_states(dump_optimizer))

    def load_optimizer_states(self, fname) -> None:
        """Reads a file written by :meth:`save_optimizer_states` into
        :meth:`set_optimizer_states`. A file that is not such an archive, a pickle for one,
        is refused before anything is read from it."""
        self._need_applier("load")
        self.set_optimizer_states(state_files.read(fname))

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The applier's states in the safe format (an ``.npz`` archive with a JSON manifest,
        no pickle); with ``dump_optimizer`` also the optimizer's hyper-parameters, counters and
        scheduler state."""
        self._need_applier("save")
        return self._applier.get_states(dump_optimizer)

    def set_optimizer_states(self, blob: bytes) -> None:
        """Restores :meth:`get_optimizer_states` output (and, if dumped, the optimizer's
        settings and counters) through the applier's ``set_states``: everything is checked
        before anything is written; each state lands on its key's device, and the state of a
        key not updated yet waits for its first update."""
        self._need_applier("load")
        key_of = str if self._key_type is str else index_key
        self._applier.set_states(blob, key_of=key_of, name=lambda key: f"kvstore key {key!r}")

    def _need_applier(self, verb: str) -> None:
        if self._applier is None:
            # MXNet's assertion text, whatever the store's type
            raise AssertionError(f"Cannot {verb} states for distributed training: this "
                                 f"{self.type or 'kvstore'} store has no optimizer; call "
                                 f"set_optimizer(optimizer) first")

    def _push_one(self, key, arrays, scale: float = 1.0) -> None:
        """A push to one key: the sum replaces the stored value or, with an optimizer,
        updates it (the sum carrying ``scale``)."""
        if self._applier is None:
            self._store[key] = self._reduce(key, arrays)
            return
        if self._merge.get(key) is self._store[key]:
            del self._merge[key]  # the weight is an earlier push's sum: sum into a new buffer
        merged = self._reduce(key, arrays)
        weight, place = self._store[key], place_of(merged)
        if place_of(weight) != place:
            if place_of(weight) is HOST and key not in self._applier.states:
                weight = self._store[key] = copy_into(empty_on(place, weight.shape, weight.dtype),
                                                       weight)
            else:
                merged = copy_into(self._staging(key, weight), merged)
        with on_device(place_of(weight)):
            self._applier(key, merged, weight, scale)

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
                    check_compressible(k, self._store[k].dtype, group)
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


def check_out_dtype(key, out, stored) -> None:
    """Refuses a pushpull into ``out`` whose dtype is not the ``stored`` value's (MXNet's dist
    kvstores: "Output buffer dtype is different")."""
    if out.dtype != stored.dtype:
        raise ValueError(f"kvstore key {key!r}: Output buffer dtype is different: pushpull "
                         f"into {out.dtype}, the key holds {stored.dtype} (dist kvstores pull "
                         f"into the key's dtype only)")
