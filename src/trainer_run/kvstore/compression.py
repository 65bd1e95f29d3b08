"""MXNet 1.9's 2-bit gradient compression: quantize with a residual, pack 16 values per word.

``GradientCompression({'type': '2bit', 'threshold': t})`` takes the dict of MXNet's
``kvstore.set_gradient_compression``. ``type`` is required and must be ``'2bit'``, the only
type MXNet 1.9 knows (its release refuses ``'1bit'``: "Unknown type for gradient compression");
``threshold`` defaults to 0.5 and must be > 0. Like MXNet, the threshold is a float32.

The rule, per element ``i`` of a flat float32 gradient (MXNet's ``quantize_2bit``)::

    v = residual[i] + grad[i]                 # float32
    if v >= t:    code 0b11, sends +t, residual[i] = v - t
    elif v <= -t: code 0b10, sends -t, residual[i] = v - (-t)
    else:         code 0b00, sends 0,  residual[i] = v

so a value exactly at +-t is sent, and a small gradient is sent once the residual has carried
it over the threshold: the residual keeps what was not sent, and nothing is lost, only delayed.
A NaN fails both comparisons: it is sent as 0 and its residual stays NaN, so that element sends 0
from then on (as MXNet). ``dequantize`` turns code 0b11 into +t, 0b10 into -t and anything else
(0b00, and 0b01, which quantize never writes) into +0.0.

The wire layout (MXNet's ``quantize_2bit`` / ``dequantize_2bit`` in
``src/kvstore/gradient_compression-inl.h``): value ``i`` lives in word ``i // 16``; within it,
value ``j = i % 16`` takes byte ``j // 4`` of the word in memory and, in that byte, bits 7-6 for
``j % 4 == 0``, 5-4 for 1, 3-2 for 2 and 1-0 for 3 (masks ``0xc0, 0x30, 0x0c, 0x03``). Read as
a little-endian uint32, value ``j`` occupies bits ``8 * (j // 4) + 6 - 2 * (j % 4)`` and up;
value 0 at +t is ``0x000000c0``, value 15 at -t is ``0x02000000``. ``n`` values take
``ceil(n / 16)`` words and the unused codes of the last word are 0. MXNet keeps these words in a
float32 array; here they are a uint32 array with the same bits (a float32 ``out`` is accepted
and written through a uint32 view), so they travel as raw bytes.

Where it runs (MXNet's kvstore): every worker (or device) keeps one float32 residual per key,
zero at first, the size of the key's flat gradient, owned by the store and passed to every
:meth:`GradientCompression.quantize` of that key from that worker. The sender quantizes
gradient + residual and pushes the packed words; the receiver (the server, or the device that
sums) dequantizes each sender's words into a float32 buffer and sums those, so the stored sum
is a sum of +-t and 0 values. Pulls are not compressed. Only float32 gradients can be
compressed, as in MXNet, whose kernels read float32 only. MXNet 1.9.1 compresses every value a
``device`` store is pushed, a single one too (a push of 0.3 with threshold 0.5 pulls 0), and
refuses compression on a ``local`` store ("Gradient compression is not supported for this type
of kvstore").

The arrays are NumPy or CuPy (``xp`` from :func:`~trainer_run.backend.array_module`); with CuPy,
call with the arrays' device current. Each call allocates at most the packed result (none when
``out`` is given): the scratch buffers (6 bytes per value of the largest array seen) are kept
per array module and device and reused, so one object serves one thread at a time.
"""

from __future__ import annotations

import math
import numbers

import numpy

from ..backend import array_module
from ..errors import ConfigError

__all__ = ["DEFAULT_THRESHOLD", "GradientCompression", "TYPES", "threshold_bits", "threshold_from_bits"]

TYPES = ("2bit",)
"""The compression types of MXNet 1.9."""
DEFAULT_THRESHOLD = 0.5

