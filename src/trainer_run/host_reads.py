"""Reading values from the device to the host: the training loop does it only here, and
every read is counted.

On a GPU a read (a loss as a Python float, an array copied to the host) waits until the
device has done all the work queued before it: the CPU stops launching kernels until then,
so the GPU runs dry. The training loop therefore keeps its losses, metrics and verdicts on
the device and reads them at log rows, evaluations and checkpoints
(:mod:`trainer_run.updaters.device_verdict`). A NumPy array is already on the host; reading
it is counted all the same, so that a test on the CPU can check that an iteration reads
nothing (:func:`count` before and after).
"""

from __future__ import annotations

import numpy

_done = 0


def count() -> int:
    """The number of reads made by this process so far."""
    return _done


def _counted() -> None:
    global _done
    _done += 1


def array(value) -> numpy.ndarray:
    """``value`` (a NumPy or CuPy array, or anything NumPy takes) as a host NumPy array: one
    read (a NumPy array is returned as it is)."""
    _counted()
    if hasattr(value, "__cuda_array_interface__"):
        return value.get()
    return numpy.asarray(value)


def scalar(value) -> float:
    """``value`` (a one-element array of either module, or a Python number) as a float: one
    read, none for a Python number."""
    if isinstance(value, (int, float)):
        return float(value)
    return float(array(value))


def scalars(values: list) -> list[float]:
    """Each of ``values`` (one-element arrays on one device, or numbers) as a float, in one
    read."""
    if not values:
        return []
    return [float(v) for v in array(_stacked(values))]


def _stacked(values: list):
    """``values`` (one-element arrays on one device, or numbers) as one 1-D array on that
    device (NumPy's when none is CuPy's)."""
    on_device = [v for v in values if not isinstance(v, (int, float, numpy.ndarray, numpy.generic))]
    if on_device:
        import cupy

        xp = cupy.get_array_module(on_device[0])
    else:
        xp = numpy
    return xp.stack([xp.asarray(v).reshape(()) for v in values])


class Later:
    """``values`` (one-element arrays on one device) on their way to the host: the copy is
    queued now, behind the work that computes them, into page-locked memory, and
    :meth:`result` collects it. Collected once the device has finished that work (an update
    later, say), the read does not wait, and the device's queue never runs dry."""

    def __init__(self, values: list):
        stacked = _stacked(values)
        if isinstance(stacked, numpy.ndarray):
            self._device, self._event, self._host = None, None, stacked
            return
        import cupy
        import cupyx

        self._device = stacked
        self._host = cupyx.empty_pinned(self._device.shape, self._device.dtype)
        cupy.asnumpy(self._device, out=self._host, blocking=False)
        self._event = cupy.cuda.Event()
        self._event.record()

    def result(self) -> list[float]:
        """The values as floats: one read (waiting for the copy if it is still under way)."""
        _counted()
        if self._event is not None:
            self._event.synchronize()
        return [float(v) for v in self._host]
