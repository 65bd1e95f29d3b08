"""2-bit gradient compression against a hand computation of MXNet 1.9's rule and wire layout.

The expected codes, residuals and words below are worked out by hand from MXNet's kernels
(``quantize_2bit`` / ``dequantize_2bit`` in ``src/kvstore/gradient_compression-inl.h``), not
computed by the code under test. All inputs are dyadic, so every float32 step is exact.
"""

import math

import numpy
import pytest

from trainer_run.errors import ConfigError
from trainer_run.kvstore.compression import GradientCompression

NAN, INF = math.nan, math.inf
# three pushes of 20 values, threshold 0.5; one row per value: (push 1, push 2, push 3)
GRADS = numpy.array([
    (0.5, 0, 0),              # 0: exactly +t
    (-0.5, 0, 0),             # 1: exactly -t
    (0.25, 0.25, 0.25),       # 2: crosses +t thanks to the residual (push 2)
    (-0.375, -0.125, 0),      # 3: crosses -t thanks to the residual (push 2)
    (1.75, 0, 0),             # 4: a large value drains over three pushes
    (-1.0, 0.25, 0),          # 5
    (-0.0, -0.0, -0.0),       # 6: negative zero
    (NAN, 1.0, -1.0),         # 7: NaN: sent as 0, the residual stays NaN for good
    (0.4375, 0.0625, -1.0),   # 8
    (0.125, -0.25, 0.625),    # 9
    (3.0, -3.0, 0),           # 10
    (INF, 0, -1.0),           # 11: +inf: +t every push, the residual stays inf
    (-INF, 0, 0),             # 12
    (0, 0.5, -0.5),           # 13
    (0.75, -0.75, 0.75),      # 14
    (-0.25, -0.25, -0.25),    # 15
    (0.5, 0.5, 0.5),          # 16: values 16-19 are in the second word, 12 codes of padding
    (-0.75, 0.125, 0.125),    # 17
    (2.0, 0, 0),              # 18
    (0.0625, 0.0625, 0.0625), # 19
], dtype=numpy.float32).T
P, M = 0.5, -0.5
SENT = numpy.array([  # what each push sends (the dequantized values), by hand
    [P, M, 0, 0, P, M, 0, 0, 0, 0, P, P, M, 0, P, 0, P, M, P, 0],
    [0, 0, P, M, P, 0, 0, 0, P, 0, M, P, M, P, M, M, P, 0, P, 0],
    [0, 0, 0, 0, P, 0, 0, 0, M, P, 0, P, M, M, P, 0, P, 0, P, 0],
], dtype=numpy.float32)
RESIDUALS = numpy.array([  # the residual after each push, by hand
    [0, 0, .25, -.375, 1.25, -.5, 0, NAN, .4375, .125, 2.5, INF, -INF, 0, .25, -.25, 0, -.25, 1.5, .0625],
    [0, 0, 0, 0, .75, -.25, 0, NAN, 0, -.125, 0, INF, -INF, 0, 0, 0, 0, -.125, 1.0, .125],
    [0, 0, .25, 0, .25, -.25, 0, NAN, -.5, 0, 0, INF, -INF, 0, .25, -.25, 0, 0, .5, .1875],
], dtype=numpy.float32)
# The words, by hand: value j of a word sits in byte j // 4 (in memory) at bits 7-6, 5-4, 3-2,
# 1-0 for j % 4 = 0..3 (gradient_compression-inl.h, quantize_2bit: ``curr_byte = block_ptr +
# ((i - start) >> 2)`` and ``posbits[] = {0xc0, 0x30, 0x0c, 0x03}``, ``negbits[] = {0x80, 0x20,
# 0x08, 0x02}``); +t is 0b11, -t is 0b10. E.g. push 1, values 0-3 = +t, -t, 0, 0: byte 0 is
# 0b11_10_00_00 = 0xe0; as a little-endian uint32, byte 3 is the high byte.
WORDS = [(0x8C0FE0E0, 0x000000EC), (0xBACBC00E, 0x000000CC), (0xACB3C000, 0x000000CC)]


def gc(threshold=0.5):
    return GradientCompression({"type": "2bit", "threshold": threshold})