_WORD = 16  # values per 32-bit word
# bit offset of value j of a word, read as a little-endian uint32
_SHIFTS = numpy.array([8 * (j // 4) + 6 - 2 * (j % 4) for j in range(_WORD)], dtype=numpy.uint32)
_POS, _NEG = numpy.uint32(3), numpy.uint32(2)  # codes 0b11 (+threshold), 0b10 (-threshold)
_ONE, _MASK = numpy.uint32(1), numpy.uint32(3)


class GradientCompression:
    """MXNet's 2-bit gradient compression with threshold ``t``.

    Args:
        compression_params: MXNet's dict: ``{'type': '2bit', 'threshold': t}``; ``threshold``
            may be left out (0.5). Unlike MXNet, which ignores unknown keys, an unknown key is
            refused, so a misspelt ``threshold`` is not silently 0.5.
    """

    def __init__(self, compression_params):
        if not isinstance(compression_params, dict):
            raise ConfigError(f"compression_params must be a dict like {{'type': '2bit', "
                              f"'threshold': 0.5}}, got {compression_params!r}")
        unknown = sorted(map(str, set(compression_params) - {"type", "threshold"}))
        if unknown:
            raise ConfigError(f"compression_params has unknown key(s) {', '.join(unknown)}; "
                              f"the keys are type and threshold")
        if "type" not in compression_params:
            raise ConfigError("type of gradient compression is required; choose one of "
                              + ", ".join(TYPES))
        kind = compression_params["type"]
        if kind not in TYPES:
            raise ConfigError(f"type={kind!r} is not a gradient compression type of MXNet 1.9; "
                              f"choose one of {', '.join(TYPES)}")
        t = compression_params.get("threshold", DEFAULT_THRESHOLD)
        if isinstance(t, bool) or not isinstance(t, numbers.Real):
            raise ConfigError(f"threshold must be a number, got {t!r}")
        with numpy.errstate(over="ignore"):
            t32 = numpy.float32(t)
        if not (math.isfinite(t32) and t32 > 0):
            raise ConfigError(f"threshold must be > 0 and finite as a float32 (MXNet stores a "
                              f"float), got {t!r}")
        self.type = kind
        self._t = t32
        self._work: dict = {}  # (module name, device id) -> scratch buffers

    def __repr__(self) -> str:
        return f"GradientCompression(type={self.type!r}, threshold={self.threshold!r})"

    @property
    def threshold(self) -> float:
        """The threshold, as the float32 value the kernels use."""
        return float(self._t)

    @property
    def params(self) -> dict:
        """The dict this object was built from, with the default filled in."""
        return {"type": self.type, "threshold": self.threshold}

    @property
    def compression_factor(self) -> int:
        """How many values one 32-bit word holds (MXNet's ``GetCompressionFactor``): 16."""
        return _WORD

    def get_compressed_size(self, n: int) -> int:
        """The number of 32-bit words for ``n`` values: ``ceil(n / 16)``."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        return -(-int(n) // _WORD)

    def quantize(self, grad, residual, out=None):
        """Quantizes ``grad + residual`` into packed words and updates ``residual`` in place.

        Args:
            grad: the float32 gradient, any shape (read flat; a strided one is copied first);
                not modified.
            residual: this key's and this sender's float32 residual, C-contiguous, as many
                values as ``grad``; updated in place.
            out: optional 1-D uint32 or float32 array of ``get_compressed_size(grad.size)``
                words to pack into.

        Returns:
            the packed words: ``out``, or a new uint32 array of ``grad``'s array module.
        """
        g = _flat("grad", grad, written=False)
        r = _flat("residual", residual)
        xp = array_module(grad)
        if array_module(residual) is not xp or (out is not None and array_module(out) is not xp):
            raise TypeError("grad, residual and out must all be NumPy arrays or all CuPy arrays")
        if r.size != g.size:
            raise ValueError(f"residual has {r.size} values, grad {g.size}: one residual value "
                             f"per gradient value")
        n = g.size
        words = self.get_compressed_size(n)
        if out is None:
            out = xp.empty(words, dtype=xp.uint32)
        packed = _words(out, words)
        pos, neg, codes = self._scratch(xp, g, n)
        t = self._t
        with numpy.errstate(invalid="ignore", over="ignore"):  # inf - inf, overflow: as MXNet
            xp.add(r, g, out=r)
        xp.greater_equal(r, t, out=pos)
        xp.less_equal(r, -t, out=neg)
        sent = codes[:n].view(xp.float32)  # +-t or 0, as dequantize gives it
        xp.copyto(sent, pos)
        xp.subtract(sent, neg, out=sent)
        xp.multiply(sent, t, out=sent)
        xp.subtract(r, sent, out=r)  # v - t, v - (-t) or v: MXNet's float32 operations
        xp.logical_or(pos, neg, out=neg)
        c = codes[:n]
        xp.copyto(c, neg)
        xp.left_shift(c, _ONE, out=c)
        xp.add(c, pos, out=c)  # 0b11, 0b10 or 0b00
        codes[n:words * _WORD].fill(0)
        grid = codes[:words * _WORD].reshape(words, _WORD)
        xp.left_shift(grid, self._shifts(xp, g), out=grid)
        grid.sum(axis=1, dtype=xp.uint32, out=packed)  # disjoint bit fields: sum == or
        return out

    def dequantize(self, packed, n: int, out=None):
        """Writes +threshold, -threshold or 0 for each of ``n`` packed values into ``out``.

        Args:
            packed: ``get_compressed_size(n)`` words from :meth:`quantize` (uint32 or float32).
            n: the number of values packed.
            out: optional float32 C-contiguous array of at least ``n`` values; its first ``n``
                (read flat) are written, the rest left alone.

        Returns:
            ``out``, or a new float32 array of ``n`` values of ``packed``'s array module.
        """
        words = self.get_compressed_size(n)
        src = _words(packed, words)
        xp = array_module(packed)
        if out is None:
            out = xp.empty(n, dtype=xp.float32)
        if array_module(out) is not xp:
            raise TypeError("packed and out must both be NumPy arrays or both CuPy arrays")
        o = _flat("out", out)
        if o.size < n:
            raise ValueError(f"out has {o.size} values, fewer than the {n} packed")
        o = o[:n]
        pos, neg, codes = self._scratch(xp, o, n)
        grid = codes[:words * _WORD].reshape(words, _WORD)
        xp.right_shift(src[:, None], self._shifts(xp, o), out=grid)
        xp.bitwise_and(grid, _MASK, out=grid)
        xp.equal(codes[:n], _POS, out=pos)
        xp.equal(codes[:n], _NEG, out=neg)
        xp.copyto(o, pos)
        xp.subtract(o, neg, out=o)
        xp.multiply(o, self._t, out=o)
        return out

    # -- scratch buffers, one set per array module and device, grown as needed -----------
    def _scratch(self, xp, like, n: int):
        work = self._work_for(xp, like)
        size = self.get_compressed_size(n) * _WORD
        if work.get("codes") is None or work["codes"].size < size:
            work["codes"] = xp.zeros(size, dtype=xp.uint32)
            work["pos"] = xp.empty(size, dtype=bool)
            work["neg"] = xp.empty(size, dtype=bool)
        return work["pos"][:n], work["neg"][:n], work["codes"]

    def _shifts(self, xp, like):
        work = self._work_for(xp, like)
        if "shifts" not in work:
            work["shifts"] = xp.asarray(_SHIFTS)
        return work["shifts"]

    def _work_for(self, xp, like) -> dict:
        device = getattr(getattr(like, "device", None), "id", None)  # a CuPy device's id
        return self._work.setdefault((xp.__name__, device), {})


def threshold_bits(threshold: float) -> int:
    """The bits of ``threshold`` as a float32, as an int: how the dist stores exchange it."""
    return int(numpy.float32(threshold).view(numpy.uint32))


def threshold_from_bits(bits: int) -> float:
    """The float32 whose bits are ``bits``, as a Python float (:func:`threshold_bits` undone)."""
    return float(numpy.uint32(bits).view(numpy.float32))


def _flat(name: str, a, written: bool = True):
    """``a`` read flat, after checking it is a float32 array, C-contiguous if ``written`` (so
    that the flat array is a view); one that is only read may be strided, and is then copied."""
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        raise TypeError(f"{name} must be a NumPy or CuPy array, got {type(a).__name__}")
    if dtype != numpy.float32:
        raise ConfigError(f"{name} dtype {dtype} is not supported: MXNet 1.9's 2bit gradient "
                          f"compression works on float32 arrays only; train in float32 or turn "
                          f"gradient compression off")
    if written and not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous, so it can be written flat")
    return a.reshape(-1)


def _words(a, words: int):
    """``a`` as a 1-D uint32 view of exactly ``words`` words."""
    dtype = getattr(a, "dtype", None)
    if dtype not in (numpy.uint32, numpy.float32):
        raise TypeError(f"packed words are uint32 or float32 arrays, got "
                        f"{dtype if dtype is not None else type(a).__name__}")
    if a.ndim != 1 or a.size != words:
        raise ValueError(f"packed words must be a 1-D array of {words} words, got shape "
                         f"{tuple(a.shape)}")
    if not a.flags.c_contiguous:
        raise ValueError("packed words must be C-contiguous")
    return a.view(numpy.uint32)
