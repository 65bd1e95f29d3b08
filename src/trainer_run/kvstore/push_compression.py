"""Gradient compression as a store applies it to its pushes (MXNet's
``set_gradient_compression``, 2-bit only; the rule and the wire layout are in
:mod:`.compression`): which pushes may be compressed, and the residual each source keeps.

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
- The ``dist_async`` server (:class:`WorkerThresholds`): each worker sends its threshold, and
  one that differs from another worker's is refused; a worker's packed words are received
  into one buffer per key and dequantized with that worker's threshold.
"""

from __future__ import annotations

import numpy

from ..errors import ConfigError
from .compression import GradientCompression, threshold_from_bits
from .placement import copy_into, empty_on, on_device, place_of, zeros_on

__all__ = ["SourceResiduals", "WorkerThresholds", "check_compressible"]


def check_compressible(key, dtype, arrays) -> None:
    """Refuses a push that compression cannot take: to a float16 key (``dtype`` is the key's),
    or of a value that is not float32 to a float32 key."""
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


class SourceResiduals:
    """Per key, each source's float32 residual (zero at first) and packed-word buffer, on the
    device of the value it last quantized; a source is a position in a pushed list, or the
    worker itself."""

    def __init__(self):
        self._pairs: dict = {}  # key -> [(residual, packed words)], one pair per source

    def quantized(self, compression, key, value, source: int = 0):
        """``value`` quantized by ``compression`` with the residual of ``source`` for ``key``,
        on ``value``'s device: the packed words, in a buffer of ``source`` that the next push
        reuses."""
        residual, packed = self._sender(compression, key, source, value)
        with on_device(place_of(value)):
            return compression.quantize(value, residual, out=packed)

    def _sender(self, compression, key, source: int, value) -> tuple:
        """The residual and packed-word buffer of ``source`` for ``key``, on ``value``'s
        device; a residual whose source moved to another device moves with it."""
        pairs = self._pairs.setdefault(key, [])
        pairs.extend([None] * (source + 1 - len(pairs)))
        place, n = place_of(value), value.size
        pair = pairs[source]
        if pair is None or place_of(pair[0]) != place:
            words = compression.get_compressed_size(n)
            residual = (zeros_on(place, (n,), numpy.float32) if pair is None else
                        copy_into(empty_on(place, (n,), numpy.float32), pair[0]))
            pair = pairs[source] = (residual, empty_on(place, (words,), numpy.uint32))
        return pair


class WorkerThresholds:
    """The ``dist_async`` server's side: each worker's compression (its threshold) and, per
    key code, the buffer its packed words are received into."""

    def __init__(self):
        self.by_worker: dict = {}  # worker -> its GradientCompression
        self.packed: dict = {}  # code -> receive buffer of packed words

    def set(self, worker: int, bits: int) -> None:
        """Records ``worker``'s threshold (float32 ``bits``); ConfigError for an invalid one,
        or one that differs from another worker's."""
        try:
            gc = GradientCompression({"type": "2bit", "threshold": threshold_from_bits(bits)})
        except ConfigError as e:
            raise ConfigError(f"kvstore dist_async: worker {worker}: {e}") from None
        for other, known in self.by_worker.items():
            if other != worker and known.threshold != gc.threshold:
                raise ConfigError(f"kvstore dist_async: worker {worker} sets gradient compression "
                                  f"threshold {gc.threshold!r}, worker {other} set "
                                  f"{known.threshold!r}; every worker must call "
                                  f"set_gradient_compression with the same params")
        self.by_worker[worker] = gc

    def refusal(self, worker: int, size: int, nbytes: int) -> str | None:
        """Why ``nbytes`` of packed words from ``worker`` for a key of ``size`` values cannot
        be read (None: they can)."""
        gc = self.by_worker.get(worker)
        if gc is None:
            return "its set_gradient_compression did not reach the server or was refused"
        words = gc.get_compressed_size(size)
        return None if nbytes == 4 * words else f"{nbytes} bytes of words, the key needs {4 * words}"

    def buffer(self, worker: int, code: int, size: int) -> numpy.ndarray:
        """The buffer that receives packed words for key ``code`` (``size`` values)."""
        packed = self.packed.get(code)
        if packed is None:
            words = self.by_worker[worker].get_compressed_size(size)
            packed = self.packed[code] = numpy.empty(words, numpy.uint32)
        return packed

    def dequantize(self, worker: int, packed, out: numpy.ndarray) -> numpy.ndarray:
        """``worker``'s ``packed`` words as values, with its threshold, into ``out``."""
        return self.by_worker[worker].dequantize(packed, out.size, out=out)