def test_three_pushes_match_the_hand_computation():
    comp, residual = gc(), numpy.zeros(20, dtype=numpy.float32)
    for push in range(3):
        packed = comp.quantize(GRADS[push], residual)
        assert packed.dtype == numpy.uint32 and [hex(w) for w in packed] == [hex(w) for w in WORDS[push]]
        numpy.testing.assert_array_equal(residual, RESIDUALS[push])
        sent = comp.dequantize(packed, 20)
        assert sent.dtype == numpy.float32
        numpy.testing.assert_array_equal(sent, SENT[push])
    assert not numpy.signbit(residual[6]) and not numpy.signbit(sent[sent == 0]).any()  # +0.0


def test_bytes_in_memory_are_mxnets():
    packed = gc().quantize(GRADS[0], numpy.zeros(20, dtype=numpy.float32))
    assert packed.view(numpy.uint8).tolist() == [0xE0, 0xE0, 0x0F, 0x8C, 0xEC, 0, 0, 0]


@pytest.mark.parametrize("j, value, word", [(0, 1.0, 0xC0), (3, 1.0, 0x03), (4, -1.0, 0x8000),
                                            (14, 1.0, 0x0C000000), (15, -1.0, 0x02000000)])
def test_one_value_per_position(j, value, word):
    grad = numpy.zeros(16, dtype=numpy.float32)
    grad[j] = value
    assert gc(1.0).quantize(grad, numpy.zeros(16, dtype=numpy.float32)).tolist() == [word]


def test_conservation_over_pushes():
    """Everything pushed is either sent or still in the residual."""
    comp, rng = gc(0.5), numpy.random.default_rng(0)
    grads = (rng.standard_normal((10, 1001)) * 0.3).astype(numpy.float32)
    residual, total_sent = numpy.zeros(1001, dtype=numpy.float32), numpy.zeros(1001)
    for g in grads:
        total_sent += comp.dequantize(comp.quantize(g, residual), 1001)
    assert set(numpy.unique(total_sent * 2)) <= set(range(-20, 21))
    numpy.testing.assert_allclose(total_sent + residual, grads.astype(numpy.float64).sum(0), atol=1e-5)
    finite = numpy.isfinite(GRADS).all(axis=0)  # and exactly for the dyadic hand sequence
    numpy.testing.assert_array_equal((SENT.sum(0) + RESIDUALS[2])[finite], GRADS.sum(0)[finite])


def test_sizes_and_preallocated_buffers():
    comp = gc()
    assert comp.compression_factor == 16
    assert [comp.get_compressed_size(n) for n in (0, 1, 15, 16, 17, 20, 32, 33)] == [0, 1, 1, 1, 2, 2, 2, 3]
    out = numpy.full(2, 7.0, dtype=numpy.float32)  # MXNet keeps the words in a float32 array
    assert comp.quantize(GRADS[0], numpy.zeros(20, dtype=numpy.float32), out=out) is out
    assert out.view(numpy.uint32).tolist() == list(WORDS[0])
    dest = numpy.full((4, 6), 9.0, dtype=numpy.float32)  # only the first 20 values are written
    assert comp.dequantize(out, 20, out=dest) is dest
    numpy.testing.assert_array_equal(dest.ravel(), numpy.r_[SENT[0], [9, 9, 9, 9]])
    grad = numpy.full((3, 2), 0.75, dtype=numpy.float32)  # any C-contiguous shape, read flat
    residual = numpy.zeros((2, 3), dtype=numpy.float32)
    assert comp.quantize(grad, residual).tolist() == [0xF0FF]  # bytes 0xff, 0xf0
    numpy.testing.assert_array_equal(residual, numpy.full((2, 3), 0.25))
    assert comp.quantize(grad[:0], residual[:0]).size == 0


def test_dequantize_reads_code_0b01_as_zero():
    words = numpy.array([0b11_10_01_00], dtype=numpy.uint32)  # values 0-3: +t, -t, 0b01, 0
    numpy.testing.assert_array_equal(gc(2.0).dequantize(words, 4), [2, -2, 0, 0])


