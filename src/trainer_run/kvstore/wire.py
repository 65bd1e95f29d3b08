"""The wire protocol of ``dist_async`` between the workers and the server.

A message is a header of :data:`HDR` int64 on tag :data:`REQ` (worker -> server) or :data:`REP`
(server -> worker), followed, when its nbytes field is not 0, by one message of raw bytes on
:data:`REQ_DATA` / :data:`REP_DATA`: the array (or the key's name, or an error text).

Header fields: 0 kind (a request) or status (an answer), 1 key code, 2 nbytes of the data
message, 3 dtype char (a request) or error class (an error answer), 4 length of the key's name
(str keys, init), 5 ndim, 6 the server optimizer's ``num_update`` in the answer to a pull (-1:
none) or the float64 bits of the loss scale a pushed gradient carries (a push; 0: none), 7 the
iteration a worker has finished (a :data:`STOP_AT` request) or the stop signal some process of
the job has asked for (every answer; 0: none), 8.. the shape (a request) or the iteration to
stop after (the answer to :data:`STOP_AT`; -1: go on to the end).

Gradient compression: a :data:`PUSH` (or :data:`PUSHPULL`) whose dtype char is :data:`PACKED`
(uint32) to a float32 key carries 2-bit packed words; a :data:`COMPRESSION` header carries the
threshold's float32 bits in field 1.
"""

from __future__ import annotations

import numpy

from ..errors import ConfigError, RunStopped

REQ = 7301
"""The tag of a request's header (worker -> server)."""
REQ_DATA = 7302
"""The tag of a request's data: the key's name, then the array."""
REP = 7303
"""The tag of an answer's header (server -> worker)."""
REP_DATA = 7304
"""The tag of an answer's data: the weights, the states or an error text."""

HDR = 40
"""int64 values in a header."""
_MAX_NDIM = 32

INIT = 1
"""Worker 0 gives a key's initial value (and a str key's name)."""
DECLARE = 2
"""Another worker declares a key's dtype and shape, to be checked against worker 0's."""
PUSH = 3
"""A worker's sum of a key's gradients (or its packed words)."""
PULL = 4
"""A worker asks for a key's current weights."""
BARRIER = 5
"""A worker waits for every worker."""
OPTIMIZER = 6
"""A worker's ``set_optimizer``, with the optimizer's name."""
STOP = 7
"""A worker's ``close``."""
GONE = 8
"""A worker that stopped after the server gave up: no answer comes."""
COMPRESSION = 9
"""A worker's ``set_gradient_compression``, with the threshold's float32 bits."""
GET_STATES = 10
"""A worker asks for the server updater's states."""
SET_STATES = 11
"""A worker gives states to the server's updater."""
ABORTED = 12
"""A worker stops with an error, with its reason."""
PUSHPULL = 13
"""A :data:`PUSH` answered, once applied, as a :data:`PULL` of the same key: one round trip."""
STOP_AT = 14
"""A worker asks to stop (its signal number as the key code, the iteration it has finished in
field 7), answered once every worker has asked or closed: the iteration they all stop after."""

PUSHES = (PUSH, PUSHPULL)
"""The kinds of request that carry a worker's gradient (or its packed words)."""
WITH_DATA = (INIT, PUSH, PUSHPULL, OPTIMIZER, SET_STATES, ABORTED)
"""The kinds of request whose header may be followed by data (a key's name, then an array)."""
ANSWERED = (PULL, PUSHPULL, BARRIER, OPTIMIZER, STOP, GET_STATES, SET_STATES, STOP_AT)
"""The kinds of request whose worker waits for an answer."""

PACKED = ord(numpy.dtype(numpy.uint32).char)
"""The dtype char of a push of 2-bit packed words."""

OK = 0
"""An answer's status: done."""
ERROR = 1
"""An answer's status: an error, whose text follows."""
ALIVE = 2
"""An answer's status: the server is alive and the worker still waits."""

_ERRORS = {1: ValueError, 2: ConfigError, 3: RunStopped}
_ERROR_CODES = {ValueError: 1, ConfigError: 2, RunStopped: 3}


def pack_request(h, kind, code=0, data=None, meta=None, name=b"", what: str = "",
                 iteration: int = 0, scale: float = 1.0) -> None:
    """Writes into ``h`` the header of a request of ``kind`` for key ``code``: the dtype and
    shape of ``data`` (or of ``meta`` when no data is sent), the nbytes of ``data``, the
    length of ``name``, the ``iteration`` finished and the loss ``scale`` a pushed gradient
    carries. ValueError for an array of more than 32 dimensions (``what`` names the
    exchange)."""
    h[:] = 0
    h[0], h[1], h[7] = kind, code, iteration
    if scale != 1.0:
        h[6] = numpy.float64(scale).view(numpy.int64)
    array = data if data is not None else meta
    if array is not None:
        if array.ndim > _MAX_NDIM:
            raise ValueError(f"kvstore dist_async: {what}: at most {_MAX_NDIM} dimensions")
        h[3], h[5] = ord(array.dtype.char), array.ndim
        h[8:8 + array.ndim] = array.shape
    h[2] = 0 if data is None else data.nbytes
    h[4] = len(name)


def scale_of(h) -> float:
    """The loss scale a push's header says its gradient carries (1.0: none)."""
    return 1.0 if h[6] == 0 else float(h[6:7].view(numpy.float64)[0])


def answer_header(status, code=0, nbytes: int = 0, count: int = -1, stop: int = 0,
                  stop_after: int = -1):
    """A new answer header: ``status``, key ``code``, ``nbytes`` of data to follow, the
    optimizer's ``num_update`` ``count``, the ``stop`` signal asked for and the iteration to
    ``stop_after``."""
    h = numpy.zeros(HDR, dtype=numpy.int64)
    h[0], h[1] = status, code
    h[2] = nbytes
    h[6], h[7], h[8] = count, stop, stop_after
    return h


def error_header(cls, text: bytes):
    """A new header of an :data:`ERROR` answer raising ``cls`` (RunStopped when it has no
    code) with ``text``, which follows."""
    h = numpy.zeros(HDR, dtype=numpy.int64)
    h[0], h[2], h[3] = ERROR, len(text), _ERROR_CODES.get(cls, 3)
    return h


def error_class(code: int):
    """The exception class of an error answer's ``code`` (RunStopped when unknown)."""
    return _ERRORS.get(code, RunStopped)


def unpack_meta(h) -> tuple:
    """The ``(dtype, shape)`` of a request's header."""
    ndim = int(h[5])
    return numpy.dtype(chr(int(h[3]))), tuple(int(n) for n in h[8:8 + ndim])
