"""Recurrent sequence functions over ``(batch, time, features)``: :func:`lstm` (Chainer's gates)
and :func:`gru` (MXNet's gates).

Each is one :class:`~trainer_run.autograd.Function` over the whole sequence: the forward loops
over the time steps and keeps what the backward needs; the backward runs back-propagation
through time in one reverse loop. Its one output is the sequence of hidden states ``hs`` of
shape ``(B, T, H)``; the last hidden state is ``hs[:, -1]``. A loss on the outputs
back-propagates through every step and into the initial states; a state carried to the next
call (``hs.data[:, -1]``, and the LSTM's final cell state, returned as a plain array) is
detached, as truncated back-propagation through time does.

The weights have Chainer's and MXNet's ``(out, in)`` shape, as :func:`linear`'s ``W``: the
input weight ``W`` is ``(G * H, in)`` and the recurrent one ``U`` is ``(G * H, H)``, with
``G`` gates.
"""

from __future__ import annotations

import contextlib

from .. import blas_threads
from ..autograd import Function, Variable, as_data
from ..backend import array_module
from .activation import logistic


def _check(x, W, U, gates: int, biases: dict, states: dict) -> int:
    """Raises ValueError unless the shapes fit together; returns the hidden size H."""
    if len(x.shape) != 3 or x.shape[1] == 0:
        raise ValueError(f"x must have shape (batch, time, features) with a time step, got {x.shape}")
    hidden = U.shape[1] if len(U.shape) == 2 else 0
    if hidden == 0 or U.shape != (gates * hidden, hidden):
        raise ValueError(f"U must have shape ({gates} * H, H), got {U.shape}")
    if W.shape != (gates * hidden, x.shape[2]):
        raise ValueError(f"W must have shape ({gates * hidden}, {x.shape[2]}) ({gates} * H, the "
                         f"features of x), got {W.shape}")
    wanted = {name: (gates * hidden,) for name in biases} | {name: (x.shape[0], hidden) for name in states}
    for name, a in (biases | states).items():
        if a is not None and a.shape != wanted[name]:
            raise ValueError(f"{name} must have shape {wanted[name]}, got {a.shape}")
    return hidden


def _initial(x, state, hidden):
    """The given state, or zeros of ``(B, H)`` in ``x``'s type."""
    if state is not None:
        return state
    return array_module(as_data(x)).zeros((x.shape[0], hidden), dtype=x.dtype)


def _previous(h0, hs):
    """The hidden state each step starts from: ``h0``, then ``hs[:, :-1]``, as ``(B, T, H)``."""
    return array_module(hs).concatenate([h0[:, None], hs[:, :-1]], axis=1)


@contextlib.contextmanager
def _one_blas_thread():
    """The steps' products (a batch of rows by ``G * H``) on one BLAS thread: OpenBLAS splits
    products this small among its threads for no gain, and each waits for every thread, so a
    core busy with another process stalls every step. The count is restored after."""
    before = blas_threads.current()
    if before is None or before == 1:
        yield
        return
    blas_threads.use(1)
    try:
        yield
    finally:
        blas_threads.use(before)


def _blocked(a, gates: int):
    """``a``'s rows (``gates * H`` of them) from Chainer's per-unit order (row ``gates * j + k``
    is gate ``k`` of unit ``j``) to blocks of ``H`` per gate (row ``k * H + j``), copied."""
    return a.reshape(-1, gates, *a.shape[1:]).swapaxes(0, 1).reshape(a.shape)


def _per_unit(a, gates: int):
    """The inverse of :func:`_blocked`: rows in blocks of ``H`` per gate back to per unit."""
    return a.reshape(gates, -1, *a.shape[1:]).swapaxes(0, 1).reshape(a.shape)


