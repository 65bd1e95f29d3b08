"""Where an array lives, and copies between the host and devices: the one place the kvstore
moves data across them. A NumPy array lives on the host (:data:`HOST`), a CuPy array on its
device's integer id; CuPy is imported only when a CuPy array is in hand."""

from __future__ import annotations

import contextlib

import numpy

from trainer_run.backend import device_of

HOST = None
"""Where a NumPy array lives; a CuPy array lives on its device's integer id."""


def import_cupy():
    """The cupy module."""
    import cupy  # only reached with a CuPy array in hand, so CuPy is installed

    return cupy


def place_of(a):
    """:data:`HOST` for a NumPy array, the device id for a CuPy array."""
    try:
        device = device_of(a)
    except TypeError:
        raise TypeError(f"kvstore values are NumPy or CuPy arrays, got {type(a).__name__}") from None
    return HOST if device is None else device


def on_device(place):
    """A context making ``place`` CuPy's current device (nothing for the host)."""
    return contextlib.nullcontext() if place is HOST else import_cupy().cuda.Device(place)


def empty_on(place, shape, dtype):
    """An uninitialised array at ``place``."""
    if place is HOST:
        return numpy.empty(shape, dtype)
    cupy = import_cupy()
    with cupy.cuda.Device(place):
        return cupy.empty(shape, dtype)


def zeros_on(place, shape, dtype):
    """A zero array at ``place``."""
    a = empty_on(place, shape, dtype)
    with on_device(place):
        a.fill(0)
    return a


def copy_into(dst, src):
    """Copies ``src`` into ``dst`` in place, across host and devices, casting to ``dst``'s
    dtype; returns ``dst``."""
    dst_at, src_at = place_of(dst), place_of(src)
    direct = (dst.dtype == src.dtype and dst.flags.c_contiguous and src.flags.c_contiguous)
    if dst_at is HOST:
        if src_at is HOST:
            numpy.copyto(dst, src, casting="unsafe")
        elif direct:
            src.get(out=dst)
        else:
            numpy.copyto(dst, src.get(), casting="unsafe")
        return dst
    cupy = import_cupy()
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
