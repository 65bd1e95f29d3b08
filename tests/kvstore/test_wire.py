"""The ``dist_async`` wire format (kvstore/wire.py), in-process: a request's header packed by
``pack_request`` and its data sent as raw bytes (as the worker's link sends them) are read back
as the server reads them (``unpack_meta`` for the dtype and shape, the nbytes field for the size,
``scale_of`` for field 6, the loss scale as float64 bits) and give the same array bit for bit;
answers and error answers carry their fields; what the header cannot hold is refused."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run.errors import ConfigError, RunStopped
from trainer_run.kvstore import wire

ARRAYS = [
    np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324], np.float64),    # odd bit patterns
    np.array([[1.5, -65504.0], [6e-8, np.nan]], np.float16),
    np.arange(-8, 8, dtype=np.int8).reshape(2, 2, 2, 2),
    np.array([2**63 - 1, -(2**63)], np.int64),
    np.array([0xFFFFFFFF, 1], np.uint32),
    np.array(3.25, np.float32),                                          # 0-d
    np.zeros((0, 5), np.float32),                                        # empty
    np.ones((1,) * 32, np.float32),                                      # the most dimensions
]


def sent(h: np.ndarray, data: np.ndarray | None) -> tuple[bytes, bytes]:
    """What the link puts on the wire: the header's int64 bytes, then the data's raw bytes."""
    return h.tobytes(), b"" if data is None else np.ascontiguousarray(data).tobytes()


def received(header: bytes, payload: bytes):
    """The server's side: the header, then an array of the header's dtype and shape filled
    with the data bytes (as many as the nbytes field says)."""
    h = np.frombuffer(header, dtype=np.int64).copy()
    assert h.size == wire.HDR
    dtype, shape = wire.unpack_meta(h)
    assert len(payload) == h[2]
    return h, np.frombuffer(payload, dtype=dtype).reshape(shape)


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_a_pushed_array_comes_back_bit_for_bit_with_its_header(array):
    h = np.full(wire.HDR, 99, dtype=np.int64)           # a reused header: nothing stale stays
    wire.pack_request(h, wire.PUSH, code=17, data=array, name=b"fc1/W", iteration=1234,
                      scale=2.0 ** -24)
    got_h, got = received(*sent(h, array))
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()
    assert [int(v) for v in got_h[:8]] == [wire.PUSH, 17, array.nbytes, ord(array.dtype.char),
                                          5, array.ndim, int(got_h[6]), 1234]
    assert wire.scale_of(got_h) == 2.0 ** -24
    assert not got_h[8 + array.ndim:].any()


@pytest.mark.parametrize("scale", [1024.0, 8.0, 0.5, 3.0000000000000004, 2.0 ** 60, 1e-300])
def test_field_6_carries_the_loss_scale_as_its_float64_bits(scale):
    h = np.zeros(wire.HDR, dtype=np.int64)
    wire.pack_request(h, wire.PUSHPULL, 1, np.zeros(3, np.float32), scale=scale)
    assert h[6] == int.from_bytes(np.float64(scale).tobytes(), "little", signed=True)
    assert wire.scale_of(h) == scale


def test_no_loss_scale_is_field_6_zero_and_reads_as_one():
    h = np.full(wire.HDR, 5, dtype=np.int64)
    wire.pack_request(h, wire.PUSH, 1, np.zeros(3, np.float32))
    assert h[6] == 0
    assert wire.scale_of(h) == 1.0


def test_a_declare_carries_the_dtype_and_shape_of_its_meta_and_no_data():
    meta = np.empty((4, 0, 3), np.float16)
    h = np.zeros(wire.HDR, dtype=np.int64)
    wire.pack_request(h, wire.DECLARE, 2, meta=meta)
    assert h[2] == 0
    assert wire.unpack_meta(h) == (np.dtype(np.float16), (4, 0, 3))


def test_a_stop_request_carries_the_signal_and_the_iteration_finished():
    h = np.zeros(wire.HDR, dtype=np.int64)
    wire.pack_request(h, wire.STOP_AT, 15, iteration=301)
    assert [int(v) for v in h[:8]] == [wire.STOP_AT, 15, 0, 0, 0, 0, 0, 301]


def test_a_packed_push_is_read_as_uint32_words():
    words = np.array([0x12345678, 0xFFFFFFFF], np.uint32)
    h = np.zeros(wire.HDR, dtype=np.int64)
    wire.pack_request(h, wire.PUSH, 4, words)
    assert h[3] == wire.PACKED == ord("I")
    assert received(*sent(h, words))[1].tobytes() == words.tobytes()


def test_more_than_32_dimensions_are_refused_with_the_exchange_named():
    h = np.zeros(wire.HDR, dtype=np.int64)
    with pytest.raises(ValueError) as caught:
        wire.pack_request(h, wire.PUSH, 1, np.ones((1,) * 33, np.float32),
                          what="the push of key 'w'")
    assert str(caught.value) == "kvstore dist_async: the push of key 'w': at most 32 dimensions"


def test_an_answer_carries_the_count_the_stop_signal_and_the_iteration_to_stop_after():
    h = wire.answer_header(wire.OK, code=9, nbytes=48, count=1000, stop=2, stop_after=77)
    assert h.dtype == np.int64 and h.size == wire.HDR
    assert [int(v) for v in h[:9]] == [wire.OK, 9, 48, 0, 0, 0, 1000, 2, 77]
    assert not h[9:].any()
    assert [int(v) for v in wire.answer_header(wire.ALIVE)[:9]] == [wire.ALIVE, 0, 0, 0, 0, 0,
                                                                   -1, 0, -1]


@pytest.mark.parametrize(("cls", "back"), [(ValueError, ValueError), (ConfigError, ConfigError),
                                           (RunStopped, RunStopped), (KeyError, RunStopped)])
def test_an_error_answer_raises_its_class_on_the_worker(cls, back):
    text = "kvstore key 'w': shape (3,) differs".encode()
    h = wire.error_header(cls, text)
    assert [int(h[0]), int(h[2])] == [wire.ERROR, len(text)]
    assert wire.error_class(int(h[3])) is back


@pytest.mark.parametrize("code", [0, 4, 99, -1])
def test_an_unknown_error_code_raises_run_stopped(code):
    assert wire.error_class(code) is RunStopped