class LSTM(Function):
    """Chainer's LSTM over a sequence. The ``4H`` pre-activation of a step interleaves the gates
    per unit, as Chainer's ``_extract_gates`` reads it: column ``4 j + k`` is gate ``k`` (a, i,
    f, o) of unit ``j``.

    Inside, the weights' rows are copied into blocks of ``H`` per gate and the sequence is laid
    out time-major, ``(T, B, .)``, so that each step's gates are contiguous rows: the
    pre-activations of every step come from one product and each step adds ``h @ U.T`` to its
    own and turns it into the gates in place (the ``(T, B, 4H)`` array the backward keeps).
    The gradients of the weights are put back in the per-unit order."""

    def forward(self, x, h0, c0, W, U, b):
        xp = array_module(x)
        B, T, _ = x.shape
        H = U.shape[1]
        self._W, self._U = _blocked(W, 4), _blocked(U, 4)
        self._x = x_t = x.swapaxes(0, 1).reshape(T * B, -1)
        self._acts = (x_t @ self._W.T + _blocked(b, 4)).reshape(T, B, 4 * H)
        self._cs = xp.empty((T, B, H), dtype=x.dtype)
        self._tcs = xp.empty((T, B, H), dtype=x.dtype)
        self._hs = hs = xp.empty((T, B, H), dtype=x.dtype)
        with _one_blas_thread():
            self._steps(h0, c0)
        self._h0, self._c0 = h0, c0
        return hs.swapaxes(0, 1)

    def _steps(self, h, c):
        """Each step's gates into ``acts[t]`` (in place), cell state, its tanh and output."""
        xp, acts, cs, tcs, hs = array_module(self._acts), self._acts, self._cs, self._tcs, self._hs
        T, B, H = hs.shape
        recurrent, fc = xp.empty((B, 4 * H), dtype=hs.dtype), xp.empty((B, H), dtype=hs.dtype)
        half, U_T = hs.dtype.type(0.5), xp.ascontiguousarray(self._U.T)
        for t in range(T):
            z = acts[t]
            xp.matmul(h, U_T, out=recurrent)
            z += recurrent
            a, ifo = z[:, :H], z[:, H:]
            xp.tanh(a, out=a)
            ifo *= half  # the sigmoid, as activation.logistic computes it
            xp.tanh(ifo, out=ifo)
            ifo *= half
            ifo += half
            i, f, o = ifo[:, :H], ifo[:, H:2 * H], ifo[:, 2 * H:]
            xp.multiply(a, i, out=cs[t])
            xp.multiply(f, c, out=fc)
            cs[t] += fc
            xp.tanh(cs[t], out=tcs[t])
            xp.multiply(o, tcs[t], out=hs[t])
            h, c = hs[t], cs[t]

    def _back_steps(self, ghs):
        """Back-propagation through the steps, last first: the pre-activations' gradients
        ``(T, B, 4H)`` and those of the initial states; ``ghs`` is time-major."""
        xp, acts, cs, tcs, hs = array_module(self._acts), self._acts, self._cs, self._tcs, self._hs
        T, B, H = hs.shape
        one = hs.dtype.type(1)
        gz = xp.empty_like(acts)
        gh = xp.zeros((B, H), dtype=hs.dtype)
        gc = xp.zeros((B, H), dtype=hs.dtype)
        u, v = xp.empty((B, H), dtype=hs.dtype), xp.empty((B, H), dtype=hs.dtype)
        for t in range(T - 1, -1, -1):
            z, g = acts[t], gz[t]
            a, i, f, o = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
            ga, gi, gf, go = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            c_prev, tc = cs[t - 1] if t > 0 else self._c0, tcs[t]
            gh += ghs[t]
            # gc += gh * o * (1 - tc * tc)
            xp.multiply(tc, tc, out=u)
            xp.subtract(one, u, out=u)
            xp.multiply(gh, o, out=v)
            v *= u
            gc += v
            # ga = gc * i * (1 - a * a); gi = gc * a * i * (1 - i)
            xp.multiply(a, a, out=u)
            xp.subtract(one, u, out=u)
            xp.multiply(gc, i, out=ga)
            ga *= u
            xp.subtract(one, i, out=u)
            xp.multiply(gc, a, out=gi)
            gi *= i
            gi *= u
            # gf = gc * c_prev * f * (1 - f); go = gh * tc * o * (1 - o)
            xp.subtract(one, f, out=u)
            xp.multiply(gc, c_prev, out=gf)
            gf *= f
            gf *= u
            xp.subtract(one, o, out=u)
            xp.multiply(gh, tc, out=go)
            go *= o
            go *= u
            gc *= f
            xp.matmul(g, self._U, out=gh)
        return gz, gh, gc

    def backward(self, ghs):
        xp = array_module(ghs)
        T, B, H = self._hs.shape
        with _one_blas_thread():
            gz, gh, gc = self._back_steps(ghs.swapaxes(0, 1))
        gz = gz.reshape(T * B, 4 * H)
        n = self.needs
        gx = (gz @ self._W).reshape(T, B, -1).swapaxes(0, 1) if n[0] else None
        gW = _per_unit(gz.T @ self._x, 4) if n[3] else None
        if n[4]:
            previous = xp.concatenate([self._h0[None], self._hs[:-1]]).reshape(T * B, H)
            gU = _per_unit(gz.T @ previous, 4)
        else:
            gU = None
        gb = _per_unit(gz.sum(axis=0), 4) if n[5] else None
        return gx, gh, gc, gW, gU, gb