def test_threshold_is_a_float32():
    comp = gc(0.1)
    assert comp.threshold == float(numpy.float32(0.1))
    assert comp.params == {"type": "2bit", "threshold": comp.threshold}
    assert GradientCompression({"type": "2bit"}).threshold == 0.5
    residual = numpy.zeros(1, dtype=numpy.float32)
    packed = comp.quantize(numpy.array([numpy.float32(0.1)]), residual)  # >= the float32 value
    assert packed.tolist() == [0xC0] and residual.tolist() == [0.0]
    assert comp.dequantize(packed, 1).tolist() == [numpy.float32(0.1)]


@pytest.mark.parametrize("params, start", [
    ({"type": "1bit", "threshold": 0.5}, "type='1bit' is not a gradient compression type"),
    ({"type": "2BIT"}, "type='2BIT'"),
    ({"threshold": 0.5}, "type of gradient compression is required"),
    ({"type": "2bit", "threshold": 0}, "threshold must be > 0"),
    ({"type": "2bit", "threshold": -1.0}, "threshold must be > 0"),
    ({"type": "2bit", "threshold": NAN}, "threshold must be > 0"),
    ({"type": "2bit", "threshold": 1e-50}, "threshold must be > 0"),  # 0 as a float32
    ({"type": "2bit", "threshold": 1e40}, "threshold must be > 0"),   # inf as a float32
    ({"type": "2bit", "threshold": "0.5"}, "threshold must be a number"),
    ({"type": "2bit", "threshold": True}, "threshold must be a number"),
    ({"type": "2bit", "thresold": 0.1}, "compression_params has unknown key(s) thresold"),
    ("2bit", "compression_params must be a dict"),
])
def test_bad_params(params, start):
    with pytest.raises(ConfigError) as err:
        GradientCompression(params)
    assert str(err.value).startswith(start)


def test_refuses_other_dtypes_and_mismatches():
    comp, f32 = gc(), numpy.zeros(20, dtype=numpy.float32)
    for dtype in ("float16", "float64"):  # MXNet 1.9's kernels read float32 only
        with pytest.raises(ConfigError, match=f"^grad dtype {dtype} is not supported: MXNet 1.9's"):
            comp.quantize(f32.astype(dtype), f32)
        with pytest.raises(ConfigError, match=f"^residual dtype {dtype}"):
            comp.quantize(f32, f32.astype(dtype))
    with pytest.raises(ConfigError, match="^out dtype float16"):
        comp.dequantize(numpy.zeros(2, numpy.uint32), 20, out=f32.astype("float16"))
    with pytest.raises(ValueError, match="^residual has 19 values, grad 20"):
        comp.quantize(f32, f32[:19])
    with pytest.raises(ValueError, match="^residual must be C-contiguous"):
        comp.quantize(f32[:10], numpy.zeros(20, dtype=numpy.float32)[::2])
    with pytest.raises(ValueError, match=r"^packed words must be a 1-D array of 2 words, got shape \(3,\)"):
        comp.quantize(f32, f32.copy(), out=numpy.zeros(3, numpy.uint32))
    with pytest.raises(TypeError, match="^packed words are uint32 or float32"):
        comp.dequantize(numpy.zeros(2, numpy.int64), 20)
    with pytest.raises(ValueError, match="^out has 19 values, fewer than the 20"):
        comp.dequantize(numpy.zeros(2, numpy.uint32), 20, out=f32[:19])


@pytest.mark.gpu
def test_cupy_matches_numpy(cupy):
    comp, rng = gc(0.5), numpy.random.default_rng(1)
    residual, d_residual = numpy.zeros(50, numpy.float32), cupy.zeros(50, cupy.float32)
    for _ in range(3):
        g = (rng.standard_normal(50) * 0.4).astype(numpy.float32)
        packed, d_packed = comp.quantize(g, residual), comp.quantize(cupy.asarray(g), d_residual)
        numpy.testing.assert_array_equal(cupy.asnumpy(d_packed), packed)
        numpy.testing.assert_array_equal(cupy.asnumpy(d_residual), residual)
        numpy.testing.assert_array_equal(cupy.asnumpy(comp.dequantize(d_packed, 50)),
                                         comp.dequantize(packed, 50))
