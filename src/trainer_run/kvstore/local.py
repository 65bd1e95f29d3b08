"""The in-process kvstores, which differ only in where the sum is computed:

- ``local``: in host memory. Values are brought to host NumPy arrays, summed there, and the
  sum is copied back to each output's own device. Stored values live on the host.
- ``device``: on the device holding the first pushed value, with that value's array module
  (NumPy or CuPy); the other values are moved there first. An initial value is stored on the
  device it came from.

Gradient compression (when and which keys: :mod:`.push_compression`):
``set_gradient_compression({'type': '2bit', 'threshold': t})`` makes every later push of a
float32 key send its values quantized to ``+t``, ``-t`` or 0, the rest carried in a residual to
the next push. ``device``: as MXNet's ``CommDevice::ReduceCompressed``, each position ``i`` of
a pushed list (each source replica) keeps its own float32 residual per key, zero at first, on
the device of the value it quantizes; every value is quantized there, even a single pushed
value or one already on the summing device (MXNet: so that training is not biased towards that
device's data); the packed words move to the device of the first value, are dequantized there
and summed in list order into the key's buffer. The sum then replaces the stored value or,
with ``set_optimizer``, is the gradient the update sees. Pulls are not compressed. ``local``
refuses, with MXNet's message ("Gradient compression is not supported for this type of
kvstore").
"""

from __future__ import annotations

import numpy

from ..backend import array_module
from ..errors import ConfigError
from .placement import HOST, copy_into, empty_on, on_device, place_of
from .store import KVStore

__all__ = ["DeviceKVStore", "LocalKVStore"]


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