class GRU(Function):
    """MXNet's GRU over a sequence. The ``3H`` pre-activations hold the gates in blocks of
    ``H``: reset ``r``, update ``z``, then the candidate ``n``."""

    def forward(self, x, h0, W, U, b_x, b_h):
        xp = array_module(x)
        B, T, _ = x.shape
        H = U.shape[1]
        xw = (x.reshape(B * T, -1) @ W.T + b_x).reshape(B, T, 3 * H)
        self._acts = acts = xp.empty((B, T, 3 * H), dtype=x.dtype)
        self._hn = hn = xp.empty((B, T, H), dtype=x.dtype)
        hs = xp.empty((B, T, H), dtype=x.dtype)
        h = h0
        for t in range(T):
            hu = h @ U.T + b_h
            rz = logistic(xw[:, t, :2 * H] + hu[:, :2 * H])
            r, z = rz[:, :H], rz[:, H:]
            n = xp.tanh(xw[:, t, 2 * H:] + r * hu[:, 2 * H:])
            h = (1 - z) * n + z * h
            acts[:, t, :2 * H], acts[:, t, 2 * H:] = rz, n
            hn[:, t], hs[:, t] = hu[:, 2 * H:], h
        self._x, self._h0, self._W, self._U, self._hs = x, h0, W, U, hs
        return hs

    def backward(self, ghs):
        xp = array_module(ghs)
        acts, hn, hs, U = self._acts, self._hn, self._hs, self._U
        B, T, H = hs.shape
        gxw = xp.empty_like(acts)
        ghu = xp.empty_like(acts)
        gh = xp.zeros((B, H), dtype=hs.dtype)
        for t in range(T - 1, -1, -1):
            r, z, n = acts[:, t, :H], acts[:, t, H:2 * H], acts[:, t, 2 * H:]
            h_prev = hs[:, t - 1] if t > 0 else self._h0
            gh = gh + ghs[:, t]
            gn = gh * (1 - z) * (1 - n * n)
            gr = gn * hn[:, t] * r * (1 - r)
            gz = gh * (h_prev - n) * z * (1 - z)
            gxw[:, t, :H], gxw[:, t, H:2 * H], gxw[:, t, 2 * H:] = gr, gz, gn
            ghu[:, t, :2 * H], ghu[:, t, 2 * H:] = gxw[:, t, :2 * H], gn * r
            gh = gh * z + ghu[:, t] @ U
        gxw = gxw.reshape(B * T, 3 * H)
        ghu = ghu.reshape(B * T, 3 * H)
        x2 = self._x.reshape(B * T, -1)
        n = self.needs
        gx = (gxw @ self._W).reshape(self._x.shape) if n[0] else None
        gW = gxw.T @ x2 if n[2] else None
        gU = ghu.T @ _previous(self._h0, hs).reshape(B * T, H) if n[3] else None
        gb_x = gxw.sum(axis=0) if n[4] else None
        gb_h = ghu.sum(axis=0) if n[5] else None
        return gx, gh, gW, gU, gb_x, gb_h


def lstm(x, h0, c0, W, U, b) -> tuple[Variable, object]:
    """An LSTM over ``x`` of shape ``(B, T, in)`` with Chainer's gates (``chainer.functions.lstm``):
    at each step the pre-activation ``x_t @ W.T + b + h @ U.T`` (``W`` of ``(4H, in)``, ``U`` of
    ``(4H, H)``, ``b`` of ``(4H,)``) is read per unit as the gates ``a, i, f, o`` (column
    ``4 j + k`` is gate ``k`` of unit ``j``), then ``c = tanh(a) sigmoid(i) + sigmoid(f) c`` and
    ``h = sigmoid(o) tanh(c)``.

    ``h0`` and ``c0`` of ``(B, H)`` start the sequence (None: zeros). Returns the hidden states
    ``hs`` of ``(B, T, H)`` (a Variable) and the final cell state ``c_T`` of ``(B, H)``, a plain
    array with no gradient: a loss on ``hs`` back-propagates through the whole sequence into
    ``x``, ``h0``, ``c0`` and the weights, and a state carried on is detached.
    """
    hidden = _check(x, W, U, 4, {"b": b}, {"h0": h0, "c0": c0})
    h0, c0 = _initial(x, h0, hidden), _initial(x, c0, hidden)
    function = LSTM()
    hs = function(x, h0, c0, W, U, b)
    return hs, function._cs[-1].copy()


def gru(x, h0, W, U, b_x, b_h) -> Variable:
    """A GRU over ``x`` of shape ``(B, T, in)`` with MXNet 1.x's gates (``gluon.rnn.GRU``): with
    ``W`` of ``(3H, in)``, ``U`` of ``(3H, H)`` and the biases ``b_x``, ``b_h`` of ``(3H,)``, each
    in blocks of ``H`` for the gates ``r, z, n``,
    ``r = sigmoid(W_r x + b_xr + U_r h + b_hr)``, ``z`` likewise,
    ``n = tanh(W_n x + b_xn + r (U_n h + b_hn))`` and ``h' = (1 - z) n + z h``.

    ``h0`` of ``(B, H)`` starts the sequence (None: zeros). Returns the hidden states ``hs`` of
    ``(B, T, H)``; a loss on them back-propagates through the whole sequence into ``x``, ``h0``
    and the weights, and a state carried on (``hs.data[:, -1]``) is detached.
    """
    hidden = _check(x, W, U, 3, {"b_x": b_x, "b_h": b_h}, {"h0": h0})
    return GRU()(x, _initial(x, h0, hidden), W, U, b_x, b_h)
